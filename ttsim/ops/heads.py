"""Attention head split and merge: experimental.nlp_create_qkv_heads(_decode) and
experimental.nlp_concat_heads(_decode). Pure data movement: values are not rounded.

Semantics are tt-metal's unit tests' references (tests/ttnn/unit_tests/operations/...
test_nlp_create_qkv_heads.py, test_nlp_create_qkv_heads_decode.py): a fused projection
``[q heads | k heads | v heads]`` along the last dim, head h of q at columns
``[h*HD, (h+1)*HD)``.

- prefill ``[B, 1, S, (NH + 2 NKV) HD]`` -> q ``[B, NH, S, HD]``, k ``[B, NKV, S, HD]`` (or
  ``[B, NKV, HD, S]`` with ``transpose_k_heads``), v ``[B, NKV, S, HD]``; with ``input_kv`` q
  comes from ``input`` and k|v from ``input_kv``; ``kv_tied`` reads v from k's columns.
- decode ``[1, 1, B, (NH + 2 NKV) HD]`` -> q ``[1, B, NH, HD]``, k, v ``[1, B, NKV, HD]``
  (height sharded, one user per core; the head dim is padded to a tile by storage).
- concat ``[B, NH, S, HD]`` -> ``[B, 1, S, NH HD]``.
- concat decode: a height-sharded ``[1, B, NH, HD]`` -> ``[1, 1, 32, NH HD]``: the batch is
  ALWAYS padded to 32 rows (production slices it back); rows ``B..31`` are not written, so
  they hold whatever the output's memory held, as on a card.
"""

from __future__ import annotations

import torch

from ..tensor import Tensor, _describe
from ..types import (
    L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    L1_WIDTH_SHARDED_MEMORY_CONFIG,
    TILE_SIZE,
    Layout,
    MemoryConfig,
    TensorMemoryLayout,
    TTFatal,
)
from .base import require_device_tensor, require_layout, require_same_device, run_op


def _positive(op: str, name: str, v) -> int:
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise TTFatal(f"{op}: {name} must be a positive int, got {v!r}")
    return v


def _head_dim(op: str, width: int, heads: int, what: str) -> int:
    if width % heads:
        raise TTFatal(f"{op}: the last dim {width} does not split into {what} = {heads} heads")
    hd = width // heads
    if hd % TILE_SIZE:
        raise TTFatal(f"{op}: head_dim {hd} must be a multiple of {TILE_SIZE} (tile width)")
    return hd


def _no_outputs(op: str, output_tensors) -> None:
    if output_tensors is not None:
        raise TTFatal(f"{op}: output_tensors= is not modelled by ttsim; use the returned tensors")


