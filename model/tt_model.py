"""Our two models behind tt_transformers' model interface, for generators written against tt-metal.

tt-metal's shared ``Generator`` (``models/tt_transformers/tt/generator.py``) drives a model
(``models/tt_transformers/tt/model.py``'s ``Transformer`` and its subclasses) through a handful
of methods and a ``model_args`` object. :class:`TtModelAdapter` gives the sweep model
(:class:`model.markov.MarkovModel`) and the Qwen3.6-style hybrid (:class:`model.qwen36.Qwen36Model`)
those methods, so a generator in the shape of tt-metal's can run them:

- ``prepare_decode_inputs_host(tokens, current_pos, page_table=None)`` -> host tensors
  ``(tokens, current_pos, rope_idxs, page_table, slots)``, ready for ``copy_host_to_device``
  (into a trace's persistent inputs, or freshly allocated: :func:`copy_host_to_device`);
  ``prepare_inputs_decode(...)`` is the same, copied to the device (its ``slots`` bound).
- ``ttnn_decode_forward(x, current_pos, rot_mat_idxs=None, page_table=None, kv_cache=None,
  sampling_on_device=False, slots=None, on_device_logits=False)``: device only and
  traceable. With ``sampling_on_device`` the greedy token is written into ``x`` on the device
  (argmax, as upstream's sampling writes into ``tt_out_tok=x``) and ``plus_one`` advances
  ``current_pos`` (rows at -1 stay -1); it returns ``(tokens, None)``, the sampling module's
  ``(tt_tokens, tt_log_probs)``. With ``on_device_logits`` (upstream's keyword) positions
  advance the same way and the logits stay on the device for ``sampling``. Without either,
  the logits ``[1, 1, B, vocab]``.
- ``sampling``: :class:`model.tt_sampling.GreedySampling`, the calls upstream makes on a
  model's ``SamplingGenerator`` (precompile, capture_trace, sample, the seed manager's).
- ``process_output_decode(tt_out, B, S=1, is_tokens=False)``: a host tensor -> torch
  (tokens ``[B]``, or logits ``[B, S, vocab]``), from chip 0's shard.
- ``prepare_inputs_prefill(tokens, start_pos=0, page_table=None, chunk_page_table=None,
  trace_enabled=False, user_id=0)`` / ``ttnn_prefill_forward(x, rot_mats_global=None,
  rot_mats_local=None, user_id=0, page_table=None, chunk_page_table=None,
  chunk_start_idx=None, get_last_token=-1, kv_cache=None, batch_size=1)`` -> the 32-row
  logits tile at ``get_last_token`` / ``process_output_prefill(tile, last_token_idx)``.
- ``switch_mode(mode)`` (ours or upstream's ``common.Mode``), ``gather_slots``, ``model_args``
  (also ``args``: :class:`ModelArgs`, with ``get_warmup_prefill_supported_seq_lens``,
  ``get_attn_sdpa_program_config``, ``can_enable_trace``, ``trace_prefill_supported_seq_lens``).

Where ours differs from upstream, and why:

- Decode inputs carry a fifth entry, ``slots`` ``[B]`` int32 (row ``r`` reads state slot
  ``slots[r]``, -1 for an inactive row): our models keep per-slot recurrent state and read
  it by slot, where upstream's ``Transformer`` keeps none. Upstream lets a model return
  entries past the common four (Gemma4 does) and binds them with
  ``bind_decode_trace_inputs``; that is here too (``prepare_inputs_decode`` binds its own,
  since upstream's untraced decode passes only the four), or pass ``slots=`` directly.
- ``rope_idxs`` is None: both models turn positions into rotations on the device.
- Tokens are ``[1, B]`` uint32 ROW_MAJOR, not padded to 32 and unsqueezed to 4-D, because
  that is our models' decode contract (``model.qwen36.Qwen36Model.decode``).
- ``B`` is any bucket up to ``max_batch_size`` (upstream asserts ``B == max_batch_size``):
  the serving path here runs one trace per batch bucket, as the Tenstorrent plugin does.
- Page tables of any width are made ``max_pages`` wide (:func:`pages_wide`): upstream's
  decode warm-up passes the plugin's width, ``min(max_pages, num_blocks)``.
- Sampling is greedy argmax only (``GreedySampling``: no parameters, penalties, seeds or
  log-probs on the device): the runner serves temperature 0, as production's stage 3.
- Prefill is not split into host preparation and a device forward inside our models:
  they embed on the device and read logits back themselves. So ``prepare_inputs_prefill``
  returns the host-side values (token ids, page-table row, start) in upstream's tuple slots,
  and ``ttnn_prefill_forward`` builds upstream's output tile on the host from the model's
  rows and uploads it (float32, so the hybrid's logits keep every bit). Upstream pads a
  prompt to its prefill length; the model prefills only up to the end of the tile read
  (later rows are never read). The sweep model gives every row of the tile
  (``MarkovModel.prefill(rows=)``); the hybrid gives its last row only, and its recurrent
  state would take the padding in, so a padded hybrid prefill is wrong (docs/upstream.md).
  Prefill is never traced (``model_args.can_enable_trace`` is False) and never batched
  (``disable_batched_prefill``); one call takes up to ``max_context`` tokens
  (``max_prefill_chunk_size``), continuing only on the ``prefill_chunk`` grid (the SDPA
  program config's ``q_chunk_size``, from which upstream floors resume offsets).
- ``user_id`` is the state slot prefill resets and fills; upstream passes 0 whenever it has a
  page table, which is right for the sweep model (no per-slot state) and not for the hybrid.
- ``kv_cache`` is accepted and ignored: the models own their paged caches.

The module never imports ttsim or ttnn: it is handed the ttnn-like module, as the models are.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import torch

from .host_ints import int32_bits
from .tt_sampling import GreedySampling

#: position of the page table in the decode input tuple (upstream's DECODE_PAGE_TABLE_INPUT_IDX)
PAGE_TABLE_INPUT_IDX = 3
#: position of the per-row state slots (ours; past upstream's common four)
SLOTS_INPUT_IDX = 4


class Mode(Enum):
    """tt_transformers' ``common.Mode`` (``switch_mode`` also takes upstream's own enum, by value)."""
    PREFILL = "prefill"
    DECODE = "decode"


#: rows of one tile: upstream's prefill returns the logits of the 32-row tile holding the last token
TILE = 32


@dataclass(frozen=True)
class SdpaProgramConfig:
    """What tt-metal's generator reads of ``get_attn_sdpa_program_config``: the chunk grid."""
    q_chunk_size: int


