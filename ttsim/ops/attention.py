"""Attention, paged KV cache and gated-delta-rule ops (ttnn.transformer / ttnn.experimental).

Each op runs one kernel, as the real op does, whoever calls it: the chunked-prefill op
(``chunked_scaled_dot_product_attention``) is the flash-style online softmax over KV chunks
read from the paged cache (``kernels.attention.sdpa_streaming``); the full-sequence op
(``scaled_dot_product_attention``) materialises the score matrix of each query chunk
(``kernels.attention.sdpa_legacy``). Which op a model calls is the model's choice; ttsim
reads no model setting.

Arguments are validated at the call, as ttnn does on the host: the rules the kernels share
come from ``kernels.attention_rules`` (re-raised as TTFatal naming the op); ttnn's own
(dtypes, layouts, tile alignment, unmodelled keywords) are here.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from ..kernels import attention as K
from ..kernels import attention_rules as R
from ..kernels.card_index import U32, DeviceHang
from ..stray import DeviceTimeout, PagedView
from ..tensor import Tensor, _describe
from ..types import INTEGER_TYPES, TILE_SIZE, CoreCoord, DataType, Layout, MemoryConfig, TTFatal
from .unmodelled import refuse_unmodelled
from .base import require_device_tensor, require_layout, require_same_device, run_inplace, run_op


@dataclass
class SDPAProgramConfig:
    """ttnn.SDPAProgramConfig: only the chunk sizes change ttsim's math."""

    compute_with_storage_grid_size: CoreCoord
    q_chunk_size: int
    k_chunk_size: int
    sub_core_grids: object = None
    exp_approx_mode: bool | None = None
    max_cores_per_head_batch: int = 16
    max_k_splits: int = 1
    matmul_math_fidelity: object = None
    segmented_accumulation: bool = False

    def __init__(self, *, compute_with_storage_grid_size, sub_core_grids=None, q_chunk_size, k_chunk_size,
                 exp_approx_mode=None, max_cores_per_head_batch=16, max_k_splits=1, matmul_math_fidelity=None,
                 segmented_accumulation=False):
        for name, value in (("q_chunk_size", q_chunk_size), ("k_chunk_size", k_chunk_size)):
            # 0 is the decode kernel's own choice (attention/tp.py's decode config passes 0 for both)
            if not isinstance(value, int) or value < 0 or value % TILE_SIZE:
                raise TTFatal(f"SDPAProgramConfig: {name} must be 0 or a positive multiple of {TILE_SIZE}, "
                              f"got {value!r}")
        self.compute_with_storage_grid_size = compute_with_storage_grid_size
        self.sub_core_grids = sub_core_grids
        self.q_chunk_size = q_chunk_size
        self.k_chunk_size = k_chunk_size
        self.exp_approx_mode = exp_approx_mode
        self.max_cores_per_head_batch = max_cores_per_head_batch
        self.max_k_splits = max_k_splits
        self.matmul_math_fidelity = matmul_math_fidelity
        self.segmented_accumulation = segmented_accumulation

    def __repr__(self) -> str:  # ttnn's C++ format
        def show(v):
            return "std::nullopt" if v is None else str(v).lower() if isinstance(v, bool) else str(v)

        names = ("compute_with_storage_grid_size", "sub_core_grids", "q_chunk_size", "k_chunk_size",
                 "exp_approx_mode", "max_cores_per_head_batch", "max_k_splits", "matmul_math_fidelity",
                 "segmented_accumulation")
        return "SDPAProgramConfig(" + ", ".join(f"{n}={show(getattr(self, n))}" for n in names) + ")"


_DEFAULT_CHUNK = 32


