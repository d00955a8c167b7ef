"""Rotary position embeddings: the three ``ttnn.experimental`` RoPE ops of ttnn 0.81.1.

Conventions (``x`` is one head vector of width ``D``, ``cos``/``sin`` the rows for its position):

* :func:`rotary_embedding` and :func:`rotary_embedding_hf` use the HuggingFace / GPT-NeoX
  "rotate_half" convention: ``out = x * cos + rotate_half(x) * sin`` with
  ``rotate_half(x) = cat(-x[..., D/2:], x[..., :D/2])``; the caches hold
  ``cat(freqs, freqs)`` along the last dim (HF's ``emb = cat((freqs, freqs), -1)``).
* :func:`rotary_embedding_llama` uses the interleaved (Meta llama) convention through a
  32x32 ``trans_mat``: ``out = x * cos + (x @ T) * sin`` where ``T`` acts on every
  32-wide tile of ``x`` (tt-metal's ``get_rot_transformation_mat``: ``T[2i, 2i+1] = 1``,
  ``T[2i+1, 2i] = -1``, so ``(x @ T)[2i] = -x[2i+1]`` and ``(x @ T)[2i+1] = x[2i]``); the
  caches hold each frequency twice, interleaved (``repeat_interleave(freqs, 2, -1)``).

Partial RoPE (Qwen3.6: rotate only the first ``rotary_dim = D/4`` channels) is not a mode
of these ops as validated here: the cos/sin width must equal the input width, exactly as
the ttnn 0.81.1-era validation of ``rotary_embedding_hf`` requires ("Cos dims must match
input dims"). A partial-RoPE model slices the first ``rotary_dim`` channels
(``ttnn.slice``), rotates them with ``rotary_dim``-wide caches and concatenates the rest
back (``ttnn.concat``), which is also what runs on any real card.
"""

from __future__ import annotations

import torch

from ..tensor import Tensor, _describe
from ..types import TILE_SIZE, Layout, MemoryConfig, TensorMemoryLayout, TTFatal
from .base import require_device_tensor, require_layout, require_same_device, run_op


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _common(op: str, input_tensor, cos_cache, sin_cache, extra: dict | None = None) -> dict[str, Tensor]:
    tensors = {
        "input_tensor": require_device_tensor(op, "input_tensor", input_tensor),
        "cos_cache": require_device_tensor(op, "cos_cache", cos_cache),
        "sin_cache": require_device_tensor(op, "sin_cache", sin_cache),
    }
    for name, t in (extra or {}).items():
        tensors[name] = require_device_tensor(op, name, t)
    require_same_device(op, tensors)
    for name, t in tensors.items():
        require_layout(op, name, t, Layout.TILE)
        if len(t._shape) != 4:
            raise TTFatal(f"{op}: {name} must be rank 4, got {_describe(t)}")
    x, cos, sin = tensors["input_tensor"], tensors["cos_cache"], tensors["sin_cache"]
    if cos._dtype != sin._dtype:
        raise TTFatal(f"{op}: cos_cache and sin_cache dtypes must match: {_describe(cos)} vs {_describe(sin)}")
    if tuple(cos._shape) != tuple(sin._shape):
        raise TTFatal(f"{op}: cos_cache and sin_cache shapes must match: {_describe(cos)} vs {_describe(sin)}")
    if cos._shape[-1] != x._shape[-1]:
        raise TTFatal(
            f"{op}: cos_cache last dim ({cos._shape[-1]}) must equal input_tensor's head_dim "
            f"({x._shape[-1]}); for partial RoPE slice the rotated channels first: {_describe(x)}"
        )
    return tensors


def _require_sharded(op: str, name: str, t: Tensor, height: bool) -> None:
    mc = t._memory_config
    layout = mc.memory_layout if mc is not None else TensorMemoryLayout.INTERLEAVED
    if height and layout != TensorMemoryLayout.HEIGHT_SHARDED:
        raise TTFatal(f"{op}: is_decode_mode=True needs {name} HEIGHT_SHARDED, got {layout.name} ({_describe(t)})")
    if not height and layout == TensorMemoryLayout.INTERLEAVED:
        raise TTFatal(f"{op}: is_decode_mode=True needs {name} sharded, got INTERLEAVED ({_describe(t)})")


