"""Reductions (argmax, sum, mean, max) and plus_one (in place, for decode positions)."""

from __future__ import annotations

from array import array

import torch

from ..tensor import Tensor, _describe
from ..types import DRAM_MEMORY_CONFIG, INTEGER_TYPES, DataType, Layout, MemoryConfig, TTFatal
from .unmodelled import refuse_unmodelled
from .base import (
    require_device_tensor,
    require_layout,
    require_same_device,
    run_inplace,
    run_op,
    storage,
    take_output,
)

INT32_MAX = 2**31 - 1
#: plus_one on up to this many entries (decode positions) adds in Python ints and writes them back
#: in one copy_: a tensor-scalar comparison costs more here than the whole update in ints
SMALL_PLUS_ONE = 64


def _norm_dim(op: str, x: Tensor, dim: int) -> int:
    rank = len(x._shape)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        raise TTFatal(f"{op}: dim={dim!r} is out of range for input_tensor {_describe(x)}")
    return dim % rank


def argmax(
    input_tensor: Tensor,
    dim: int | None = None,
    keepdim: bool = False,
    *,
    sub_core_grids=None,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    enable_secondary_dm: bool | None = None,
) -> Tensor:
    """Indices of the maxima along ``dim`` (first index on ties, as torch); UINT32, ROW_MAJOR.

    ``dim=None`` reduces every element (ROW_MAJOR input only) to one index into the
    flattened tensor: shape ``[]``, or all-ones of the input's rank with ``keepdim``.
    ``output_tensor``: a preallocated UINT32 ROW_MAJOR tensor of the output shape, written
    in place and returned (the decode trace writes its token input buffer this way).
    """
    op = "argmax"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if x._dtype not in (DataType.BFLOAT16, DataType.FLOAT32, DataType.INT32, DataType.UINT32):
        raise TTFatal(f"{op}: input_tensor must be BFLOAT16, FLOAT32, INT32 or UINT32, got {_describe(x)}")
    shape = list(x._shape)
    if dim is None and 0 in shape or dim is not None and shape[_norm_dim(op, x, dim)] == 0:
        raise TTFatal(f"{op}: cannot reduce over an empty dimension: input_tensor {_describe(x)}, dim={dim!r}")
    if dim is None:
        if x._layout != Layout.ROW_MAJOR:
            raise TTFatal(f"{op}: dim=None (reduce all) needs a ROW_MAJOR input_tensor, got {_describe(x)}")
        out_shape = [1] * len(shape) if keepdim else []
    else:
        d = _norm_dim(op, x, dim)
        if x._layout == Layout.TILE and x._dtype in INTEGER_TYPES:
            raise TTFatal(f"{op}: a TILE input_tensor must be BFLOAT16 or FLOAT32, got {_describe(x)}")
        if d == len(shape) - 2 and x._dtype in INTEGER_TYPES:
            raise TTFatal(f"{op}: dim={dim} (height) supports BFLOAT16/FLOAT32 only, got {_describe(x)}")
        out_shape = list(shape)
        if keepdim:
            out_shape[d] = 1
        else:
            del out_shape[d]

    def math(v):
        if dim is None:
            r = torch.argmax(v.reshape(-1)).reshape(out_shape)
        else:
            r = torch.argmax(v, dim=dim, keepdim=keepdim)
        return r.to(torch.int32)

    if output_tensor is None:
        return run_op(op, [x], out_shape, DataType.UINT32, Layout.ROW_MAJOR, math, memory_config=memory_config)
    out = require_device_tensor(op, "output_tensor", output_tensor)
    require_same_device(op, {"input_tensor": x, "output_tensor": out})
    if out._dtype != DataType.UINT32 or out._layout != Layout.ROW_MAJOR or list(out._shape) != out_shape:
        raise TTFatal(f"{op}: output_tensor must be UINT32 ROW_MAJOR of shape {out_shape}, got {_describe(out)}")

    def update(target, v, _chip):
        target.copy_(storage(math(v), DataType.UINT32, Layout.ROW_MAJOR).reshape(target.shape))

    run_inplace(op, out, [x], update)
    return out


def _reduce(name: str, fn):
    def op(
        input_tensor: Tensor,
        dim=None,
        keepdim: bool = False,
        *,
        memory_config: MemoryConfig | None = None,
        compute_kernel_config=None,
        scalar: float = 1.0,
        correction=None,
        sub_core_grids=None,
        fast_and_approximate_mode: bool = False,
        output_layout: Layout | None = None,
    ) -> Tensor:
        x = require_device_tensor(name, "input_tensor", input_tensor)
        refuse_unmodelled(name, correction=correction)  # a variance correction: std/var only
        if x._dtype in INTEGER_TYPES and name == "mean":
            raise TTFatal(f"{name}: input_tensor must be a float tensor, got {_describe(x)}")
        rank = len(x._shape)
        if dim is None:
            dims = list(range(rank))
        else:
            dims = [dim] if isinstance(dim, int) else list(dim)
            dims = sorted({_norm_dim(name, x, d) for d in dims})
        if name == "max" and any(x._shape[d] == 0 for d in dims):
            raise TTFatal(f"{name}: cannot reduce over an empty dimension: input_tensor {_describe(x)}, dim={dim!r}")
        out_shape = [1 if i in dims else s for i, s in enumerate(x._shape)] if keepdim else \
            [s for i, s in enumerate(x._shape) if i not in dims]
        layout = x._layout if output_layout is None else output_layout
        mult = float(scalar)

        def math(v):
            r = fn(v.to(torch.float32), dims).reshape(out_shape)
            return r * mult if mult != 1.0 else r

        return run_op(name, [x], out_shape, x._dtype, layout, math, memory_config=memory_config)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = (f"ttnn.{name} over ``dim`` (int, list, or None = all), fp32 math, times ``scalar``, "
                  f"rounded to the input dtype.")
    return op