def _chunks(program_config, op: str = "", decode: bool = False) -> tuple[int, int]:
    """The config's chunk sizes; a decode's 0 (the kernel chooses) is the default chunk, which only
    reorders its fp32 sums; a prefill's 0 is not modelled."""
    if program_config is None:
        return _DEFAULT_CHUNK, _DEFAULT_CHUNK
    qc, kc = program_config.q_chunk_size, program_config.k_chunk_size
    if decode:
        return qc or _DEFAULT_CHUNK, kc or _DEFAULT_CHUNK
    if not qc or not kc:
        raise TTFatal(f"{op}: a chunk size of 0 (the decode kernel's own choice) is not modelled for prefill; "
                      f"pass positive multiples of {TILE_SIZE}")
    return qc, kc


@contextmanager
def _rules(op: str):
    """The shared argument rules (kernels.attention_rules), checked at the call as ttnn does:
    a broken rule is ttnn's TT_FATAL naming the op."""
    try:
        yield
    except R.AttentionArgError as exc:
        raise TTFatal(f"{op}: {exc}") from None


def _check_qkv(op: str, q: Tensor, k: Tensor, v: Tensor, **layout) -> None:
    """The shared q/k/v shape rules, then ttnn's own: head_dim on the tile grid."""
    with _rules(op):
        R.qkv(q.shape, k.shape, v.shape, **layout)
    if q.shape[3] % TILE_SIZE:
        raise TTFatal(f"{op}: head_dim must be a multiple of {TILE_SIZE}, got {q.shape[3]}")


def _check_int(op: str, name: str, t: Tensor) -> None:
    if t._dtype not in INTEGER_TYPES:
        raise TTFatal(f"{op}: {name} must be int32 or uint32, got {_describe(t)}")


def _check_table(op: str, name: str, t: Tensor) -> None:
    """Page tables: int32 / uint32, or uint16 (tt-metal's sharded page tables use it)."""
    if t._dtype not in INTEGER_TYPES + (DataType.UINT16,):
        raise TTFatal(f"{op}: {name} must be int32, uint32 or uint16, got {_describe(t)}")


def _ids(pt: torch.Tensor) -> torch.Tensor:
    """A page table's block ids as integers (a uint16 table reaches the math as exact floats)."""
    return pt.to(torch.int64) if pt.is_floating_point() else pt


_refuse = refuse_unmodelled


def _window(op: str, sliding_window_size) -> int | None:
    """tt-metal's sliding window: causal rows see the last ``w`` keys up to themselves."""
    with _rules(op):
        R.window(sliding_window_size)
    return sliding_window_size


def _sink_input(op: str, attention_sink, nqh: int, decode: bool) -> Tensor | None:
    """Validate ``attention_sink`` at the call (its layouts: :func:`attention_rules.sink`)."""
    if attention_sink is None:
        return None
    require_device_tensor(op, "attention_sink", attention_sink)
    with _rules(op):
        R.sink(attention_sink.shape, nqh, "decode" if decode else "prefill")
    return attention_sink


def _sink_logits(sink: torch.Tensor, decode: bool, scale: float | None, d: int) -> torch.Tensor:
    """Per-head sink logits: the stored value times the softmax scale (as tt-metal's kernels do)."""
    values = sink[:, 0] if decode else sink.reshape(-1)
    return values.to(torch.float32) * (d ** -0.5 if scale is None else float(scale))