def _prefill_seq(op: str, x: Tensor, cos: Tensor) -> int:
    seq = x._shape[-2]
    if cos._shape[-2] < seq:
        raise TTFatal(f"{op}: cos_cache seq_len ({cos._shape[-2]}) must be >= input_tensor seq_len ({seq}): "
                      f"{_describe(x)} vs {_describe(cos)}")
    return seq


def rotary_embedding(
    input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    token_index: int | None = None,
    *,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
) -> Tensor:
    """HF rotate_half RoPE. Prefill: input ``[B, H, S, D]`` uses cache rows ``0..S-1``.

    With ``token_index`` (decode) the input is ``[1, 1, B, D]`` (seq_len 1, users on the
    row axis) and every row is rotated by the cache row ``token_index``.
    """
    op = "rotary_embedding"
    t = _common(op, input_tensor, cos_cache, sin_cache)
    x, cos = t["input_tensor"], t["cos_cache"]
    if x._padded[-1] % (2 * TILE_SIZE):
        raise TTFatal(f"{op}: input_tensor padded head_dim ({x._padded[-1]}) must be a multiple of "
                      f"{2 * TILE_SIZE}: {_describe(x)}")
    if cos._shape[0] != 1 or cos._shape[1] != 1:
        raise TTFatal(f"{op}: cos_cache must be [1, 1, max_seq_len, head_dim], got {_describe(cos)}")
    if token_index is None:
        seq = _prefill_seq(op, x, cos)

        def math(xv, c, s):
            return xv * c[..., :seq, :] + rotate_half(xv) * s[..., :seq, :]
    else:
        if not isinstance(token_index, int) or not 0 <= token_index < cos._shape[-2]:
            raise TTFatal(f"{op}: token_index={token_index!r} is outside cos_cache rows [0, {cos._shape[-2]})")

        def math(xv, c, s):
            return xv * c[..., token_index, :] + rotate_half(xv) * s[..., token_index, :]

    return run_op(op, list(t.values()), x._shape, x._dtype, Layout.TILE, math, memory_config=memory_config)


def rotary_embedding_hf(
    input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    *,
    is_decode_mode: bool = False,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
) -> Tensor:
    """HF rotate_half RoPE (``q * cos + rotate_half(q) * sin``).

    Prefill: input ``[1, H, S, D]``, caches ``[1, 1, >=S, D]`` (rows ``0..S-1`` are used).
    Decode (``is_decode_mode=True``): input ``[1, B, H, D]`` HEIGHT_SHARDED, caches
    ``[1, B, 1, D]`` sharded: user ``b`` is rotated by its own cache row.
    """
    op = "rotary_embedding_hf"
    t = _common(op, input_tensor, cos_cache, sin_cache)
    x, cos, sin = t["input_tensor"], t["cos_cache"], t["sin_cache"]
    width = x._padded[-1]
    if width != TILE_SIZE and width % (2 * TILE_SIZE):
        raise TTFatal(f"{op}: input_tensor padded head_dim ({width}) must be {TILE_SIZE} or a multiple of "
                      f"{2 * TILE_SIZE} (rotate_half midpoint on a tile boundary): {_describe(x)}")
    if cos._shape[0] != 1:
        raise TTFatal(f"{op}: cos_cache dim 0 must be 1, got {_describe(cos)}")
    if is_decode_mode:
        _require_sharded(op, "input_tensor", x, height=True)
        _require_sharded(op, "cos_cache", cos, height=False)
        _require_sharded(op, "sin_cache", sin, height=False)
        if cos._shape[1] != x._shape[1] or cos._shape[2] != 1:
            raise TTFatal(f"{op}: decode cos_cache must be [1, {x._shape[1]}, 1, {x._shape[-1]}] "
                          f"(one row per user of input_tensor {list(x._shape)}), got {_describe(cos)}")

        def math(xv, c, s):
            return xv * c + rotate_half(xv) * s  # [1, B, 1, D] broadcasts over heads
    else:
        if cos._shape[1] != 1:
            raise TTFatal(f"{op}: prefill cos_cache must have batch dim 1, got {_describe(cos)}")
        seq = _prefill_seq(op, x, cos)

        def math(xv, c, s):
            return xv * c[..., :seq, :] + rotate_half(xv) * s[..., :seq, :]

    return run_op(op, list(t.values()), x._shape, x._dtype, Layout.TILE, math, memory_config=memory_config)


