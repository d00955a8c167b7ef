"""The generator protocol: exactly the calls the Tenstorrent vLLM plugin makes on a tt-metal
generator (``vllm_tt_plugin`` model runner and async decode), with torch tensors at the
boundary as the plugin passes them.

Any object with these four methods can be put under the suite (``--generator MODULE:ATTR``);
``model.generator.Generator`` is one implementation, a user's tt-metal ``Generator``
subclass is another. Read from tt-metal's ``models/tt_transformers/tt/generator.py``
(50868c00) and the plugin's ``model_runner.py`` / ``async_decode.py``:

- prefill: ``tokens`` [B, S] int (rows padded past their end), ``page_table`` [B, pages]
  int32, ``prompt_lens`` [B]: the END position of the chunk scheduled this step (the
  generator processes ``tokens[i, start_pos[i]:prompt_lens[i]]``), ``start_pos`` [B]: the
  tokens already computed, ``empty_slots``: the device state slot of each row. Returns the
  sampled first token per row [B] (a row whose chunk does not finish its prompt is ignored).
- decode: ``tokens`` [B, 1], ``start_pos`` [B] (-1: a padding row), ``page_table`` [B, pages],
  ``reset_batch``: the padded decode layout changed since the last decode,
  ``slot_remap`` [max_slots] or None: row ``i`` reads state slot ``slot_remap[i]``.
  With ``read_from_device=False`` it returns device output for a deferred read.
- ``read_decode_output(out, async_read=True)`` returns ``(host_output, read_events)``; the
  caller waits on the events with ``ttnn.event_synchronize`` and then calls
  ``process_decode_output_host(host_output, is_tokens=True)``, which returns tokens [B, 1].

Two dialects of ``decode_forward``, chosen by the generator's ``decode_input_update_contract``:
0 (or absent) is the legacy ``reset_batch``, what the plugin at e3fc8494 sends and so what
production's generator speaks; 1 is tt-metal's ``models/common/decode_contract.py``: no
``reset_batch`` (refused by name), and instead four commands on every decode,
``reload_inputs`` (host inputs authoritative: restage all), ``reload_page_table`` (the page
table only), ``reload_sampling_params`` and ``reset_sampling_state``. The runner speaks
whichever the generator declares (model/serving.py).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

#: the methods a generator must have, in the order the plugin first calls them
METHODS = ("prefill_forward", "decode_forward", "read_decode_output", "process_decode_output_host")


@runtime_checkable
class GeneratorProtocol(Protocol):
    def prefill_forward(self, tokens, page_table=None, kv_cache=None, prompt_lens=None, empty_slots=None,
                        start_pos=None, sampling_params=None, **kwargs) -> Any: ...

    def decode_forward(self, tokens, start_pos, page_table=None, kv_cache=None, enable_trace=True,
                       read_from_device=True, sampling_params=None, reset_batch=False, slot_remap=None,
                       **kwargs) -> Any: ...

    def read_decode_output(self, tt_out, async_read=False) -> Any: ...

    def process_decode_output_host(self, tt_out, is_tokens=False) -> Any: ...


class GeneratorProtocolError(TypeError):
    """An object that does not speak the protocol: the message names the missing method."""


def missing_methods(obj) -> list[str]:
    """The protocol methods ``obj`` (a class or an instance) lacks, or has as non-callables."""
    return [m for m in METHODS if not callable(getattr(obj, m, None))]


def check(obj, what: str) -> None:
    missing = missing_methods(obj)
    if missing:
        raise GeneratorProtocolError(f"{what} does not speak the generator protocol: no method "
                                     f"{', '.join(missing)} (needs {', '.join(METHODS)}; see model/protocol.py)")


def host_tokens(generator, ttnn, host, events) -> list[int]:
    """The plugin's finalisation of a decode read: wait on the read's events
    (``ttnn.event_synchronize``), then the host formatting; the sampled token per row as ints."""
    for event in events or ():
        ttnn.event_synchronize(event)
    return [int(t) for t in generator.process_decode_output_host(host, is_tokens=True).reshape(-1).tolist()]


def read_tokens(generator, ttnn, out) -> list[int]:
    """A decode submitted with ``read_from_device=False``, read at once as the plugin reads it
    (``read_decode_output(out, async_read=True)``, then :func:`host_tokens`)."""
    host, events = generator.read_decode_output(out, async_read=True)
    return host_tokens(generator, ttnn, host, events)