def _kernel_call(op: str, fn, *args, **kwargs):
    """Kernel value errors surface as TTFatal naming the op (raised when the command runs); a
    kernel that would hang a card ends as tt-metal's device timeout, naming op, row and position."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, IndexError, TypeError) as exc:
        raise TTFatal(f"{op}: {exc}") from None
    except DeviceHang as exc:
        raise DeviceTimeout(op, str(exc)) from None


def scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    *,
    attn_mask: Tensor | None = None,
    is_causal: bool = True,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config=None,
    attention_sink=None,
    cu_window_seqlens=None,
    windowed_q_token_offset: int = 0,
    windowed_q_token_offset_tensor=None,
    output_concat_heads: bool = False,
    attn_mask_block_map=None,
) -> Tensor:
    """Prefill SDPA: q ``[b, nqh, S, d]``, k/v ``[b, nkv, S, d]``, causal or additive mask,
    optional sliding window and per-head attention sink (tt-metal's semantics)."""
    op = "scaled_dot_product_attention"
    _refuse(op, cu_window_seqlens=cu_window_seqlens, windowed_q_token_offset=windowed_q_token_offset,
            windowed_q_token_offset_tensor=windowed_q_token_offset_tensor, output_concat_heads=output_concat_heads,
            attn_mask_block_map=attn_mask_block_map)
    window = _window(op, sliding_window_size)
    tensors = {"input_tensor_q": input_tensor_q, "input_tensor_k": input_tensor_k, "input_tensor_v": input_tensor_v}
    for name, t in tensors.items():
        require_device_tensor(op, name, t)
        require_layout(op, name, t, Layout.TILE)
    _check_qkv(op, input_tensor_q, input_tensor_k, input_tensor_v)
    b, nqh, sq, d = input_tensor_q.shape
    sk = input_tensor_k.shape[2]
    inputs = list(tensors.values())
    if attn_mask is not None:
        require_device_tensor(op, "attn_mask", attn_mask)
        if is_causal:
            raise TTFatal(f"{op}: attn_mask needs is_causal=False (tt-metal refuses a mask with causal SDPA)")
        with _rules(op):
            R.mask(attn_mask.shape, b, nqh, sq, sk)
        inputs.append(attn_mask)
    sink = _sink_input(op, attention_sink, nqh, decode=False)
    if sink is not None:
        inputs.append(sink)
    require_same_device(op, dict(zip(["q", "k", "v", "mask", "sink"], inputs)))
    qc, kc = _chunks(program_config, op)
    has_mask = attn_mask is not None

    def math(q, k, v, *rest):
        mask = rest[0] if has_mask else None
        logits = _sink_logits(rest[-1], False, scale, d) if sink is not None else None
        return _kernel_call(op, K.sdpa_legacy, q, k, v, scale=scale, is_causal=is_causal, attn_mask=mask,
                            q_chunk_size=qc, k_chunk_size=kc, window=window, sink=logits)

    # moves_values: the math is handed the inputs as stored (bf16 as bf16), not widened to float32.
    # The kernel widens what it reads itself, exactly as run_op would (q/k/v whole, the mask one q
    # chunk at a time into a reused buffer), and returns float32, which storage() rounds (NaNs
    # canonicalised) as before: the same bytes, without a float32 copy of the [Sq, Sk] mask per chip
    # (the legacy 32k prefill's largest conversion).
    return run_op(op, inputs, (b, nqh, sq, input_tensor_v.shape[3]), input_tensor_q._dtype, Layout.TILE, math,
                  memory_config=memory_config, moves_values=True)


def _check_paged(op: str, q: Tensor, k: Tensor, v: Tensor, page_table: Tensor, decode: bool,
                 batch: int | None) -> None:
    """``batch``: the rows the page table must have (None: causal decode, whose rows at -1
    need none; the kernel checks the active rows when it runs)."""
    for name, t in (("input_tensor_q", q), ("input_tensor_k", k), ("input_tensor_v", v),
                    ("page_table_tensor", page_table)):
        require_device_tensor(op, name, t)
    _check_table(op, "page_table_tensor", page_table)
    _check_qkv(op, q, k, v, decode=decode, paged=True)
    with _rules(op):
        R.page_table("page_table_tensor", page_table.shape, batch)
    if k.shape[2] % TILE_SIZE:
        raise TTFatal(f"{op}: paged block_size must be a multiple of {TILE_SIZE}, got {k.shape[2]}")
    require_same_device(op, {"input_tensor_q": q, "input_tensor_k": k, "input_tensor_v": v,
                             "page_table_tensor": page_table})


def chunked_scaled_dot_product_attention(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    page_table_tensor: Tensor,
    chunk_start_idx: int | None = None,
    *,
    chunk_start_idx_tensor: Tensor | None = None,
    scale: float | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config=None,
    paged_cache_geometry=None,
    sliding_window_size: int | None = None,
    attention_sink=None,
) -> Tensor:
    """Chunked prefill: q ``[b, nqh, chunk, d]`` at absolute ``chunk_start_idx``, paged K/V."""
    op = "chunked_scaled_dot_product_attention"
    _check_paged(op, input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor, decode=False,
                 batch=input_tensor_q.shape[0])
    _refuse(op, paged_cache_geometry=paged_cache_geometry)
    window = _window(op, sliding_window_size)
    sink = _sink_input(op, attention_sink, input_tensor_q.shape[1], decode=False)
    qc, kc = _chunks(program_config, op)
    start_tensor = _chunk_start_tensor(op, chunk_start_idx, chunk_start_idx_tensor)
    if start_tensor is None:
        with _rules(op):
            R.chunk_start(chunk_start_idx, qc, kc)
    b, nqh, sq, d = input_tensor_q.shape
    extra = [sink] if sink is not None else []
    if start_tensor is not None:
        extra.append(start_tensor)

    def math(q, k, v, pt, *rest):
        rest = list(rest)
        # a device-resident start (the flexible chunked prefill: one program for every chunk) is read
        # when the command runs; its alignment is checked then, as the kernel's rule
        start = int(rest.pop().reshape(-1)[0]) if start_tensor is not None else chunk_start_idx
        logits = _sink_logits(rest[0], False, scale, d) if rest else None
        return _kernel_call(op, K.chunked_sdpa_paged, q, k, v, _ids(pt), start, scale=scale,
                            q_chunk_size=qc, k_chunk_size=kc, window=window, sink=logits)

    return run_op(op, [input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor] + extra,
                  (b, nqh, sq, input_tensor_v.shape[3]), input_tensor_q._dtype, Layout.TILE, math,
                  memory_config=memory_config)


def _chunk_start_tensor(op: str, chunk_start_idx, chunk_start_idx_tensor) -> Tensor | None:
    """The device tensor holding the chunk start (its first element), or None for the int form.
    As tt-metal's validation: one of the two, not both; the tensor int32."""
    if chunk_start_idx is not None and chunk_start_idx_tensor is not None:
        raise TTFatal("!(chunk_start_idx.has_value() && chunk_start_idx_tensor.has_value())")
    if chunk_start_idx_tensor is None:
        if chunk_start_idx is None:
            raise TTFatal(f"{op}: chunk_start_idx or chunk_start_idx_tensor is required")
        return None
    t = require_device_tensor(op, "chunk_start_idx_tensor", chunk_start_idx_tensor)
    if t._dtype != DataType.INT32:
        raise TTFatal(f"chunk_start_idx tensor must be int32. Got {t._dtype!r}")
    return t


def paged_scaled_dot_product_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    page_table_tensor: Tensor,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos_tensor: Tensor | None = None,
    attention_sink=None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config=None,
    paged_cache_geometry=None,
    cache_position_modulo=None,
    spec_multi_pos_tiles: int = 0,
) -> Tensor:
    """Decode: q ``[1, b, nqh, d]``; causal row r attends 0..cur_pos[r] (the last
    ``sliding_window_size`` of them with a window); rows at exactly -1 are skipped (their output
    rows keep whatever the output buffer held); any other position is taken as a card takes it
    (kernels.attention._decode_span: pages past the row are the next rows'; a span past the page
    table is the hang, tt-metal's device timeout). Non-causal: every row attends all of its
    page table's positions plus ``attn_mask [b, 1, nqh, max_pages * block_size]``."""
    op = "paged_scaled_dot_product_attention_decode"
    _check_paged(op, input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor, decode=True,
                 batch=None if is_causal else input_tensor_q.shape[1])
    _refuse(op, paged_cache_geometry=paged_cache_geometry, cache_position_modulo=cache_position_modulo,
            spec_multi_pos_tiles=spec_multi_pos_tiles)
    length = page_table_tensor.shape[1] * input_tensor_k.shape[2]
    return _decode(op, input_tensor_q, input_tensor_k, input_tensor_v, [page_table_tensor], None, is_causal,
                   attn_mask, cur_pos_tensor, None, attention_sink, scale, sliding_window_size, memory_config,
                   program_config, length)