def nlp_create_qkv_heads(input, input_kv=None, *, num_heads, num_kv_heads=None,  # noqa: A002 - ttnn's name
                         transpose_k_heads=True, kv_tied=False, memory_config: MemoryConfig | None = None,
                         output_tensors=None):
    """Split a fused prefill projection into q, k, v heads (see the module docstring)."""
    op = "nlp_create_qkv_heads"
    x = require_device_tensor(op, "input", input)
    require_layout(op, "input", x, Layout.TILE)
    nh = _positive(op, "num_heads", num_heads)
    nkv = nh if num_kv_heads is None else _positive(op, "num_kv_heads", num_kv_heads)
    _no_outputs(op, output_tensors)
    if len(x._shape) != 4 or x._shape[1] != 1:
        raise TTFatal(f"{op}: input must be [B, 1, S, W], got {_describe(x)}")
    b, _, s, w = x._shape
    kv_sections = 1 if kv_tied else 2
    inputs = [x]
    if input_kv is None:
        hd = _head_dim(op, w, nh + kv_sections * nkv, "num_heads + num_kv_heads sections")
    else:
        kv = require_device_tensor(op, "input_kv", input_kv)
        require_layout(op, "input_kv", kv, Layout.TILE)
        require_same_device(op, {"input": x, "input_kv": kv})
        hd = _head_dim(op, w, nh, "num_heads")
        if tuple(kv._shape) != (b, 1, s, kv_sections * nkv * hd):
            raise TTFatal(f"{op}: input_kv must be {[b, 1, s, kv_sections * nkv * hd]} for {nkv} kv heads of "
                          f"{hd}, got {_describe(kv)}")
        if kv._dtype != x._dtype:
            raise TTFatal(f"{op}: input and input_kv dtypes differ: {_describe(x)} vs {_describe(kv)}")
        inputs.append(kv)

    def sections(*vals):
        if len(vals) == 1:
            flat = vals[0]
            q, rest = flat[..., :nh * hd], flat[..., nh * hd:]
        else:
            q, rest = vals
        k = rest[..., :nkv * hd]
        v = k if kv_tied else rest[..., nkv * hd:2 * nkv * hd]
        return q, k, v

    def heads(t, n):  # [B, 1, S, n*HD] -> [B, n, S, HD]
        return t.reshape(b, s, n, hd).transpose(1, 2)

    k_shape = [b, nkv, hd, s] if transpose_k_heads else [b, nkv, s, hd]
    q = run_op(op, inputs, [b, nh, s, hd], x._dtype, Layout.TILE, lambda *v: heads(sections(*v)[0], nh),
               memory_config=memory_config, moves_values=True)

    def k_math(*vals):
        k = heads(sections(*vals)[1], nkv)
        return k.transpose(-1, -2) if transpose_k_heads else k

    k = run_op(op, inputs, k_shape, x._dtype, Layout.TILE, k_math, memory_config=memory_config, moves_values=True)
    v = run_op(op, inputs, [b, nkv, s, hd], x._dtype, Layout.TILE, lambda *v: heads(sections(*v)[2], nkv),
               memory_config=memory_config, moves_values=True)
    return q, k, v


def nlp_create_qkv_heads_decode(input_tensor: Tensor, *, num_heads, num_kv_heads=None, output_tensors=None,
                                overlap_qk_coregrid=True, batch_offset=None, slice_size=None,
                                memory_config: MemoryConfig | None = None):
    """Split a fused decode projection ``[1, 1, B, W]`` into q, k, v ``[1, B, heads, HD]``.
    ``batch_offset`` (a device int tensor, read when the op runs) with ``slice_size`` takes
    users ``[offset, offset + slice_size)``."""
    op = "nlp_create_qkv_heads_decode"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.TILE)
    nh = _positive(op, "num_heads", num_heads)
    nkv = nh if num_kv_heads is None else _positive(op, "num_kv_heads", num_kv_heads)
    _no_outputs(op, output_tensors)
    if len(x._shape) != 4 or tuple(x._shape[:2]) != (1, 1):
        raise TTFatal(f"{op}: input_tensor must be [1, 1, B, W], got {_describe(x)}")
    if nh > TILE_SIZE:
        raise TTFatal(f"{op}: num_heads {nh} must fit one tile height ({TILE_SIZE})")
    batch, w = x._shape[2], x._shape[3]
    if batch > TILE_SIZE:
        raise TTFatal(f"{op}: batch {batch} must fit one tile height ({TILE_SIZE})")
    hd = _head_dim(op, w, nh + 2 * nkv, "num_heads + 2 num_kv_heads")
    mc = memory_config or L1_HEIGHT_SHARDED_MEMORY_CONFIG
    if mc.memory_layout != TensorMemoryLayout.HEIGHT_SHARDED:
        raise TTFatal(f"{op}: the output is height sharded (one user per core); memory_config must be "
                      f"HEIGHT_SHARDED, got {mc!r}")
    inputs = [x]
    if (batch_offset is None) != (slice_size is None):
        raise TTFatal(f"{op}: batch_offset and slice_size go together")
    users = batch
    if batch_offset is not None:
        off = require_device_tensor(op, "batch_offset", batch_offset)
        require_same_device(op, {"input_tensor": x, "batch_offset": off})
        users = _positive(op, "slice_size", slice_size)
        inputs.append(off)

    def rows(flat, *rest):  # the users this call takes, [users, W]
        lo = int(rest[0].reshape(-1)[0]) if rest else 0
        if not 0 <= lo <= batch - users:
            raise TTFatal(f"{op}: batch_offset {lo} + slice_size {users} exceeds the batch {batch}")
        return flat[0, 0, lo:lo + users]

    def part(first: int, n: int):
        return lambda *vals: rows(*vals)[:, first * hd:(first + n) * hd].reshape(1, users, n, hd)

    q = run_op(op, inputs, [1, users, nh, hd], x._dtype, Layout.TILE, part(0, nh), memory_config=mc,
               moves_values=True)
    k = run_op(op, inputs, [1, users, nkv, hd], x._dtype, Layout.TILE, part(nh, nkv), memory_config=mc,
               moves_values=True)
    v = run_op(op, inputs, [1, users, nkv, hd], x._dtype, Layout.TILE, part(nh + nkv, nkv), memory_config=mc,
               moves_values=True)
    return q, k, v