def _apply_trans_mat(xv: torch.Tensor, tm: torch.Tensor) -> torch.Tensor:
    """``x @ T`` applied to every 32-wide tile of the last dim of ``x``."""
    blocks = xv.reshape(*xv.shape[:-1], xv.shape[-1] // TILE_SIZE, TILE_SIZE)
    return torch.matmul(blocks, tm).reshape(xv.shape)


def rotary_embedding_llama(
    input_tensor: Tensor,
    cos_cache: Tensor,
    sin_cache: Tensor,
    trans_mat: Tensor,
    *,
    is_decode_mode: bool = False,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
) -> Tensor:
    """Interleaved (llama) RoPE: ``x * cos + (x @ trans_mat) * sin`` per 32-wide tile.

    Prefill: input ``[B, H, S, D]``, caches ``[1, 1 or H, >=S, D]`` (rows ``0..S-1``),
    ``trans_mat`` ``[1, 1, 32, 32]``. Decode (``is_decode_mode=True``): input
    ``[1, B, H, D]`` HEIGHT_SHARDED, caches ``[1, B, 1, D]`` sharded; ``trans_mat`` is
    sharded with one 32x32 copy per core (the first tile is used).
    """
    op = "rotary_embedding_llama"
    t = _common(op, input_tensor, cos_cache, sin_cache, {"trans_mat": trans_mat})
    x, cos, sin, tm = t["input_tensor"], t["cos_cache"], t["sin_cache"], t["trans_mat"]
    if x._shape[-1] % TILE_SIZE:
        raise TTFatal(f"{op}: input_tensor head_dim ({x._shape[-1]}) must be a multiple of {TILE_SIZE}: "
                      f"{_describe(x)}")
    if tm._shape[-1] != TILE_SIZE or tm._shape[-2] % TILE_SIZE or tm._shape[-2] == 0:
        raise TTFatal(f"{op}: trans_mat must be [1, 1, {TILE_SIZE}, {TILE_SIZE}] (or 32x32 tiles stacked "
                      f"per core in decode), got {_describe(tm)}")
    if is_decode_mode:
        _require_sharded(op, "input_tensor", x, height=True)
        for name in ("cos_cache", "sin_cache", "trans_mat"):
            _require_sharded(op, name, t[name], height=False)
        if x._shape[0] != 1:
            raise TTFatal(f"{op}: decode input_tensor must be [1, batch, n_heads, head_dim], got {_describe(x)}")
        if cos._shape[1] != x._shape[1] or cos._shape[2] != 1:
            raise TTFatal(f"{op}: decode cos_cache must be [1, {x._shape[1]}, 1, {x._shape[-1]}], "
                          f"got {_describe(cos)}")

        def math(xv, c, s, m):
            return xv * c + _apply_trans_mat(xv, m[0, 0, :TILE_SIZE, :]) * s
    else:
        if cos._shape[1] not in (1, x._shape[1]):
            raise TTFatal(f"{op}: cos_cache must be [1, n_heads, seq_len, head_dim] or [1, 1, seq_len, head_dim] "
                          f"for input_tensor {list(x._shape)}, got {_describe(cos)}")
        seq = _prefill_seq(op, x, cos)

        def math(xv, c, s, m):
            return xv * c[..., :seq, :] + _apply_trans_mat(xv, m[0, 0, :TILE_SIZE, :]) * s[..., :seq, :]

    return run_op(op, list(t.values()), x._shape, x._dtype, Layout.TILE, math, memory_config=memory_config)