def scaled_dot_product_attention_decode(
    input_tensor_q: Tensor,
    input_tensor_k: Tensor,
    input_tensor_v: Tensor,
    *,
    is_causal: bool = True,
    attn_mask: Tensor | None = None,
    cur_pos: list[int] = [],  # noqa: B006 - mirrors ttnn's default; never mutated
    cur_pos_tensor: Tensor | None = None,
    attention_sink=None,
    scale: float | None = None,
    sliding_window_size: int | None = None,
    memory_config: MemoryConfig | None = None,
    program_config: SDPAProgramConfig | None = None,
    compute_kernel_config=None,
    share_cache: bool | None = None,
) -> Tensor:
    """Decode against contiguous caches ``k/v [b, nkv, S, d]``: q ``[1, b, nqh, d]``; causal
    row r attends 0..pos[r] (``cur_pos`` list or ``cur_pos_tensor``); non-causal rows attend
    all S positions plus ``attn_mask [b, 1, nqh, S]``."""
    op = "scaled_dot_product_attention_decode"
    for name, t in (("input_tensor_q", input_tensor_q), ("input_tensor_k", input_tensor_k),
                    ("input_tensor_v", input_tensor_v)):
        require_device_tensor(op, name, t)
    _refuse(op, share_cache=share_cache)
    _check_qkv(op, input_tensor_q, input_tensor_k, input_tensor_v, decode=True)
    bk, _, sk, _ = input_tensor_k.shape
    require_same_device(op, {"input_tensor_q": input_tensor_q, "input_tensor_k": input_tensor_k,
                             "input_tensor_v": input_tensor_v})
    # Row r's cache is block r of a one-block-per-row paged view: the paged kernel serves both.
    table = torch.arange(bk, dtype=torch.int32).reshape(bk, 1)
    return _decode(op, input_tensor_q, input_tensor_k, input_tensor_v, [], table, is_causal, attn_mask,
                   cur_pos_tensor, list(cur_pos), attention_sink, scale, sliding_window_size, memory_config,
                   program_config, sk)


