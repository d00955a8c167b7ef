"""The generator contract: exactly the calls the Tenstorrent vLLM plugin makes on a tt-metal
model class (``generator_vllm.py``'s classes), in its order, with its argument names.

Read from ``tenstorrent/vllm-tt-plugin`` @ e3fc8494 (``loader.py``, ``model_runner.py``,
``async_decode.py``) and tt-metal's ``models/tt_transformers/tt/generator.py`` @ 50868c00 /
``generator_vllm.py``. The runner (model/serving.py) makes these calls and no others:

1. build: ``cls.initialize_vllm_model(hf_config, mesh_device, max_batch_size, max_seq_len=,
   tt_data_parallel=1, optimizations=None)`` (the plugin's loader), or a factory
   (``--generator MODULE:ATTR``, harness/loader.py);
2. KV cache, owned by the model: ``allocate_kv_cache_per_layer(specs)`` when present (hybrid
   models; ``specs``: one ``(shape, dtype, tensor_idx)`` per attention layer), else
   ``allocate_kv_cache(shape, dtype, num_layers)``, ``shape`` = ``(blocks, kv_heads,
   block_size, head_dim)``. The result is passed back as ``kv_cache=`` on every call below;
3. warm-up in two phases, so that no allocation happens during a capture:
   ``warmup_model_prefill(enable_trace=False, kv_cache=, can_sample_on_device=)`` and
   ``warmup_model_decode(enable_trace=False, kv_cache=, max_batch_size=, num_blocks=,
   can_sample_on_device=)`` (compile), ``already_warmed_up_prefill`` reset to False when the
   model has it, then the same two with ``enable_trace=True`` (capture): prefill first and only
   when prefill is traced (``trace_mode`` "all", the default), then decode;
4. prefill: ``prefill_forward(tokens=[B, S], page_table=[B, pages], kv_cache=,
   enable_trace=<prefill traced>, prompt_lens=[B] (the END of the chunk scheduled), start_pos=[B] (tokens
   already computed), empty_slots=[B] (each row's state slot), [sampling_params=])``; the
   generator processes ``tokens[i, start_pos[i]:prompt_lens[i]]``. ``sampling_params`` only
   with on-device prefill sampling (``sample_on_device="all"``): it returns tokens; else
   logits (``[B, 1, vocab]`` or ``[B, vocab]``) that the runner samples (greedy). Either may
   come as a pair whose first entry is the output;
5. decode: ``decode_forward(tokens=[B, 1], page_table=, kv_cache=, start_pos=[B] (-1: a
   padding row), [sampling_params=, reset_batch=] (only with on-device sampling),
   [slot_remap=[B]] (row ``i`` takes state slot ``slot_remap[i]``; sent only when rows moved),
   enable_trace=True, read_from_device=False)``. ``B`` is always ``max_batch_size``: the plugin
   pads decode to capacity. Host tokens are one step stale between reloads (async scheduling);
   at ``reset_batch`` and at the first decode after a prefill the host is fresh;
6. ``read_decode_output(out, async_read=True)`` -> ``(host_output, events)``, then
   ``ttnn.event_synchronize`` on each event, then ``process_decode_output_host(host_output,
   is_tokens=<on-device sampling>)`` -> tokens (or logits) ``[B, ...]``, or a pair whose first
   entry is that. Both are optional when ``decode_forward`` already returns host tensors.

A second decode dialect: a generator declaring ``decode_input_update_contract = 1`` gets tt-metal's
``models/common/decode_contract.py`` commands (``reload_inputs``, ``reload_page_table``,
``reload_sampling_params``, ``reset_sampling_state``) instead of ``reset_batch``.

The signatures, with the plugin's keyword names, are the typed Protocols below
(:class:`PluginGenerator`, :class:`KvCacheOwner` / :class:`PerLayerKvCacheOwner`,
:class:`DecodeReader`): the loader's check (:func:`check`) and every error naming a call read
them, so the docs, the check and the runner cannot disagree.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Protocol

import torch
from torch import Tensor

class PluginGenerator(Protocol):
    """What the plugin calls on every model class, unconditionally, in its order, with its keyword
    names (the runner passes every argument by keyword; model/serving.py). ``[...]`` in a
    docstring: passed only in the mode named there. A KV allocator is one of
    :class:`KvCacheOwner` / :class:`PerLayerKvCacheOwner`; the reads are :class:`DecodeReader`."""

    def warmup_model_prefill(self, enable_trace: bool, kv_cache: Any, can_sample_on_device: bool) -> None:
        """Compile (``enable_trace=False``), then capture (``enable_trace=True``) when prefill is traced."""

    def warmup_model_decode(self, enable_trace: bool, kv_cache: Any, max_batch_size: int, num_blocks: int,
                            can_sample_on_device: bool) -> None:
        """Compile, then capture (``enable_trace=True``): allocate persistent inputs here."""

    def prefill_forward(self, tokens: Tensor, page_table: Tensor, kv_cache: Any, enable_trace: bool,
                        prompt_lens: Tensor, start_pos: Tensor, empty_slots: list[int],
                        sampling_params: Any = None) -> Any:
        """``tokens[i, start_pos[i]:prompt_lens[i]]`` into slot ``empty_slots[i]``; logits
        ``[B, 1, vocab]`` for the runner to sample, or tokens ``[B]`` [with ``sampling_params``:
        ``sample_on_device="all"``]; either may come as a pair whose first entry is it."""

    def decode_forward(self, tokens: Tensor, page_table: Tensor, kv_cache: Any, start_pos: Tensor,
                       enable_trace: bool, read_from_device: bool, sampling_params: Any = None,
                       reset_batch: bool | None = None, slot_remap: Tensor | None = None) -> Any:
        """One decode of ``max_batch_size`` rows (padding: position -1) [``sampling_params`` and
        ``reset_batch`` with on-device sampling; ``slot_remap`` when rows moved]."""


class KvCacheOwner(Protocol):
    def allocate_kv_cache(self, shape: tuple, dtype: Any, num_layers: int) -> Any:
        """The paged KV cache, ``shape`` = (blocks, kv_heads, block_size, head_dim)."""


class PerLayerKvCacheOwner(Protocol):
    def allocate_kv_cache_per_layer(self, specs: list[tuple]) -> Any:
        """A hybrid model's KV cache: one ``(shape, dtype, tensor_idx)`` per attention layer."""


