"""Attention, paged KV cache and gated-delta-rule ops (ttnn.transformer / ttnn.experimental).

Streaming vs legacy SDPA is chosen the way production chooses it: the chunked-prefill
kernel reads ``QWEN36_SDPA_STREAMING`` when it is dispatched ("1" = streaming online
softmax, anything else = legacy materialised softmax) and logs the banner the readiness
probe looks for, once per process.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch

from ..kernels import attention as K
from ..kernels import gdn as G
from ..tensor import Tensor, _describe
from ..types import INTEGER_TYPES, TILE_SIZE, ChunkGdnWyInverse, CoreCoord, DataType, Layout, MemoryConfig, TTFatal
from .base import logical, require_device_tensor, require_layout, require_same_device, run_inplace, run_op

log = logging.getLogger("ttsim")
STREAMING_ENV = "QWEN36_SDPA_STREAMING"
_banner_logged = False


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
            if not isinstance(value, int) or value <= 0 or value % TILE_SIZE:
                raise TTFatal(f"SDPAProgramConfig: {name} must be a positive multiple of {TILE_SIZE}, got {value!r}")
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


def _chunks(program_config) -> tuple[int, int]:
    if program_config is None:
        return _DEFAULT_CHUNK, _DEFAULT_CHUNK
    return program_config.q_chunk_size, program_config.k_chunk_size


def streaming_selected() -> bool:
    global _banner_logged
    on = os.environ.get(STREAMING_ENV, "0") == "1"
    if on and not _banner_logged:
        log.warning("QWEN36_SDPA_STREAMING engaged")
        _banner_logged = True
    return on


def _rank4(op: str, name: str, t: Tensor) -> tuple[int, int, int, int]:
    if len(t.shape) != 4:
        raise TTFatal(f"{op}: {name} must be rank 4, got {_describe(t)}")
    return tuple(t.shape)


def _check_heads(op: str, nqh: int, nkv: int, dq: int, dk: int) -> None:
    if nkv == 0 or nqh % nkv:
        raise TTFatal(f"{op}: query heads ({nqh}) must be a multiple of key/value heads ({nkv})")
    if dq != dk:
        raise TTFatal(f"{op}: head dims differ: input_tensor_q has {dq}, input_tensor_k has {dk}")
    if dq % TILE_SIZE:
        raise TTFatal(f"{op}: head_dim must be a multiple of {TILE_SIZE}, got {dq}")


def _check_int(op: str, name: str, t: Tensor) -> None:
    if t._dtype not in INTEGER_TYPES:
        raise TTFatal(f"{op}: {name} must be int32 or uint32, got {_describe(t)}")


def _kernel_call(op: str, fn, *args, **kwargs):
    """Kernel value errors surface as TTFatal naming the op (raised when the command runs)."""
    try:
        return fn(*args, **kwargs)
    except (ValueError, IndexError, TypeError) as exc:
        raise TTFatal(f"{op}: {exc}") from None


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
    """Prefill SDPA: q ``[b, nqh, S, d]``, k/v ``[b, nkv, S, d]``, causal or additive mask."""
    op = "scaled_dot_product_attention"
    tensors = {"input_tensor_q": input_tensor_q, "input_tensor_k": input_tensor_k, "input_tensor_v": input_tensor_v}
    for name, t in tensors.items():
        require_device_tensor(op, name, t)
        require_layout(op, name, t, Layout.TILE)
    b, nqh, sq, d = _rank4(op, "input_tensor_q", input_tensor_q)
    bk, nkv, sk, dk = _rank4(op, "input_tensor_k", input_tensor_k)
    _check_heads(op, nqh, nkv, d, dk)
    if tuple(input_tensor_v.shape[:3]) != (bk, nkv, sk):
        raise TTFatal(f"{op}: input_tensor_v {_describe(input_tensor_v)} does not match input_tensor_k")
    inputs = list(tensors.values())
    if attn_mask is not None:
        require_device_tensor(op, "attn_mask", attn_mask)
        inputs.append(attn_mask)
    require_same_device(op, dict(zip(["q", "k", "v", "mask"], inputs)))
    qc, kc = _chunks(program_config)
    streaming = streaming_selected()
    fn = K.sdpa_streaming if streaming else K.sdpa_legacy

    def math(q, k, v, mask=None):
        return _kernel_call(op, fn, q, k, v, scale=scale, is_causal=is_causal and mask is None, attn_mask=mask,
                            q_chunk_size=qc, k_chunk_size=kc)

    return run_op(op, inputs, (b, nqh, sq, input_tensor_v.shape[3]), input_tensor_q._dtype, Layout.TILE, math,
                  memory_config=memory_config)


def _check_paged(op: str, q: Tensor, k: Tensor, v: Tensor, page_table: Tensor, nq_dim: int) -> None:
    for name, t in (("input_tensor_q", q), ("input_tensor_k", k), ("input_tensor_v", v),
                    ("page_table_tensor", page_table)):
        require_device_tensor(op, name, t)
    _check_int(op, "page_table_tensor", page_table)
    if len(page_table.shape) != 2:
        raise TTFatal(f"{op}: page_table_tensor must be [batch, max_pages], got {_describe(page_table)}")
    nb, nkv, bs, dk = _rank4(op, "input_tensor_k", k)
    if tuple(v.shape[:3]) != (nb, nkv, bs):
        raise TTFatal(f"{op}: input_tensor_v {_describe(v)} does not match input_tensor_k {_describe(k)}")
    if bs % TILE_SIZE:
        raise TTFatal(f"{op}: paged block_size must be a multiple of {TILE_SIZE}, got {bs}")
    qs = _rank4(op, "input_tensor_q", q)
    _check_heads(op, qs[nq_dim], nkv, qs[3], dk)
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
    _check_paged(op, input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor, nq_dim=1)
    if chunk_start_idx is None:
        raise TTFatal(f"{op}: chunk_start_idx is required (chunk_start_idx_tensor is not modelled)")
    qc, kc = _chunks(program_config)
    if not isinstance(chunk_start_idx, int) or chunk_start_idx < 0 or chunk_start_idx % qc or chunk_start_idx % kc:
        raise TTFatal(
            f"{op}: chunk_start_idx={chunk_start_idx!r} must be a non-negative multiple of q_chunk_size={qc} "
            f"and k_chunk_size={kc}"
        )
    streaming = streaming_selected()
    b, nqh, sq, _ = input_tensor_q.shape

    def math(q, k, v, pt):
        return _kernel_call(op, K.chunked_sdpa_paged, q, k, v, pt, chunk_start_idx, scale=scale,
                            q_chunk_size=qc, k_chunk_size=kc, streaming=streaming)

    return run_op(op, [input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor],
                  (b, nqh, sq, input_tensor_v.shape[3]), input_tensor_q._dtype, Layout.TILE, math,
                  memory_config=memory_config)


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
    """Decode: q ``[1, b, nqh, d]``; row r attends 0..cur_pos[r]; rows at -1 are skipped
    (their output rows keep whatever the output buffer held)."""
    op = "paged_scaled_dot_product_attention_decode"
    _check_paged(op, input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor, nq_dim=2)
    if cur_pos_tensor is None:
        raise TTFatal(f"{op}: cur_pos_tensor is required for paged decode")
    require_device_tensor(op, "cur_pos_tensor", cur_pos_tensor)
    _check_int(op, "cur_pos_tensor", cur_pos_tensor)
    _, b, nqh, _ = input_tensor_q.shape
    if tuple(cur_pos_tensor.shape) != (b,):
        raise TTFatal(f"{op}: cur_pos_tensor must be [{b}] (one position per batch row), got {_describe(cur_pos_tensor)}")
    _, kc = _chunks(program_config)
    dv = input_tensor_v.shape[3]

    def math(q, k, v, pt, pos, previous):
        out = previous.clone()
        return _kernel_call(op, K.paged_sdpa_decode, q, k, v, pt, pos, scale=scale, k_chunk_size=kc, out=out)

    return run_op(op, [input_tensor_q, input_tensor_k, input_tensor_v, page_table_tensor, cur_pos_tensor],
                  (1, b, nqh, dv), input_tensor_q._dtype, Layout.TILE, math, memory_config=memory_config,
                  reads_output=True)


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
    positions through ``page_table``; rows at -1 are skipped. In place; returns the cache."""
    op = "paged_update_cache"
    require_device_tensor(op, "cache_tensor", cache_tensor)
    require_device_tensor(op, "input_tensor", input_tensor)
    if page_table is None:
        raise TTFatal(f"{op}: page_table is required (ttsim models the paged cache only)")
    require_device_tensor(op, "page_table", page_table)
    _check_int(op, "page_table", page_table)
    inputs = [input_tensor, page_table]
    if update_idxs_tensor is not None:
        require_device_tensor(op, "update_idxs_tensor", update_idxs_tensor)
        _check_int(op, "update_idxs_tensor", update_idxs_tensor)
        inputs.append(update_idxs_tensor)
    elif len(update_idxs) != input_tensor.shape[1]:
        raise TTFatal(f"{op}: update_idxs has {len(update_idxs)} entries, input_tensor has batch {input_tensor.shape[1]}")
    require_same_device(op, {"cache_tensor": cache_tensor, "input_tensor": input_tensor, "page_table": page_table})
    fixed = torch.tensor(list(update_idxs), dtype=torch.int64)

    def update(cache, x, pt, *rest):
        idxs = rest[0] if len(rest) == 2 else fixed
        _kernel_call(op, K.paged_update_cache, cache, x, idxs, pt)

    run_inplace(op, cache_tensor, inputs, update)
    return cache_tensor


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
    """Fill positions 0..S-1 of row ``batch_idx`` from ``input_tensor [1, nkv, S, d]``. In place."""
    op = "paged_fill_cache"
    for name, t in (("cache_tensor", cache_tensor), ("input_tensor", input_tensor), ("page_table", page_table)):
        require_device_tensor(op, name, t)
    _check_int(op, "page_table", page_table)
    require_same_device(op, {"cache_tensor": cache_tensor, "input_tensor": input_tensor, "page_table": page_table})

    def update(cache, x, pt, _chip):
        _kernel_call(op, K.paged_fill_cache, cache, x, pt, batch_idx)

    run_inplace(op, cache_tensor, [input_tensor, page_table], update)
    return cache_tensor