def _decode(op, q, k, v, table_inputs, fixed_table, is_causal, attn_mask, cur_pos_tensor, cur_pos, attention_sink,
            scale, sliding_window_size, memory_config, program_config, length) -> Tensor:
    """Shared decode path: validation at the call, then the paged kernel per chip."""
    _, b, nqh, d = q.shape
    window = _window(op, sliding_window_size)
    inputs = [q, k, v] + list(table_inputs)
    if is_causal:
        if attn_mask is not None:
            raise TTFatal(f"{op}: attn_mask needs is_causal=False (causal decode masks by cur_pos)")
        if cur_pos_tensor is not None:
            require_device_tensor(op, "cur_pos_tensor", cur_pos_tensor)
            _check_int(op, "cur_pos_tensor", cur_pos_tensor)
            with _rules(op):
                R.positions("cur_pos_tensor", cur_pos_tensor.shape, b)
            inputs.append(cur_pos_tensor)
        elif not cur_pos:
            raise TTFatal(f"{op}: causal decode needs cur_pos_tensor" + (" or cur_pos" if cur_pos is not None else ""))
        else:
            with _rules(op):
                R.positions("cur_pos", (len(cur_pos),), b)
    else:
        if attn_mask is not None:
            require_device_tensor(op, "attn_mask", attn_mask)
        with _rules(op):
            R.decode_mask(None if attn_mask is None else attn_mask.shape, b, nqh, length)
        if window is not None:
            raise TTFatal(f"{op}: sliding_window_size needs causal decode (it is anchored at cur_pos)")
        inputs.append(attn_mask)
    sink = _sink_input(op, attention_sink, nqh, decode=True)
    if sink is not None:
        inputs.append(sink)
    _, kc = _chunks(program_config, op, decode=True)
    dv = v.shape[3]
    n_table = len(table_inputs)
    fixed_pos = torch.tensor(cur_pos or [], dtype=torch.int64)
    causal_from_tensor = is_causal and cur_pos_tensor is not None

    device = q._device
    table_bufs = table_inputs[0]._buffers if n_table else None

    def math(qq, kk, vv, *rest):
        rest = list(rest)
        previous = rest.pop()
        chip = rest.pop()
        pt = rest.pop(0) if n_table else fixed_table
        # a device page table is read as a card reads it (past a row, from its memory); the
        # contiguous-cache op's table is ttsim's own view, with nothing past it
        memory = (PagedView(op, device, chip, table_bufs[chip], [k._buffers[chip], v._buffers[chip]])
                  if n_table else None)
        if is_causal:
            pos = rest.pop(0) if causal_from_tensor else fixed_pos
            mask = None
        else:
            pos, mask = None, rest.pop(0)
        logits = _sink_logits(rest.pop(0), True, scale, d) if sink is not None else None
        return _kernel_call(op, K.paged_sdpa_decode, qq, kk, vv, _ids(pt), pos, scale=scale, k_chunk_size=kc,
                            out=previous.clone(), window=window, sink=logits, attn_mask=mask, memory=memory)

    # tt-metal's decode hashes its scale, program config, causality and window into the program
    # (chunk sizes change as a test's positions grow), not the cur_pos values
    key = (scale, repr(program_config), is_causal, window)
    return run_op(op, inputs, (1, b, nqh, dv), q._dtype, Layout.TILE, math, memory_config=memory_config,
                  chip_args=lambda i: (i,), reads_output=True, program_key=key)