def _amax(v: torch.Tensor, dims: list[int]) -> torch.Tensor:
    return torch.amax(v, dim=dims) if dims else v


sum = _reduce("sum", lambda v, dims: torch.sum(v, dim=dims) if dims else v)  # noqa: A001 - ttnn's name
mean = _reduce("mean", lambda v, dims: torch.mean(v, dim=dims) if dims else v)
_max = _reduce("max", _amax)


def max(  # noqa: A001 - ttnn's name
    input_tensor: Tensor,
    dim=None,
    keepdim: bool = False,
    *,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
    scalar: float = 1.0,
    correction=None,
    sub_core_grids=None,
    fast_and_approximate_mode: bool = False,
) -> Tensor:
    """ttnn.max over ``dim`` (int, list, or None = all), times ``scalar``, in the input dtype."""
    return _max(input_tensor, dim, keepdim, memory_config=memory_config, scalar=scalar, correction=correction)


def plus_one(input_tensor: Tensor, sub_core_grids=None, skip_negative_entries: bool = False) -> Tensor:
    """Add 1 IN PLACE to an INT32/UINT32 ROW_MAJOR tensor (rank 1..4); returns ``input_tensor``.

    With ``skip_negative_entries`` only entries in ``[0, INT32_MAX)`` change: negatives (the
    -1 of an inactive decode row) and INT32_MAX (which would overflow) stay as they are.
    """
    op = "plus_one"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if x._dtype not in INTEGER_TYPES:
        raise TTFatal(f"{op}: input_tensor must be INT32 or UINT32, got {_describe(x)}")
    require_layout(op, "input_tensor", x, Layout.ROW_MAJOR)
    if not 1 <= len(x._shape) <= 4:
        raise TTFatal(f"{op}: input_tensor must have 1 to 4 dims, got {_describe(x)}")
    skip = bool(skip_negative_entries)

    def update(target, _chip):
        n = target.numel()
        if n <= SMALL_PLUS_ONE:  # the int32 storage as Python ints, the same rule, one in-place copy
            if n:
                vals = target.reshape(-1).tolist()
                if skip:
                    vals = [v + 1 if 0 <= v < INT32_MAX else v for v in vals]
                else:  # INT32_MAX + 1 wraps to INT32_MIN
                    vals = [v + 1 if v != INT32_MAX else -(2**31) for v in vals]
                target.copy_(torch.frombuffer(array("i", vals), dtype=torch.int32).view(target.shape))
            return
        if skip:  # [0, INT32_MAX) gains 1 and cannot overflow; the rest stays (one in-place add)
            target += (target >= 0) & (target != INT32_MAX)
            return
        v = target.to(torch.int64) + 1
        v = torch.where(v > INT32_MAX, v - 2**32, v)  # INT32_MAX + 1 wraps, as on the card
        target.copy_(v.to(torch.int32))

    run_inplace(op, x, [], update)
    return x


def fast_reduce_nc(input, *, dims=(), output: Tensor | None = None,  # noqa: A002 - ttnn's name
                   memory_config: MemoryConfig = DRAM_MEMORY_CONFIG, compute_kernel_config=None,
                   sub_core_grids=None) -> Tensor:
    """ttnn.experimental.fast_reduce_nc: sum over outer dims (not the two tiled ones), keeping them
    as size 1. As tt-metal's composite: one reduction per dim, the highest first, each an fp32 sum
    rounded to the input's dtype (the last one into ``output`` when given)."""
    op = "fast_reduce_nc"
    x = require_device_tensor(op, "input", input)
    require_layout(op, "input", x, Layout.TILE)
    if x._dtype in INTEGER_TYPES:
        raise TTFatal(f"{op}: input must be BFLOAT16, BFLOAT8_B or FLOAT32, got {_describe(x)}")
    dims = [int(d) for d in dims]
    if not dims:
        raise TTFatal("fast_reduce_nc dims should not be empty")
    rank = len(x._shape)
    for d in dims:
        if not 0 <= d <= rank - 3:
            raise TTFatal(f"FastReduceNC reduces only outer dims: dim must be between 0 and {rank - 3}, but has {d}")
    if len(set(dims)) != len(dims):
        raise TTFatal("dims must be unique")
    t = x
    ordered = sorted(dims)
    for i, d in enumerate(reversed(ordered)):
        shape = list(t._shape)
        shape[d] = 1
        last = i == len(ordered) - 1
        out_t = output if last else None
        if out_t is not None:
            take_output(op, out_t, shape, t._dtype, Layout.TILE, t, False, name="output")
        t = run_op(op, [t], shape, t._dtype, Layout.TILE, lambda v, d=d: v.sum(dim=d, keepdim=True),
                   memory_config=memory_config, output_tensor=out_t)
    return t