# -- gated delta rule ------------------------------------------------------------------

def _gdn_inputs(op, q, k, v, g, beta):
    tensors = {"q": q, "k": k, "v": v, "g": g, "beta": beta}
    for name, t in tensors.items():
        require_device_tensor(op, name, t)
    require_same_device(op, tensors)
    if len(q.shape) != 4 or tuple(k.shape) != tuple(q.shape):
        raise TTFatal(f"{op}: q and k must both be [B, T, H, K]: q {_describe(q)}, k {_describe(k)}")
    bsz, t, h, _ = q.shape
    if len(v.shape) != 4 or tuple(v.shape[:3]) != (bsz, t, h):
        raise TTFatal(f"{op}: v must be [B, T, H, V] matching q, got {_describe(v)}")
    for name in ("g", "beta"):
        if tuple(tensors[name].shape) != (bsz, t, h):
            raise TTFatal(f"{op}: {name} must be [B, T, H] = {[bsz, t, h]}, got {_describe(tensors[name])}")
    return list(tensors.values())


def chunk_gated_delta_rule(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
    use_qk_l2norm: bool = False,
    output_head_major: bool = False,
    program_config=None,
    wy_inverse: ChunkGdnWyInverse = ChunkGdnWyInverse.AUTO,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
    eye=None, tril=None, ones=None, masks=None,
):
    """Chunked gated delta rule (prefill). Returns o ``[B, T, H, V]`` and, if asked, the
    final state ``[B, H, K, V]`` (fp32)."""
    op = "chunk_gated_delta_rule"
    inputs = _gdn_inputs(op, q, k, v, g, beta)
    if not isinstance(chunk_size, int) or chunk_size <= 0:
        raise TTFatal(f"{op}: chunk_size must be a positive int, got {chunk_size!r}")
    return _gdn(op, G.chunk_gated_delta_rule, inputs, scale, initial_state, None, output_final_state,
                use_qk_l2norm, memory_config, {"chunk_size": chunk_size})