def paged_update_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    *,
    update_idxs: list[int] = [],  # noqa: B006 - mirrors ttnn's default; never mutated
    update_idxs_tensor: Tensor | None = None,
    share_cache: bool | None = None,
    page_table: Tensor | None = None,
    batch_offset: int = 0,
    compute_kernel_config=None,
    mesh_coords=None,
    block_size: int | None = None,
    num_kv_heads: int | None = None,
    cache_position_modulo: int | None = None,
) -> Tensor:
    """Write one token per batch row (``input_tensor [1, b, nkv, d]``) at ``update_idxs_tensor``
    positions through ``page_table``; rows at exactly -1 are skipped, every other position is
    consumed as a card does (kernels/card_index.py, ttsim/stray.py; each stray access is recorded
    in ``ttsim.diagnostics``). ``cache_position_modulo`` wraps each position first and is checked,
    as in 0.81.1, against the cache's blocks only: a wrapped position past the page-table row is
    read on, as the card reads it (tt-metal #57364). In place; returns the cache."""
    op = "paged_update_cache"
    require_device_tensor(op, "cache_tensor", cache_tensor)
    require_device_tensor(op, "input_tensor", input_tensor)
    _refuse(op, share_cache=share_cache, batch_offset=batch_offset, mesh_coords=mesh_coords)
    if page_table is None:
        raise TTFatal(f"{op}: page_table is required (ttsim models the paged cache only)")
    require_device_tensor(op, "page_table", page_table)
    _check_table(op, "page_table", page_table)
    with _rules(op):
        R.rank4("cache_tensor", cache_tensor.shape)
        R.page_table("page_table", page_table.shape)
    nb, nkv, bs, d = cache_tensor.shape
    if block_size not in (None, bs) or num_kv_heads not in (None, nkv):
        raise TTFatal(f"{op}: block_size={block_size!r} / num_kv_heads={num_kv_heads!r} reinterpret the cache as "
                      f"another view; ttsim models only the cache's own [{nb}, {nkv}, {bs}, {d}]")
    with _rules(op):  # on a card the heads of a decode token are tile-padded
        R.update_input("input_tensor", input_tensor.shape, cache_tensor.shape, padded_heads=TILE_SIZE)
    modulo = cache_position_modulo
    if modulo is not None:
        # 0.81.1 bounds the modulo by the CACHE's blocks, never by the page table's row (tt-metal
        # #57364): a wrapped position may still index past its row, and the kernel reads on
        if isinstance(modulo, bool) or not isinstance(modulo, int):
            raise TTFatal(f"{op}: cache_position_modulo must be an int, got {modulo!r}")
        if modulo <= 0 or modulo % bs:
            raise TTFatal(f"cache_position_modulo ({modulo}) must be a positive multiple of effective block_size "
                          f"({bs}); otherwise a wrapped position would split across blocks and the kernel can't "
                          f"address it.")
        if modulo // bs > nb:
            raise TTFatal(f"cache_position_modulo/block_size ({modulo // bs}) must be <= max_num_blocks ({nb})")
    inputs = [input_tensor, page_table]
    if update_idxs_tensor is not None:
        require_device_tensor(op, "update_idxs_tensor", update_idxs_tensor)
        _check_int(op, "update_idxs_tensor", update_idxs_tensor)
        inputs.append(update_idxs_tensor)
        idxs = ("update_idxs_tensor", update_idxs_tensor.shape)
    else:
        idxs = ("update_idxs", (len(update_idxs),))
    with _rules(op):
        R.positions(*idxs, input_tensor.shape[1])
    require_same_device(op, {"cache_tensor": cache_tensor, "input_tensor": input_tensor, "page_table": page_table})
    fixed = torch.tensor(list(update_idxs), dtype=torch.int64)

    device = cache_tensor._device

    def update(cache, x, pt, *rest):
        chip = rest[-1]
        idxs = (rest[0] if len(rest) == 2 else fixed).to(torch.int64)
        if modulo is not None:  # a circular cache of ``modulo`` tokens: the card checks -1 first, then
            idxs = torch.where(idxs == -1, idxs, (idxs & U32) % modulo)  # wraps the uint32 index
        memory = PagedView(op, device, chip, page_table._buffers[chip], [cache_tensor._buffers[chip]])
        _kernel_call(op, K.paged_update_cache, cache, x[:, :, :nkv], idxs, _ids(pt), memory=memory)

    run_inplace(op, cache_tensor, inputs, update)
    return cache_tensor


