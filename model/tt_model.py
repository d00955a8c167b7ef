"""Our two models behind tt_transformers' model interface, for generators written against tt-metal.

tt-metal's shared ``Generator`` (``models/tt_transformers/tt/generator.py``) drives a model
(``models/tt_transformers/tt/model.py``'s ``Transformer`` and its subclasses) through a handful
of methods and a ``model_args`` object. :class:`TtModelAdapter` gives the sweep model
(:class:`model.markov.MarkovModel`) and the Qwen3.6-style hybrid (:class:`model.qwen36.Qwen36Model`)
those methods, so a generator in the shape of tt-metal's can run them:

- ``prepare_decode_inputs_host(tokens, current_pos, page_table=None)`` -> host tensors
  ``(tokens, current_pos, rope_idxs, page_table, slots)``, ready for ``copy_host_to_device``
  (into a trace's persistent inputs, or freshly allocated: :func:`copy_host_to_device`);
  ``prepare_inputs_decode(...)`` is the same, copied to the device.
- ``ttnn_decode_forward(x, current_pos, rot_mat_idxs=None, page_table=None, kv_cache=None,
  sampling_on_device=False, slots=None)``: device only and traceable. With
  ``sampling_on_device`` the greedy token is written into ``x`` on the device (argmax, as
  upstream's sampling writes into ``tt_out_tok=x``) and ``plus_one`` advances
  ``current_pos`` (rows at -1 stay -1); it returns ``(tokens, None)``, the sampling
  module's ``(tt_tokens, tt_log_probs)``. Without it, the logits ``[1, 1, B, vocab]``.
- ``process_output_decode(tt_out, B, S=1, is_tokens=False)``: a host tensor -> torch
  (tokens ``[B]``, or logits ``[B, S, vocab]``), from chip 0's shard.
- ``prepare_inputs_prefill(tokens, start_pos=0, page_table=None, chunk_page_table=None,
  trace_enabled=False, user_id=0)`` / ``ttnn_prefill_forward(x, rot_mats_global=None,
  rot_mats_local=None, user_id=0, page_table=None, chunk_page_table=None,
  chunk_start_idx=None, get_last_token=-1, kv_cache=None)`` / ``process_output_prefill``.
- ``switch_mode(mode)``, ``model_args`` (also ``args``: :class:`ModelArgs`), ``gather_slots``.

Where ours differs from upstream, and why:

- Decode inputs carry a fifth entry, ``slots`` ``[B]`` int32 (row ``r`` reads state slot
  ``slots[r]``, -1 for an inactive row): our models keep per-slot recurrent state and read
  it by slot, where upstream's ``Transformer`` keeps none. Upstream lets a model return
  entries past the common four (Gemma4 does) and binds them with
  ``bind_decode_trace_inputs``; that is here too, or pass ``slots=`` directly.
- ``rope_idxs`` is None: both models turn positions into rotations on the device.
- Tokens are ``[1, B]`` uint32 ROW_MAJOR, not padded to 32 and unsqueezed to 4-D, because
  that is our models' decode contract (``model.qwen36.Qwen36Model.decode``).
- ``B`` is any bucket up to ``max_batch_size`` (upstream asserts ``B == max_batch_size``):
  the serving path here runs one trace per batch bucket, as the Tenstorrent plugin does.
- Prefill is not split into host preparation and a device forward inside our models:
  they embed on the device and read the last token's logits back themselves. So
  ``prepare_inputs_prefill`` returns the host-side values (token ids, page-table row,
  start) in upstream's tuple slots, ``ttnn_prefill_forward`` returns host logits
  ``[vocab]`` (float32), and ``process_output_prefill`` passes them through. Prefill is
  never traced (``model_args.can_enable_trace`` is False).
- ``kv_cache`` is accepted and ignored: the models own their paged caches.

The module never imports ttsim or ttnn: it is handed the ttnn-like module, as the models are.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch

from .host_ints import int32_bits

#: position of the page table in the decode input tuple (upstream's DECODE_PAGE_TABLE_INPUT_IDX)
PAGE_TABLE_INPUT_IDX = 3
#: position of the per-row state slots (ours; past upstream's common four)
SLOTS_INPUT_IDX = 4


class Mode(Enum):
    """tt_transformers' ``common.Mode``."""
    PREFILL = "prefill"
    DECODE = "decode"


@dataclass(frozen=True)
class ModelArgs:
    """The ``model_args`` attributes a tt_transformers generator reads."""
    mesh_device: object
    max_batch_size: int
    max_seq_len: int
    vocab_size: int
    dim: int
    n_layers: int
    max_prefill_chunk_size: int
    block_size: int
    max_pages: int
    num_devices: int
    cluster_shape: tuple

    def can_enable_trace(self, prefill_seq_len: int, num_cached_tokens: int = 0) -> bool:
        """Prefill is never traced here (our models read their prefill logits back)."""
        return False

    def is_llama_vision(self) -> bool:
        return False