class DecodeReader(Protocol):
    """Optional when ``decode_forward`` returns host tensors."""

    def read_decode_output(self, out: Any, async_read: bool) -> tuple[Any, list]:
        """Enqueue the read of a decode's output: ``(host_output, events)``."""

    def process_decode_output_host(self, host_output: Any, is_tokens: bool) -> Any:
        """Tokens (``[B]`` or ``[B, 1]``, or a pair whose first entry is that) after the events."""


def _calls(*protocols) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(getattr(p, name)) for p in protocols for name in p.__dict__
            if not name.startswith("_") and callable(getattr(p, name))}


#: the calls the plugin makes unconditionally, in its order
REQUIRED = tuple(_calls(PluginGenerator))
#: one of these allocates the KV cache (the per-layer one preferred when present)
KV_ALLOCATORS = ("allocate_kv_cache_per_layer", "allocate_kv_cache")
_SIGNATURES = _calls(PluginGenerator, KvCacheOwner, PerLayerKvCacheOwner, DecodeReader)


def call_text(name: str) -> str:
    """How the plugin calls ``name``, from its Protocol: ``decode_forward(tokens, page_table, ...)``."""
    params = [p.name for p in _SIGNATURES[name].parameters.values() if p.name != "self"]
    return f"{name}({', '.join(params)})"


#: what the plugin would pass, named in the error for a missing method
PLUGIN_CALLS = {name: call_text(name) for name in _SIGNATURES}
PLUGIN_CALLS["allocate_kv_cache"] += " (or allocate_kv_cache_per_layer(specs))"
#: ``sample_on_device`` modes, as the plugin's ``sample_on_device_mode`` (None: host sampling)
SAMPLE_ON_DEVICE = ("all", "decode_only", None)


