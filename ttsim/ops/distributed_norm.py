"""Distributed RMS norm: rms_norm_pre_all_gather and rms_norm_post_all_gather.

A width-sharded activation (TP) is normalised over the FULL width in three steps
(tt_transformers' tt_distributed_rmsnorm): each chip computes its partial sum of squares
(pre), the chips all-gather those partials along the last dim, and each chip normalises
its own shard by the global mean square (post). As tt-metal lays the statistics out (0.81.1's
goldens and LayerNormPreAllGatherDeviceOperation): the pre output is the input's shape with
the last dim one tile wide (32); column 0 holds ``sum(x^2)`` over the chip's logical width
(tile padding is zero-filled first), stored in ``dtype`` (BFLOAT16 by default, so the
partial is rounded there); the other 31 columns are written as zeros (tt-metal's golden
masks them: undefined). The post op reads column 0 of each 32-wide block of the gathered
stats (one block per chip) and divides their sum by ``width x chips``.
"""

from __future__ import annotations

import torch

from ..tensor import Tensor, _describe
from ..types import TILE_SIZE, DataType, Layout, MemoryConfig, TensorMemoryLayout, TTFatal
from .base import require_device_tensor, require_same_device, run_op
from .normalization import _vector_param

_FLOATS = (DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32)


def _check_input(x: Tensor) -> None:
    # LayerNormPreAllGatherDeviceOperation::validate_on_program_cache_miss, in its words
    if x._layout != Layout.TILE:
        raise TTFatal("Only tilized inputs supported.")
    if x._memory_config.memory_layout != TensorMemoryLayout.INTERLEAVED:
        raise TTFatal("Only interleaved inputs supported.")
    if x._dtype not in _FLOATS:
        raise TTFatal("Input data format not supported.")
    if len(x._shape) != 4:
        raise TTFatal(f"rms_norm_pre_all_gather: input_tensor must be rank 4 (the stats replace dim 3), "
                      f"got {_describe(x)}")


def rms_norm_pre_all_gather(
    input_tensor: Tensor,
    *,
    dtype: DataType = DataType.BFLOAT16,
    residual_input_tensor: Tensor | None = None,
    compute_kernel_config=None,
    program_config=None,
    memory_config: MemoryConfig | None = None,
    use_2d_core_grid: bool | None = None,
    fast_and_approximate_mode: bool = False,
) -> Tensor:
    """This chip's ``sum(x^2)`` (x = input + residual) per row, in column 0 of a 32-wide tile row."""
    op = "rms_norm_pre_all_gather"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    _check_input(x)
    inputs = [x]
    if residual_input_tensor is not None:
        r = require_device_tensor(op, "residual_input_tensor", residual_input_tensor)
        if r._layout != Layout.TILE:
            raise TTFatal(f"Residual tensor must have TILE layout, got: {r._layout!r}")
        if tuple(r._shape) != tuple(x._shape):
            raise TTFatal(f"Input and residual logical and padded shapes must match, got input: logical="
                          f"{list(x._shape)} vs residual: logical={list(r._shape)}")
        require_same_device(op, {"input_tensor": x, "residual_input_tensor": r})
        inputs.append(r)
    if not isinstance(dtype, DataType) or dtype not in _FLOATS:
        raise TTFatal(f"{op}: dtype must be BFLOAT16, BFLOAT8_B or FLOAT32, got {dtype!r}")
    shape = list(x._shape)
    shape[-1] = TILE_SIZE

    def math(h, *rest):
        if rest:
            h = h + rest[0]
        stats = torch.zeros(*h.shape[:-1], TILE_SIZE)
        stats[..., 0] = h.square().sum(dim=-1)
        return stats

    return run_op(op, inputs, shape, dtype, Layout.TILE, math, memory_config=memory_config or x._memory_config)


def rms_norm_post_all_gather(
    input_tensor: Tensor,
    stats: Tensor,
    *,
    epsilon: float = 1e-12,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
    program_config=None,
    dtype: DataType | None = None,
    use_2d_core_grid: bool | None = None,
) -> Tensor:
    """``x * rsqrt(sum_chips(stats[..., 32 c]) / (width * chips) + epsilon)``, then ``* weight + bias``."""
    op = "rms_norm_post_all_gather"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    _check_input(x)
    s = require_device_tensor(op, "stats", stats)
    if s._layout != Layout.TILE:
        raise TTFatal(f"Stats tensor must have TILE layout, got: {s._layout!r}")
    if s._dtype not in _FLOATS:
        raise TTFatal(f"Stats tensor must be BFLOAT16, BFLOAT8_B, or FLOAT32, got: {s._dtype!r}")
    if len(s._shape) != len(x._shape) or tuple(s._shape[:-1]) != tuple(x._shape[:-1]) \
            or s._shape[-1] % TILE_SIZE or not s._shape[-1]:
        raise TTFatal(f"{op}: stats must be the input's shape with the last dim a multiple of {TILE_SIZE} "
                      f"(one block per chip), got stats {_describe(s)} for input {_describe(x)}")
    tensors = {"input_tensor": x, "stats": s}
    width = x._shape[-1]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            tensors[name] = require_device_tensor(op, name, t)
            _vector_param(op, name, tensors[name], width)
    require_same_device(op, tensors)
    chips = s._shape[-1] // TILE_SIZE
    names = list(tensors)
    eps = float(epsilon)

    def math(*args):
        vals = dict(zip(names, args))
        h, st = vals["input_tensor"], vals["stats"]
        mean_sq = st[..., ::TILE_SIZE].sum(dim=-1, keepdim=True) / (width * chips)
        y = h * torch.rsqrt(mean_sq + eps)
        if "weight" in vals:
            y = y * vals["weight"].reshape(width)
        if "bias" in vals:
            y = y + vals["bias"].reshape(width)
        return y

    return run_op(op, list(tensors.values()), x._shape, x._dtype if dtype is None else dtype, Layout.TILE, math,
                  memory_config=memory_config)