def copy_host_to_device(host_tensors, device_tensors=None, mesh_device=None, ttnn=None):
    """Host tensors to the device: into ``device_tensors`` (same specs, e.g. a trace's
    persistent inputs; written in place with ``copy_host_to_device_tensor``), else into new
    device tensors on ``mesh_device``. None entries pass through untouched. Returns the
    device tensors. (Upstream's ``common.copy_host_to_device``; the ttnn-like module is
    passed in, since this module never imports one.)"""
    if ttnn is None:
        raise ValueError("copy_host_to_device: pass ttnn= (the ttnn-like module the tensors belong to)")
    if device_tensors is None:
        if mesh_device is None:
            raise ValueError("copy_host_to_device: pass device_tensors= or mesh_device=")
        return tuple(None if h is None else ttnn.to_device(h, mesh_device) for h in host_tensors)
    if len(device_tensors) != len(host_tensors):
        raise ValueError(f"copy_host_to_device: {len(host_tensors)} host tensors for {len(device_tensors)} "
                         f"device tensors")
    for h, d in zip(host_tensors, device_tensors):
        if h is not None:
            if d is None:
                raise ValueError("copy_host_to_device: a host tensor has no device tensor to go into")
            ttnn.copy_host_to_device_tensor(h, d)
    return device_tensors


def _ints(x, what: str) -> list[int]:
    if isinstance(x, torch.Tensor):
        if x.is_floating_point():
            raise ValueError(f"{what} must hold integers, got {x.dtype}")
        return [int(v) for v in x.reshape(-1).tolist()]
    try:
        return [int(v) for v in x]
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a sequence of ints, got {type(x).__name__}") from None