class GeneratorProtocolError(TypeError):
    """A generator that does not speak the contract: one line naming the method and the call."""


def missing_methods(obj) -> list[str]:
    """The contract's methods ``obj`` (a class or an instance) lacks; a KV allocator counts once."""
    missing = [] if any(callable(getattr(obj, m, None)) for m in KV_ALLOCATORS) else ["allocate_kv_cache"]
    return missing + [m for m in REQUIRED if not callable(getattr(obj, m, None))]


#: the keywords the plugin passes by name, per method (the KV allocators take positions; the
#: reads take their output positionally)
KEYWORDS = {**{name: [p for p in _SIGNATURES[name].parameters if p != "self"] for name in REQUIRED},
            "read_decode_output": ["async_read"], "process_decode_output_host": ["is_tokens"]}


def refused_keywords(obj, name: str) -> list[str]:
    """The keywords the plugin passes to ``name`` that ``obj``'s method cannot take (a method
    with ``**kwargs`` takes them all; a signature Python cannot read is taken as it comes)."""
    method = getattr(obj, name, None)
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return []
    takes = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    return [k for k in KEYWORDS[name] if k not in takes]


def check(obj, what: str) -> None:
    """Refuse, in one line, a generator (class or instance) the plugin could not drive: a
    method missing, or one that cannot take a keyword the plugin passes."""
    missing = missing_methods(obj)
    if missing:
        raise GeneratorProtocolError(f"{what} does not speak the plugin's contract: no method "
                                     + "; no method ".join(PLUGIN_CALLS[m] for m in missing)
                                     + " (model/protocol.py)")
    for name in (n for n in KEYWORDS if callable(getattr(obj, n, None))):
        refused = refused_keywords(obj, name)
        if refused:
            raise GeneratorProtocolError(f"{what} does not speak the plugin's contract: {name} takes no keyword "
                                         f"{', '.join(refused)}; the plugin calls {PLUGIN_CALLS[name]} by keyword "
                                         f"(model/protocol.py)")


@dataclass
class SamplingParams:
    """The plugin's ``TTSamplingParams`` as it hands them to a model for on-device sampling:
    one list entry per row. The runner serves greedy requests (production's stage 3)."""
    temperature: list
    top_k: list
    top_p: list
    presence_penalty: list
    frequency_penalty: list
    repetition_penalty: list
    seed: list
    num_logprobs: list | None = None
    enable_log_probs: list | None = None

    @classmethod
    def greedy(cls, rows: int) -> "SamplingParams":
        return cls(temperature=[0.0] * rows, top_k=[1] * rows, top_p=[1.0] * rows, presence_penalty=[0.0] * rows,
                   frequency_penalty=[0.0] * rows, repetition_penalty=[1.0] * rows, seed=[None] * rows,
                   num_logprobs=[-2] * rows, enable_log_probs=[False] * rows)


def is_greedy(sampling_params) -> bool:
    """Every row of a ``TTSamplingParams``-shaped object greedy: temperature 0 or top-k 1
    (either makes the sample the argmax); a scalar field applies to every row."""
    def per_row(v) -> list:
        if isinstance(v, torch.Tensor):
            return v.reshape(-1).tolist()
        return list(v) if isinstance(v, (list, tuple)) else [v]

    temps, top_ks = per_row(sampling_params.temperature), per_row(sampling_params.top_k)
    n = max(len(temps), len(top_ks))  # a one-entry field (a scalar) covers every row
    temps, top_ks = (temps * n if len(temps) == 1 else temps), (top_ks * n if len(top_ks) == 1 else top_ks)
    return all(t == 0.0 or k == 1 for t, k in zip(temps, top_ks))


def first_of(out) -> Any:
    """A model's output, or the first entry of the ``(output, extra)`` pair the plugin unpacks."""
    return out[0] if isinstance(out, tuple) else out


def is_host_output(out) -> bool:
    """Host tensors (or a tuple of them / None): what needs no read (the plugin's test)."""
    if isinstance(out, torch.Tensor):
        return True
    return isinstance(out, tuple) and all(t is None or isinstance(t, torch.Tensor) for t in out)