def padded_prefill_lengths(cap: int) -> list[int]:
    """tt_transformers' padded prefill lengths (128, then 1024 * 2**k) that are at most ``cap``."""
    lengths = [128] if cap >= 128 else []
    v = 1024
    while v <= cap:
        lengths.append(v)
        v *= 2
    return lengths


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
    #: the grid a continued prefill must start on (our models' ``prefill_chunk``)
    q_chunk_size: int = TILE
    #: our models prefill one request per call (upstream's batched prefill is switched off)
    disable_batched_prefill: bool = True
    #: prefill is never traced, so no length is
    trace_prefill_supported_seq_lens: tuple = ()

    @property
    def capped_warmup_seq_len(self) -> int:
        return min(self.max_prefill_chunk_size, self.max_seq_len)

    def get_warmup_prefill_supported_seq_lens(self) -> list[int]:
        """Upstream's default: every padded prefill length up to ``capped_warmup_seq_len``."""
        return padded_prefill_lengths(self.capped_warmup_seq_len)

    def get_attn_sdpa_program_config(self, mode, seq_len, chunk_start_idx=None, *args, **kwargs) -> SdpaProgramConfig:
        """Our models continue a prompt only at multiples of ``q_chunk_size`` (their chunked SDPA
        grid), which tt-metal's generator reads here to floor resume offsets."""
        return SdpaProgramConfig(self.q_chunk_size)

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