class TtModelAdapter:
    """One of our models with tt_transformers' model interface (see the module docstring).

    ``model``: a MarkovModel or Qwen36Model already on ``mesh_device``; ``ttnn`` the module it
    runs on; ``max_batch_size``: the most decode rows (the model's ``max_slots`` by default);
    ``max_pages``: page ids per page-table row (default ``max_context // block_size``).
    """

    def __init__(self, model, ttnn, mesh_device, *, max_batch_size: int | None = None,
                 max_pages: int | None = None):
        for name in ("prefill", "decode", "sample_on_device", "reset_slot", "gather_slots", "config", "max_slots"):
            if not hasattr(model, name):
                raise TypeError(f"TtModelAdapter: {type(model).__name__} has no {name!r} (expected one of our "
                                f"models: model.markov.MarkovModel or model.qwen36.Qwen36Model)")
        self.model = model
        self.ttnn = ttnn
        self.mesh_device = mesh_device
        c = model.config
        max_batch_size = model.max_slots if max_batch_size is None else max_batch_size
        if not 1 <= max_batch_size <= model.max_slots:
            raise ValueError(f"TtModelAdapter: max_batch_size={max_batch_size} must be in 1..{model.max_slots} "
                             f"(the model's slots)")
        max_pages = c.max_context // c.block_size if max_pages is None else max_pages
        shape = tuple(int(d) for d in mesh_device.shape) if hasattr(mesh_device, "shape") else (1, 1)
        self.args = self.model_args = ModelArgs(
            mesh_device=mesh_device, max_batch_size=max_batch_size, max_seq_len=c.max_context,
            vocab_size=c.vocab_size, dim=getattr(c, "hidden_size", c.vocab_size),
            n_layers=getattr(c, "num_layers", 1), max_prefill_chunk_size=c.prefill_chunk, block_size=c.block_size,
            max_pages=max_pages, num_devices=int(mesh_device.get_num_devices()), cluster_shape=shape)
        self.vocab_size = c.vocab_size
        self.mode: Mode | None = None
        self._bound_slots = None
        # the logits each token buffer's decode produced: a captured trace replays into them,
        # so they stay allocated (freed, a later buffer could land there and be overwritten)
        self._decode_logits: dict[int, object] = {}

    # -- mode and state ---------------------------------------------------------------------
    def switch_mode(self, mode: Mode) -> None:
        if not isinstance(mode, Mode):
            raise ValueError(f"switch_mode: expected a Mode, got {mode!r}")
        self.mode = mode

    def gather_slots(self, remap) -> None:
        """The model's per-slot state gather: new slot ``i`` takes old slot ``remap[i]``."""
        self.model.gather_slots(remap)

    # -- decode -----------------------------------------------------------------------------
    def _host(self, values: torch.Tensor, dtype):
        ttnn = self.ttnn
        return ttnn.from_torch(values, dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT,
                               mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device))

    def prepare_decode_inputs_host(self, tokens, current_pos, page_table=None, slots=None):
        """Host tensors ``(tokens [1, B] uint32, current_pos [B] int32, rope_idxs None,
        page_table [B, max_pages] int32 or None, slots [B] int32)``. ``tokens`` [B, 1] or [B],
        ``current_pos`` [B] (-1: an inactive row), ``page_table`` [B, max_pages]; ``slots`` [B]
        (default: row ``r`` reads slot ``r``, -1 where the row is inactive)."""
        ttnn, a = self.ttnn, self.args
        toks = _ints(tokens, "prepare_decode_inputs_host: tokens")
        pos = _ints(current_pos, "prepare_decode_inputs_host: current_pos")
        b = len(pos)
        if len(toks) != b:
            raise ValueError(f"prepare_decode_inputs_host: {len(toks)} tokens for {b} positions")
        if not 1 <= b <= a.max_batch_size:
            raise ValueError(f"prepare_decode_inputs_host: batch {b} must be in 1..{a.max_batch_size} "
                             f"(model_args.max_batch_size)")
        slot_ids = [r if p >= 0 else -1 for r, p in enumerate(pos)] if slots is None else \
            _ints(slots, "prepare_decode_inputs_host: slots")
        if len(slot_ids) != b or any(not -1 <= s < self.model.max_slots for s in slot_ids):
            raise ValueError(f"prepare_decode_inputs_host: slots must hold {b} ids in -1..{self.model.max_slots - 1}, "
                             f"got {slot_ids}")
        tt_tokens = self._host(torch.tensor([[int32_bits(t) for t in toks]], dtype=torch.int32), ttnn.uint32)
        tt_pos = self._host(torch.tensor([int32_bits(p) for p in pos], dtype=torch.int32), ttnn.int32)
        tt_pt = None
        if page_table is not None:
            pt = page_table if isinstance(page_table, torch.Tensor) else torch.tensor(page_table)
            if pt.dim() != 2 or pt.shape[0] != b or pt.shape[1] != a.max_pages or pt.is_floating_point():
                raise ValueError(f"prepare_decode_inputs_host: page_table must be int [{b}, {a.max_pages}], got "
                                 f"{pt.dtype} {list(pt.shape)}")
            tt_pt = self._host(pt.to(torch.int32).contiguous(), ttnn.int32)
        tt_slots = self._host(torch.tensor(slot_ids, dtype=torch.int32), ttnn.int32)
        return tt_tokens, tt_pos, None, tt_pt, tt_slots

    def prepare_inputs_decode(self, *inputs, **kw):
        """:meth:`prepare_decode_inputs_host`, copied to new device tensors."""
        return copy_host_to_device(self.prepare_decode_inputs_host(*inputs, **kw), mesh_device=self.mesh_device,
                                   ttnn=self.ttnn)

    def bind_decode_trace_inputs(self, device_inputs) -> None:
        """Remember the device ``slots`` input (entry 4) for :meth:`ttnn_decode_forward` calls that
        pass only upstream's four (as tt-metal's generator binds a model's extra trace inputs)."""
        if len(device_inputs) <= SLOTS_INPUT_IDX or device_inputs[SLOTS_INPUT_IDX] is None:
            raise ValueError("bind_decode_trace_inputs: the decode inputs hold no slots tensor (entry 4)")
        self._bound_slots = device_inputs[SLOTS_INPUT_IDX]

    def ttnn_decode_forward(self, x, current_pos, rot_mat_idxs=None, page_table=None, kv_cache=None,
                            sampling_on_device=False, capture_sampling_trace=False, slots=None, **kwargs):
        """One decode step on device tensors (traceable: device ops only).

        ``x`` tokens [1, B] uint32, ``current_pos`` [B] int32, ``page_table`` [B, max_pages],
        ``slots`` [B] int32 (default: the bound one). With ``sampling_on_device``: the argmax
        token is written into ``x``, ``current_pos`` advanced by ``plus_one`` (negative entries
        skipped), and ``(x, None)`` returned; otherwise the logits [1, 1, B, vocab].
        ``on_device_logits=`` (the keyword tt-metal's generator at 50868c00 passes) means the same
        as ``sampling_on_device``."""
        ttnn = self.ttnn
        sampling_on_device = bool(sampling_on_device or kwargs.pop("on_device_logits", False))
        if kwargs:
            raise TypeError(f"ttnn_decode_forward: unexpected keyword(s) {', '.join(sorted(kwargs))}")
        slots = self._bound_slots if slots is None else slots
        if slots is None:
            raise ValueError("ttnn_decode_forward: no slots tensor (pass slots= or bind_decode_trace_inputs first)")
        if page_table is None:
            raise ValueError("ttnn_decode_forward: page_table is required (our models' caches are paged)")
        logits = self.model.decode(x, current_pos, page_table, slots)
        if not sampling_on_device:
            return logits
        ttnn.plus_one(current_pos, skip_negative_entries=True)
        if capture_sampling_trace:  # upstream: the caller captures sampling itself
            return logits
        self.model.sample_on_device(logits, x)
        self.release_decode_output(x)  # the previous decode's into this buffer
        self._decode_logits[id(x)] = logits
        return x, None

    def release_decode_output(self, tokens) -> None:
        """Free the logits kept for the token buffer ``tokens`` (an untraced decode's, once read)."""
        old = self._decode_logits.pop(id(tokens), None)
        if old is not None:
            self.ttnn.deallocate(old)

    def _chip0_torch(self, t) -> torch.Tensor:
        ttnn = self.ttnn
        return ttnn.to_torch(ttnn.get_device_tensors(t)[0])

    def process_output_decode(self, tt_out, B, S=1, is_tokens=False):
        """A host tensor (chip 0's shard read) -> torch: tokens [B] int64 (``is_tokens``), else
        logits [B, S, vocab] float32."""
        if isinstance(tt_out, tuple):
            tt_out = tt_out[0]
        x = self._chip0_torch(tt_out)
        if is_tokens:
            flat = x.reshape(-1).to(torch.int64) & 0xFFFFFFFF
            if flat.numel() < B:
                raise ValueError(f"process_output_decode: {flat.numel()} tokens for B={B}")
            return flat[:B]
        x = x.float()
        return x.reshape(-1, x.shape[-1])[:B, : self.vocab_size].reshape(B, S, -1)

    # -- prefill ----------------------------------------------------------------------------
    def prepare_inputs_prefill(self, tokens, start_pos=0, page_table=None, chunk_page_table=None,
                               trace_enabled=False, user_id=0, **kwargs):
        """``tokens`` [1, S] (the chunk's ids, absolute positions ``start_pos ..``), ``page_table``
        [1, max_pages] (the request's whole row). Returns upstream's six slots ``(tokens,
        rot_mats_global, rot_mats_local, page_table, chunk_page_table, chunk_start_idx)``, host
        values here: token ids as a list, None, None, the page-table row (int32 [max_pages]),
        None, ``start_pos``."""
        if trace_enabled:
            raise ValueError("prepare_inputs_prefill: prefill is not traced for these models "
                             "(model_args.can_enable_trace is False)")
        t = tokens if isinstance(tokens, torch.Tensor) else torch.tensor(tokens)
        if t.dim() != 2 or t.shape[0] != 1:
            raise ValueError(f"prepare_inputs_prefill: tokens must be [1, S], got {list(t.shape)}")
        if page_table is None:
            raise ValueError("prepare_inputs_prefill: page_table is required (our models' caches are paged)")
        pt = page_table if isinstance(page_table, torch.Tensor) else torch.tensor(page_table)
        if pt.dim() == 2:
            if pt.shape[0] != 1:
                raise ValueError(f"prepare_inputs_prefill: page_table must be one row, got {list(pt.shape)}")
            pt = pt[0]
        start = int(start_pos)
        return [int(v) for v in t[0].tolist()], None, None, pt.to(torch.int32), None, start

    def ttnn_prefill_forward(self, x, rot_mats_global=None, rot_mats_local=None, user_id=0, page_table=None,
                             chunk_page_table=None, chunk_start_idx=None, get_last_token=-1, kv_cache=None,
                             **kwargs):
        """Prefill the chunk ``x`` (token ids from :meth:`prepare_inputs_prefill`) at absolute
        positions ``chunk_start_idx ..`` into state slot ``user_id`` (a fresh sequence when
        ``chunk_start_idx`` is 0: the slot is reset first). Returns the last token's logits,
        host float32 [vocab]."""
        slot = int(user_id)
        start = 0 if chunk_start_idx is None else int(chunk_start_idx)
        if page_table is None:
            raise ValueError("ttnn_prefill_forward: page_table is required")
        if start == 0:
            self.model.reset_slot(slot)
        return self.model.prefill(list(x), slot=slot, page_table_row=page_table, start_pos=start)

    def process_output_prefill(self, tt_out, last_token_idx=None):
        """The prefill's last-token logits as torch float32 [vocab] (already on the host)."""
        return tt_out.reshape(-1)[: self.vocab_size].float()