def tokens_of(out, rows: int | None, *, sampled: bool, call: str) -> list[int]:
    """The token per row (the first ``rows``; None: every row) of a model output: tokens as
    sampled on the device, or greedy samples of host logits (the plugin's host sampler at
    temperature 0). The shape is checked in full, as the plugin unpacks it: tokens ``[B]`` or
    ``[B, 1]`` of an integer dtype, logits ``[B, vocab]`` or ``[B, 1, vocab]`` of a floating
    one, ``B`` at least ``rows``. ``call`` names the method in the one-line error."""
    t = first_of(out)
    if not isinstance(t, torch.Tensor):
        raise GeneratorProtocolError(f"{call} returned {type(t).__name__}; the plugin expects a torch tensor "
                                     f"(or a pair whose first entry is one) here")
    shape = tuple(t.shape)
    if sampled:
        if not (t.dim() == 1 or (t.dim() == 2 and shape[1] == 1)) or t.is_floating_point() or t.is_complex():
            raise GeneratorProtocolError(f"{call} returned a {t.dtype} tensor of shape {shape}; sampled tokens are "
                                         f"integer ids of shape [B] or [B, 1]")
        rows = shape[0] if rows is None else rows
        if shape[0] < rows:
            raise GeneratorProtocolError(f"{call} returned {shape[0]} tokens for {rows} rows (shape {shape})")
        return [int(x) for x in t.reshape(-1)[:rows].tolist()]
    rows = shape[0] if rows is None else rows
    if not (t.dim() == 2 or (t.dim() == 3 and shape[1] == 1)) or shape[0] < rows or not t.is_floating_point():
        raise GeneratorProtocolError(f"{call} returned a {t.dtype} tensor of shape {shape}; host sampling expects "
                                     f"floating logits [{rows}, vocab] or [{rows}, 1, vocab]")
    return [int(x) for x in torch.argmax(t[:rows].reshape(rows, -1, shape[-1])[:, -1], dim=-1).tolist()]


def read_output(generator, ttnn, out, rows: int | None = None, *, sampled: bool = True) -> list[int]:
    """A decode output read as the plugin finalizes it: ``read_decode_output(out,
    async_read=True)`` when the output is not on the host yet, ``ttnn.event_synchronize`` on
    its events, ``process_decode_output_host``; the token per row (the first ``rows``, None:
    every row; ``sampled``: sampled on the device, else host logits sampled greedily)."""
    host, events = begin_read(generator, out)
    return finish_read(generator, ttnn, host, events, rows, sampled=sampled)


def begin_read(generator, out):
    """The read's submission (``read_decode_output(out, async_read=True)``), or the output as
    it is when it is already on the host."""
    if is_host_output(out):
        return out, None
    if not callable(getattr(generator, "read_decode_output", None)):
        raise GeneratorProtocolError(f"{type(generator).__name__}: no method {PLUGIN_CALLS['read_decode_output']}, "
                                     f"and decode_forward(read_from_device=False) did not return host tensors")
    pair = generator.read_decode_output(out, async_read=True)
    if not (isinstance(pair, tuple) and len(pair) == 2):
        raise GeneratorProtocolError(f"{type(generator).__name__}.read_decode_output(out, async_read=True) returned "
                                     f"{type(pair).__name__}; the plugin unpacks (host_output, events)")
    return pair


def finish_read(generator, ttnn, host, events, rows: int | None, *, sampled: bool) -> list[int]:
    for event in events or ():
        ttnn.event_synchronize(event)
    if not is_host_output(host):
        if not callable(getattr(generator, "process_decode_output_host", None)):
            raise GeneratorProtocolError(f"{type(generator).__name__}: no method "
                                         f"{PLUGIN_CALLS['process_decode_output_host']}, and the read output is "
                                         f"not a host tensor")
        host = generator.process_decode_output_host(host, is_tokens=sampled)
    return tokens_of(host, rows, sampled=sampled, call=f"{type(generator).__name__}.process_decode_output_host")


#: greedy sampling parameters for direct calls on a batch of up to 8 rows (tests, tools)
GREEDY = SamplingParams.greedy(8)
