"""Data movement that splits, repeats or writes into part of a tensor: chunk,
repeat_interleave and experimental.slice_write. Values move unchanged (no rounding)."""

from __future__ import annotations

import builtins

import torch

from ..tensor import Tensor, _describe
from ..types import Layout, TensorMemoryLayout, TTFatal
from .base import require_device_tensor, require_same_device, run_inplace, run_op


def _dim(op: str, x: Tensor, dim) -> int:
    rank = len(x._shape)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        raise TTFatal(f"{op}: dim={dim!r} is out of range for input_tensor {_describe(x)}")
    return dim % rank


def chunk(input_tensor: Tensor, chunks: int, dim: int) -> list[Tensor]:
    """ttnn.chunk: ``torch.chunk`` (pieces of ceil(n / chunks); fewer pieces when they run out),
    each piece a new tensor."""
    op = "chunk"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if not isinstance(chunks, int) or isinstance(chunks, bool) or chunks <= 0:
        raise TTFatal("Number of chunks must be greater than zero")  # tt-metal's chunk.cpp
    d = _dim(op, x, dim)
    n = x._shape[d]
    step = -(-n // chunks) if n else 0
    starts = list(range(0, n, step)) if step else [0]
    pieces = []
    for lo in starts:
        hi = builtins.min(lo + step, n)
        shape = list(x._shape)
        shape[d] = hi - lo
        pieces.append(run_op(op, [x], shape, x._dtype, x._layout,
                             lambda v, lo=lo, hi=hi: v.narrow(d, lo, hi - lo), moves_values=True))
    return pieces


def repeat_interleave(input_tensor: Tensor, repeats: int, dim: int, *, memory_config=None) -> Tensor:
    """ttnn.repeat_interleave: each slice along ``dim`` repeated ``repeats`` times in place
    (``torch.repeat_interleave`` with an int)."""
    op = "repeat_interleave"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or repeats < 1:
        raise TTFatal(f"{op}: repeats must be a positive int, got {repeats!r}")
    d = _dim(op, x, dim)
    shape = list(x._shape)
    shape[d] *= repeats
    return run_op(op, [x], shape, x._dtype, x._layout, lambda v: v.repeat_interleave(repeats, dim=d),
                  memory_config=memory_config, moves_values=True)


def slice_write(input_tensor: Tensor, output_tensor: Tensor, start, end, step) -> Tensor:
    """ttnn.experimental.slice_write: ``output_tensor[start:end:step] = input_tensor`` IN PLACE
    (0.81.1's golden), returning ``output_tensor``. Refused in tt-metal's words (its validation
    and program factories, texts present in 0.81.1): unequal ranks, a start or end outside the
    output, start > end, a start other than 0 in the last dim, unequal dtypes, a step on a
    sharded input. ttsim models a ROW_MAJOR output only (production's use)."""
    op = "slice_write"
    src = require_device_tensor(op, "input_tensor", input_tensor)
    dst = require_device_tensor(op, "output_tensor", output_tensor)
    require_same_device(op, {"input_tensor": src, "output_tensor": dst})
    start, end, step = ([int(v) for v in seq] for seq in (start, end, step))
    out_padded = list(dst.padded_shape)
    if not len(src._shape) == len(out_padded) == len(start) == len(end):
        raise TTFatal(f"Ranks of input tensor, output_tensor, slice start and slice end should be equal. "
                      f"Got {len(src._shape)} {len(out_padded)} {len(start)} {len(end)}")
    if len(step) != len(start) or any(s < 1 for s in step):
        raise TTFatal(f"{op}: step must hold {len(start)} positive entries, got {step}")
    for i, (lo, hi, n) in enumerate(zip(start, end, out_padded)):
        if not lo < n:
            raise TTFatal(f"Start is outside the bounds of the output tensor for index {i}. Got {lo}. Size {n}")
        if not hi <= n:
            raise TTFatal(f"Ends {hi} must be less than or equal to the shape of the tensor {n}")
        if not lo <= hi:
            raise TTFatal(f"Slice start {lo} should be less than slice end {hi}")
    if src._memory_config.memory_layout != TensorMemoryLayout.INTERLEAVED and any(s != 1 for s in step):
        raise TTFatal("Step is not supported for sharded slice_write operation")
    if start[-1] != 0:
        raise TTFatal(f"slice_write expects output start for the last dimension to be 0. Got {start[-1]}")
    if src._dtype != dst._dtype:
        raise TTFatal("slice_write input & output must have the same dtype")
    if dst._layout != Layout.ROW_MAJOR:
        raise TTFatal(f"{op}: a {dst._layout!r} output_tensor is not modelled by ttsim (ROW_MAJOR only)")
    extent = [len(range(lo, min(hi, n), s)) for lo, hi, n, s in zip(start, end, dst._shape, step)]
    if extent != list(src._shape):
        raise TTFatal(f"{op}: the slice {start}:{end}:{step} of the output covers {extent}, the input is "
                      f"{list(src._shape)}")
    idx = tuple(builtins.slice(lo, hi, s) for lo, hi, s in zip(start, end, step))

    def update(storage: torch.Tensor, values: torch.Tensor, _chip: int) -> None:
        storage[idx] = values.to(storage.dtype)

    run_inplace(op, dst, [src], update)
    return dst