def paged_fused_update_cache(
    cache_tensor1: Tensor,
    input_tensor1: Tensor,
    cache_tensor2: Tensor,
    input_tensor2: Tensor,
    *,
    update_idxs: list[int] = [],  # noqa: B006 - mirrors ttnn's default; never mutated
    update_idxs_tensor: Tensor | None = None,
    share_cache: bool | None = None,
    page_table: Tensor | None = None,
    batch_offset: int = 0,
    compute_kernel_config=None,
    mesh_coords=None,
) -> tuple[Tensor, Tensor]:
    """K and V written in one op: ``paged_update_cache`` of each pair at the same positions through
    the same page table, returning both caches. tt-metal's checks, in its words: equal cache shapes
    and memory configs, equal input shapes and dtypes (FLOAT32 or BFLOAT16), and the two inputs'
    shard grids (the cores each half of the kernel runs on) the same size and disjoint."""
    op = "paged_fused_update_cache"
    for name, t in (("cache_tensor1", cache_tensor1), ("input_tensor1", input_tensor1),
                    ("cache_tensor2", cache_tensor2), ("input_tensor2", input_tensor2)):
        require_device_tensor(op, name, t)
    if tuple(cache_tensor1.shape) != tuple(cache_tensor2.shape):
        raise TTFatal("cache_tensor1 and cache_tensor2 must have identical shapes")
    if cache_tensor1._memory_config != cache_tensor2._memory_config:
        raise TTFatal("cache_tensor1 and cache_tensor2 must have identical memory configurations")
    if tuple(input_tensor1.shape) != tuple(input_tensor2.shape):
        raise TTFatal("input_tensor1 and input_tensor2 must have identical shapes")
    for t in (input_tensor1, input_tensor2):
        if t._dtype not in (DataType.FLOAT32, DataType.BFLOAT16):
            raise TTFatal("Data type of input tensor for paged_fused_update_cache must be FLOAT32 or BFLOAT16; decode "
                          "update repacks into the cache dtype and should not receive low-precision packed input")
    if input_tensor1._dtype != input_tensor2._dtype:
        raise TTFatal("input_tensor1.dtype() == input_tensor2.dtype()")
    spec1 = getattr(input_tensor1._memory_config, "shard_spec", None)
    spec2 = getattr(input_tensor2._memory_config, "shard_spec", None)
    if spec1 is not None and spec2 is not None:
        g1, g2 = spec1.grid, spec2.grid
        if g1.num_cores() != g2.num_cores():
            raise TTFatal(f"input_tensor1 ({g1!r}) and input_tensor2 ({g2!r}) must have same number of cores")
        cores1 = {c for r in g1.ranges() for c in r._cores()}
        if any(c in cores1 for r in g2.ranges() for c in r._cores()):
            raise TTFatal(f"input_tensor1 ({g1!r}) and input_tensor2 ({g2!r}) must not overlap")
    common = dict(update_idxs=update_idxs, update_idxs_tensor=update_idxs_tensor, share_cache=share_cache,
                  page_table=page_table, batch_offset=batch_offset, mesh_coords=mesh_coords)
    paged_update_cache(cache_tensor1, input_tensor1, **common)
    paged_update_cache(cache_tensor2, input_tensor2, **common)
    return cache_tensor1, cache_tensor2