def pages_wide(table: torch.Tensor, max_pages: int) -> torch.Tensor:
    """A page table [B, n] made ``max_pages`` wide, as the plugin slices or zero-pads its block tables
    to one width: columns past ``max_pages`` address positions past max_context (never read), and
    missing columns are pages no request of this cache can have (the plugin's width is
    ``min(max_pages, num_blocks)``, and upstream's decode warm-up passes that width)."""
    if table.shape[1] >= max_pages:
        return table[:, :max_pages].contiguous()
    return torch.cat([table, torch.zeros(table.shape[0], max_pages - table.shape[1], dtype=table.dtype)], dim=1)


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
            n_layers=getattr(c, "num_layers", 1), max_prefill_chunk_size=c.max_context, block_size=c.block_size,
            max_pages=max_pages, num_devices=int(mesh_device.get_num_devices()), cluster_shape=shape,
            q_chunk_size=c.prefill_chunk)
        self.vocab_size = c.vocab_size
        self.mode: Mode | None = None
        self._bound_slots = None
        # tt-metal's generator samples through the model's ``sampling`` module
        self.sampling = GreedySampling(model, ttnn, mesh_device, max_batch_size)
        # the logits each token buffer's decode produced: a captured trace replays into them,
        # so they stay allocated (freed, a later buffer could land there and be overwritten)
        self._decode_logits: dict[int, object] = {}

    # -- mode and state ---------------------------------------------------------------------
    def switch_mode(self, mode) -> None:
        """``mode``: our :class:`Mode` or tt_transformers' own ``common.Mode`` (another Enum with the
        same values, which upstream's generator passes); kept as ours."""
        if not isinstance(mode, Enum) or mode.value not in {m.value for m in Mode}:
            raise ValueError(f"switch_mode: expected a Mode (prefill or decode), got {mode!r}")
        self.mode = Mode(mode.value)

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
        ``current_pos`` [B] (-1: an inactive row), ``page_table`` [B, any width] (made
        ``max_pages`` wide: :func:`pages_wide`); ``slots`` [B]
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
            if pt.dim() != 2 or pt.shape[0] != b or pt.shape[1] < 1 or pt.is_floating_point():
                raise ValueError(f"prepare_decode_inputs_host: page_table must be int [{b}, pages], got "
                                 f"{pt.dtype} {list(pt.shape)}")
            tt_pt = self._host(pages_wide(pt.to(torch.int32), a.max_pages), ttnn.int32)
        tt_slots = self._host(torch.tensor(slot_ids, dtype=torch.int32), ttnn.int32)
        return tt_tokens, tt_pos, None, tt_pt, tt_slots

    def prepare_inputs_decode(self, *inputs, **kw):
        """:meth:`prepare_decode_inputs_host`, copied to new device tensors. Their ``slots`` are bound
        (:meth:`bind_decode_trace_inputs`): tt-metal's untraced decode passes only the common four
        inputs to :meth:`ttnn_decode_forward`."""
        device = copy_host_to_device(self.prepare_decode_inputs_host(*inputs, **kw), mesh_device=self.mesh_device,
                                     ttnn=self.ttnn)
        self.bind_decode_trace_inputs(device)
        return device

    def bind_decode_trace_inputs(self, device_inputs) -> None:
        """Remember the device ``slots`` input (entry 4) for :meth:`ttnn_decode_forward` calls that
        pass only upstream's four (as tt-metal's generator binds a model's extra trace inputs)."""
        if len(device_inputs) <= SLOTS_INPUT_IDX or device_inputs[SLOTS_INPUT_IDX] is None:
            raise ValueError("bind_decode_trace_inputs: the decode inputs hold no slots tensor (entry 4)")
        self._bound_slots = device_inputs[SLOTS_INPUT_IDX]

    def ttnn_decode_forward(self, x, current_pos, rot_mat_idxs=None, page_table=None, kv_cache=None,
                            sampling_on_device=False, capture_sampling_trace=False, slots=None,
                            on_device_logits=False, **kwargs):
        """One decode step on device tensors (traceable: device ops only).

        ``x`` tokens [1, B] uint32, ``current_pos`` [B] int32, ``page_table`` [B, max_pages],
        ``slots`` [B] int32 (default: the bound one). With ``sampling_on_device``: the argmax
        token is written into ``x``, ``current_pos`` advanced by ``plus_one`` (negative entries
        skipped), and ``(x, None)`` returned; otherwise the logits [1, 1, B, vocab].
        ``on_device_logits`` (tt-metal's generator @ 50868c00 passes it when it samples on the
        device): ``current_pos`` advanced as above and the logits returned on the device for the
        ``sampling`` module, which writes the argmax into ``x`` (upstream's ``tt_out_tok``)."""
        ttnn = self.ttnn
        if kwargs:
            raise TypeError(f"ttnn_decode_forward: unexpected keyword(s) {', '.join(sorted(kwargs))}")
        slots = self._bound_slots if slots is None else slots
        if slots is None:
            raise ValueError("ttnn_decode_forward: no slots tensor (pass slots= or bind_decode_trace_inputs first)")
        if page_table is None:
            raise ValueError("ttnn_decode_forward: page_table is required (our models' caches are paged)")
        logits = self.model.decode(x, current_pos, page_table, slots)
        if not (sampling_on_device or on_device_logits):
            return logits
        ttnn.plus_one(current_pos, skip_negative_entries=True)
        if capture_sampling_trace or on_device_logits:  # upstream: the caller samples itself
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
                             batch_size=1, **kwargs):
        """Prefill the chunk ``x`` (token ids from :meth:`prepare_inputs_prefill`, perhaps padded, as
        upstream pads to its prefill lengths) at absolute positions ``chunk_start_idx ..`` into state
        slot ``user_id`` (a fresh sequence when ``chunk_start_idx`` is 0: the slot is reset first).

        Returns upstream's prefill output: the logits of the 32-row tile that starts at row
        ``get_last_token`` of the chunk (-1: the tile holding its last row), a device tensor
        ``[1, 1, 32, vocab]`` float32 TILE; :meth:`process_output_prefill` picks a row. Rows past
        the tile are never read, so the model prefills only up to the tile's end; a model whose
        ``prefill`` gives only its last row (``PREFILL_ROWS`` unset: the hybrid) fills only that row."""
        ttnn = self.ttnn
        slot = int(user_id)
        start = 0 if chunk_start_idx is None else int(chunk_start_idx)
        if page_table is None:
            raise ValueError("ttnn_prefill_forward: page_table is required")
        if int(batch_size) != 1:
            raise ValueError(f"ttnn_prefill_forward: batch_size={batch_size}; our models prefill one request per call")
        n = len(x)
        tile = ((n - 1) // TILE) * TILE if get_last_token is None or int(get_last_token) < 0 else int(get_last_token)
        if not 0 <= tile < n or tile % TILE:
            raise ValueError(f"ttnn_prefill_forward: get_last_token={get_last_token} is not a tile start within "
                             f"the chunk's {n} rows")
        end = min(n, tile + TILE, self.args.max_seq_len - start)
        if start == 0:
            self.model.reset_slot(slot)
        out = torch.zeros(1, 1, TILE, self.vocab_size, dtype=torch.float32)
        if getattr(self.model, "PREFILL_ROWS", False):
            out[0, 0, : end - tile] = self.model.prefill(list(x[:end]), slot=slot, page_table_row=page_table,
                                                          start_pos=start, rows=end - tile)
        else:
            out[0, 0, end - 1 - tile] = self.model.prefill(list(x[:end]), slot=slot, page_table_row=page_table,
                                                            start_pos=start)
        return ttnn.from_torch(out, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=self.mesh_device,
                               mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device))

    def process_output_prefill(self, tt_out, last_token_idx=None):
        """Row ``last_token_idx % 32`` (default: the last row) of a prefill tile (on the device or read
        back, tiled or not) as torch float32 [vocab]."""
        x = self._chip0_torch(tt_out).float()
        x = x.reshape(-1, x.shape[-1])
        row = x.shape[0] - 1 if last_token_idx is None else int(last_token_idx) % TILE
        return x[row, : self.vocab_size]