def fused_recurrent_gated_delta_rule(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    initial_state_block_idx: Tensor | None = None,
    output_final_state: bool = False,
    output_per_token_state: bool = False,
    use_qk_l2norm: bool = False,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
):
    """Token-by-token gated delta rule (decode). With ``initial_state_block_idx`` the state
    pool ``initial_state [N, H, K, V]`` is read at each row's index and updated IN PLACE
    (rows whose index is < 0 are skipped), as a per-slot recurrent state needs."""
    op = "fused_recurrent_gated_delta_rule"
    inputs = _gdn_inputs(op, q, k, v, g, beta)
    return _gdn(op, G.recurrent_gated_delta_rule, inputs, scale, initial_state, initial_state_block_idx,
                output_final_state, use_qk_l2norm, memory_config, {})


def _gdn(op, kernel, inputs, scale, initial_state, block_idx, output_final_state, use_qk_l2norm,
         memory_config, extra):
    q = inputs[0]
    bsz, t, h, dk = q.shape
    dv = inputs[2].shape[3]
    if initial_state is not None:
        require_device_tensor(op, "initial_state", initial_state)
    if block_idx is not None:
        if initial_state is None:
            raise TTFatal(f"{op}: initial_state_block_idx needs initial_state (the state pool)")
        require_device_tensor(op, "initial_state_block_idx", block_idx)
        _check_int(op, "initial_state_block_idx", block_idx)
        if tuple(block_idx.shape) != (bsz,):
            raise TTFatal(f"{op}: initial_state_block_idx must be [{bsz}], got {_describe(block_idx)}")
        return _gdn_pooled(op, kernel, inputs, scale, initial_state, block_idx, use_qk_l2norm, memory_config)
    state_shape = (bsz, h, dk, dv)
    if initial_state is not None and tuple(initial_state.shape) != state_shape:
        raise TTFatal(f"{op}: initial_state must be {list(state_shape)}, got {_describe(initial_state)}")
    extra_in = [initial_state] if initial_state is not None else []
    results: dict[int, tuple] = {}

    def compute(chip, *xs):
        if chip not in results:
            qq, kk, vv, gg, bb, *s = xs
            results[chip] = kernel(qq, kk, vv, gg, bb, scale=scale, initial_state=s[0] if s else None,
                                   use_qk_l2norm=use_qk_l2norm, **extra)
        return results[chip]

    def out_math(*xs):
        *args, chip = xs
        o, _ = compute(chip, *args)
        results.pop(chip, None) if not output_final_state else None
        return o

    out = run_op(op, inputs + extra_in, (bsz, t, h, dv), q._dtype, q._layout, out_math,
                 memory_config=memory_config, chip_args=lambda i: (i,))
    if not output_final_state:
        return out

    def state_math(*xs):
        *args, chip = xs
        _, s = compute(chip, *args)
        results.pop(chip)
        return s

    state = run_op(op + " (final state)", inputs + extra_in, state_shape, DataType.FLOAT32, q._layout, state_math,
                   memory_config=memory_config, chip_args=lambda i: (i,))
    return out, state


def _gdn_pooled(op, kernel, inputs, scale, pool, block_idx, use_qk_l2norm, memory_config):
    q = inputs[0]
    bsz, t, h, _ = q.shape
    dv = inputs[2].shape[3]

    def math(qq, kk, vv, gg, bb, idx, pool_data):
        rows = [r for r in range(bsz) if int(idx[r]) >= 0]
        out = torch.zeros(bsz, t, h, dv)
        if not rows:
            return out
        sel = torch.tensor(rows)
        slots = idx[sel].to(torch.int64)
        if int(slots.max()) >= pool_data.shape[0]:
            raise TTFatal(f"{op}: initial_state_block_idx {idx.tolist()} exceeds the state pool of {pool_data.shape[0]}")
        o, s = kernel(qq[sel], kk[sel], vv[sel], gg[sel], bb[sel], scale=scale,
                      initial_state=logical(pool_data, pool)[slots], use_qk_l2norm=use_qk_l2norm)
        pool_data[slots] = s.to(pool_data.dtype)
        out[sel] = o
        return out

    return run_op(op, inputs + [block_idx], (bsz, t, h, dv), q._dtype, q._layout, math,
                  memory_config=memory_config, pool=pool)