def paged_fill_cache(
    cache_tensor: Tensor,
    input_tensor: Tensor,
    page_table: Tensor,
    *,
    batch_idx_tensor: Tensor | None = None,
    batch_idx: int = 0,
    compute_kernel_config=None,
    mesh_coords=None,
    block_size: int | None = None,
    cache_position_modulo: int | None = None,
    valid_seq_len_tensor: Tensor | None = None,
) -> Tensor:
    """Fill positions 0..S-1 of one batch row from ``input_tensor [1, nkv, S, d]``. In place.
    The row is ``batch_idx_tensor``'s value when given (a one-element int device tensor, read
    when the command runs, so a trace can replay with a new row), else ``batch_idx``."""
    op = "paged_fill_cache"
    for name, t in (("cache_tensor", cache_tensor), ("input_tensor", input_tensor), ("page_table", page_table)):
        require_device_tensor(op, name, t)
    _check_table(op, "page_table", page_table)
    _refuse(op, mesh_coords=mesh_coords, block_size=block_size, cache_position_modulo=cache_position_modulo,
            valid_seq_len_tensor=valid_seq_len_tensor)
    with _rules(op):
        R.rank4("cache_tensor", cache_tensor.shape)
        R.fill_input("input_tensor", input_tensor.shape, cache_tensor.shape)
        R.page_table("page_table", page_table.shape)
    tensors = {"cache_tensor": cache_tensor, "input_tensor": input_tensor, "page_table": page_table}
    inputs = [input_tensor, page_table]
    if batch_idx_tensor is not None:
        require_device_tensor(op, "batch_idx_tensor", batch_idx_tensor)
        _check_int(op, "batch_idx_tensor", batch_idx_tensor)
        if batch_idx_tensor.logical_volume() != 1:
            raise TTFatal(f"{op}: batch_idx_tensor must hold exactly one batch index, got {_describe(batch_idx_tensor)}")
        tensors["batch_idx_tensor"] = batch_idx_tensor
        inputs.append(batch_idx_tensor)
    else:
        with _rules(op):
            R.batch_index(batch_idx, page_table.shape[0])
    require_same_device(op, tensors)

    def update(cache, x, pt, *rest):
        row = int(rest[0].reshape(-1)[0]) if len(rest) == 2 else batch_idx
        _kernel_call(op, K.paged_fill_cache, cache, x, _ids(pt), row)

    run_inplace(op, cache_tensor, inputs, update)
    return cache_tensor