def nlp_concat_heads(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None) -> Tensor:
    """``[B, NH, S, HD]`` -> ``[B, 1, S, NH*HD]`` (head h at columns ``[h*HD, (h+1)*HD)``)."""
    op = "nlp_concat_heads"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.TILE)
    if len(x._shape) != 4:
        raise TTFatal(f"{op}: input_tensor must be [B, NH, S, HD], got {_describe(x)}")
    b, nh, s, hd = x._shape
    if hd % TILE_SIZE:
        raise TTFatal(f"{op}: head_dim {hd} must be a multiple of {TILE_SIZE} (tile width)")
    return run_op(op, [x], [b, 1, s, nh * hd], x._dtype, Layout.TILE,
                  lambda v: v.transpose(1, 2).reshape(b, 1, s, nh * hd), memory_config=memory_config,
                  moves_values=True)


def nlp_concat_heads_decode(input_tensor: Tensor, *, num_heads, memory_config: MemoryConfig | None = None,
                            output_tensor=None, sub_core_grids=None) -> Tensor:
    """A height-sharded ``[1, B, NH, HD]`` -> ``[1, 1, 32, NH*HD]`` (width sharded); rows past B
    keep what the output's memory held."""
    op = "nlp_concat_heads_decode"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.TILE)
    nh = _positive(op, "num_heads", num_heads)
    if x._memory_config.memory_layout != TensorMemoryLayout.HEIGHT_SHARDED:
        raise TTFatal("input_tensor.memory_config().memory_layout() == TensorMemoryLayout::HEIGHT_SHARDED")
    if output_tensor is not None:
        raise TTFatal(f"{op}: output_tensor= is not modelled by ttsim; use the returned tensor")
    if len(x._shape) != 4 or x._shape[0] != 1:
        raise TTFatal(f"{op}: input_tensor must be [1, B, heads, HD], got {_describe(x)}")
    _, batch, heads, hd = x._shape
    if nh > heads:
        raise TTFatal(f"{op}: num_heads {nh} exceeds the input's {heads} heads")
    if batch > TILE_SIZE:
        raise TTFatal(f"{op}: batch {batch} must fit one tile height ({TILE_SIZE})")

    def math(v, held):
        out = held.clone()
        out[0, 0, :batch] = v[0, :, :nh].reshape(batch, nh * hd).to(out.dtype)
        return out

    return run_op(op, [x], [1, 1, TILE_SIZE, nh * hd], x._dtype, Layout.TILE, math,
                  memory_config=memory_config or L1_WIDTH_SHARDED_MEMORY_CONFIG, reads_output=True)
