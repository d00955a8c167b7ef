"""Shape and data-movement ops: reshape, permute, transpose, slice, concat, pad,
unsqueeze, squeeze, repeat, clone, copy.

All of them work on LOGICAL values: a TILE tensor's padding never leaks into results, and
outputs are re-padded by the tile rule (the last two dims round up to 32). Unlike ttnn,
where a tile-aligned ``reshape``/``squeeze``/``unsqueeze`` may return a VIEW sharing the
input's buffer, ttsim always returns a fresh copy (a new buffer); code must not rely on
writes through one name being visible through the other.
"""

from __future__ import annotations

import builtins
import enum
import math as _math

import torch
import torch.nn.functional as F

from ..tensor import Tensor, _describe, _storage_of, _unpad
from ..types import BLOCK_FLOATS, DataType, Layout, MemoryConfig, TTFatal, reported_padded_shape
from .base import require_device_tensor, require_same_device, run_inplace, run_op, storage


class TileReshapeMapMode(enum.Enum):
    CACHE = 0
    RECREATE = 1

    def __repr__(self) -> str:
        return f"TileReshapeMapMode.{self.name}"

    __str__ = __repr__


def _dim(op: str, x: Tensor, dim, name: str = "dim", extra: int = 0) -> int:
    rank = len(x._shape) + extra
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        raise TTFatal(f"{op}: {name}={dim!r} is out of range for input_tensor {_describe(x)}")
    return dim % rank


def _ints(op: str, name: str, values) -> list[int]:
    try:
        out = [int(v) for v in values]
    except (TypeError, ValueError):
        raise TTFatal(f"{op}: {name} must be a sequence of ints, got {values!r}") from None
    return out


def _input(op: str, t) -> Tensor:
    """A device tensor (checked live), or a host tensor (ops that ttnn runs on host too)."""
    if isinstance(t, Tensor) and t._device is None:
        t._await_read()
        if t._host is None:
            raise TTFatal(f"{op}: input_tensor {_describe(t)} holds no data")
        return t
    return require_device_tensor(op, "input_tensor", t)


def _host_op(x: Tensor, shape, fn) -> Tensor:
    """Apply ``fn`` to a host tensor's logical values (per shard); same dtype and layout."""
    host = [_storage_of(fn(_unpad(h, x._shape)), x._dtype, x._layout, 0.0) for h in x._host]
    return Tensor._make(tuple(shape), x._dtype, x._layout, host=host)


def _view_op(op: str, x: Tensor, shape, memory_config) -> Tensor:
    if x._device is None:
        return _host_op(x, shape, lambda v: v.reshape(shape))
    return run_op(op, [x], shape, x._dtype, x._layout, lambda v: v.reshape(shape), memory_config=memory_config,
                  moves_values=True)


def reshape(
    input_tensor: Tensor,
    shape,
    padded_shape=None,
    *,
    memory_config: MemoryConfig | None = None,
    pad_value=None,
    reshape_tile_mode: TileReshapeMapMode = TileReshapeMapMode.CACHE,
    sub_core_grids=None,
    skip_padding_fill: bool = False,
) -> Tensor:
    """Same values in row-major order, new logical shape (one ``-1`` is inferred).

    ``reshape(t, logical_shape, padded_shape)`` (ttnn's second overload) is taken when the
    padded shape is the one the logical shape has anyway (its tile padding in TILE, itself
    in ROW_MAJOR); any other padding is refused: ttsim stores only tile padding."""
    op = "reshape"
    x = _input(op, input_tensor)
    dims = _ints(op, "shape", shape)
    if padded_shape is not None:
        padded = _ints(op, "padded_shape", padded_shape)
        natural = list(reported_padded_shape(tuple(dims)) if x._layout == Layout.TILE else dims)
        if padded != natural:
            raise TTFatal(f"{op}: padded_shape {padded} other than {natural} (the {x._layout!r} padding of "
                          f"logical shape {dims}) is not modelled by ttsim")
    vol = x.logical_volume()
    if dims.count(-1) > 1 or any(d < -1 for d in dims):
        raise TTFatal(f"{op}: shape {dims} may hold at most one -1 and no other negative dims")
    if -1 in dims:
        known = _math.prod(d for d in dims if d != -1)
        if known == 0 or vol % known:
            raise TTFatal(f"{op}: cannot infer -1 in shape {dims} for input_tensor {_describe(x)}")
        dims[dims.index(-1)] = vol // known
    if _math.prod(dims) != vol:
        raise TTFatal(f"{op}: shape {dims} has volume {_math.prod(dims)} but input_tensor {_describe(x)} "
                      f"has volume {vol}")
    return _view_op(op, x, dims, memory_config)


def unsqueeze(input_tensor: Tensor, dim: int) -> Tensor:
    """Insert a size-1 dim at ``dim`` (``-1`` appends)."""
    op = "unsqueeze"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    d = _dim(op, x, dim, extra=1)
    shape = list(x._shape)
    shape.insert(d, 1)
    return _view_op(op, x, shape, None)


def unsqueeze_to_4D(tensor: Tensor) -> Tensor:
    """Left-pad the shape with 1s to rank 4 (``Shape.to_rank(4)``), on host or device; a rank-4
    tensor comes back as is. Real 0.81.1 throws for rank > 4 even when the extra dims are 1."""
    op = "unsqueeze_to_4D"
    x = _input(op, tensor)
    rank = len(x._shape)
    if rank > 4:
        raise TTFatal("Tensor rank is greater than 4")  # core.cpp's TT_THROW text, measured on 0.81.1
    if rank == 4:
        return x
    return _view_op(op, x, [1] * (4 - rank) + list(x._shape), None)


def squeeze(input_tensor: Tensor, dim=None) -> Tensor:
    """Drop size-1 dims: all of them (``dim=None``), or those named by ``dim`` (int or list)
    that are 1 (a named dim that is not 1 is kept, as torch does)."""
    op = "squeeze"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    shape = list(x._shape)
    if dim is None:
        drop = {i for i, s in enumerate(shape) if s == 1}
    else:
        dims = [dim] if isinstance(dim, int) else list(dim)
        drop = {i for i in (_dim(op, x, d) for d in dims) if shape[i] == 1}
    return _view_op(op, x, [s for i, s in enumerate(shape) if i not in drop], None)


def permute(input_tensor: Tensor, dims, *, memory_config: MemoryConfig | None = None, pad_value: float = 0.0) -> Tensor:
    """Reorder dims: output dim i is input dim ``dims[i]``."""
    op = "permute"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    order = [_dim(op, x, d, "dims") for d in _ints(op, "dims", dims)]
    if sorted(order) != list(range(len(x._shape))):
        raise TTFatal(f"{op}: dims {list(dims)} is not a permutation of the {len(x._shape)} dims of "
                      f"input_tensor {_describe(x)}")
    shape = [x._shape[d] for d in order]
    return run_op(op, [x], shape, x._dtype, x._layout, lambda v: v.permute(order), memory_config=memory_config)


def transpose(input_tensor: Tensor, dim1: int, dim2: int, *, memory_config: MemoryConfig | None = None,
              pad_value: float = 0.0) -> Tensor:
    """Swap ``dim1`` and ``dim2``."""
    op = "transpose"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    a, b = _dim(op, x, dim1, "dim1"), _dim(op, x, dim2, "dim2")
    shape = list(x._shape)
    shape[a], shape[b] = shape[b], shape[a]
    return run_op(op, [x], shape, x._dtype, x._layout, lambda v: v.transpose(a, b), memory_config=memory_config)


def slice(  # noqa: A001 - ttnn's name
    input_tensor: Tensor,
    slice_start=None,
    slice_end=None,
    slice_step=None,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    pad_value=None,
    sub_core_grids=None,
    starts=None,
    ends=None,
    steps=None,
    slice_dim: int | None = None,
    num_devices: int | None = None,
) -> Tensor:
    """``input_tensor[start0:end0:step0, ...]`` with one start/end(/step) per dim; ends are
    exclusive and clamp to the dim; negative starts/ends count from the end; steps > 0.

    ttnn's overloads in one signature: ``(slice_start, slice_end[, slice_step])`` and
    ``(starts, ends, steps)`` as lists are the same slice; ``starts``/``ends`` as device
    tensors (with ``slice_dim`` / ``num_devices``) are refused by name."""
    op = "slice"
    if starts is not None or ends is not None or steps is not None:
        if slice_start is not None or slice_end is not None or slice_step is not None:
            raise TTFatal(f"{op}: pass slice_start/slice_end/slice_step or starts/ends/steps, not both")
        slice_start, slice_end, slice_step = starts, ends, steps
    if isinstance(slice_start, Tensor) or isinstance(slice_end, Tensor) or slice_dim is not None \
            or num_devices is not None:
        raise TTFatal(f"{op}: starts/ends as device tensors (slice_dim={slice_dim!r}, num_devices={num_devices!r}) "
                      f"are not modelled by ttsim; pass lists")
    if slice_start is None or slice_end is None:
        raise TTFatal(f"{op}: slice_start and slice_end (or starts and ends) are required")
    x = _input(op, input_tensor)
    rank = len(x._shape)
    starts = _ints(op, "slice_start", slice_start)
    ends = _ints(op, "slice_end", slice_end)
    steps = [1] * rank if slice_step is None else _ints(op, "slice_step", slice_step)
    for name, vals in (("slice_start", starts), ("slice_end", ends), ("slice_step", steps)):
        if len(vals) != rank:
            raise TTFatal(f"{op}: {name} has {len(vals)} entries but input_tensor {_describe(x)} has rank {rank}")
    if any(s <= 0 for s in steps):
        raise TTFatal(f"{op}: slice_step entries must be > 0, got {steps}")
    index, shape = [], []
    for s, e, st, size in zip(starts, ends, steps, x._shape):
        picked = range(size)[builtins.slice(s, e, st)]  # Python's bounds: negatives count from the end, clamp
        index.append(builtins.slice(picked.start, picked.stop, st))
        shape.append(len(picked))
    if output_tensor is not None:
        raise TTFatal(f"{op}: output_tensor= is not modelled by ttsim; use the returned tensor")
    idx = tuple(index)
    if x._device is None:
        return _host_op(x, shape, lambda v: v[idx])
    return run_op(op, [x], shape, x._dtype, x._layout, lambda v: v[idx], memory_config=memory_config)


def concat(
    tensors,
    dim: int = 0,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    groups: int = 1,
    sub_core_grids=None,
) -> Tensor:
    """Concatenate along ``dim``; all tensors share dtype, layout, device and the other dims."""
    op = "concat"
    if not isinstance(tensors, (list, tuple)) or not tensors:
        raise TTFatal(f"{op}: tensors must be a non-empty list of ttnn.Tensor, got {tensors!r}")
    ts = {f"tensors[{i}]": require_device_tensor(op, f"tensors[{i}]", t) for i, t in enumerate(tensors)}
    require_same_device(op, ts)
    first = ts["tensors[0]"]
    d = _dim(op, first, dim)
    for name, t in ts.items():
        if (t._dtype, t._layout) != (first._dtype, first._layout):
            raise TTFatal(f"{op}: {name} is {_describe(t)} but tensors[0] is {_describe(first)}: "
                          f"dtype and layout must match")
        if len(t._shape) != len(first._shape) or any(
            a != b for i, (a, b) in enumerate(zip(t._shape, first._shape)) if i != d
        ):
            raise TTFatal(f"{op}: {name} {list(t._shape)} differs from tensors[0] {list(first._shape)} "
                          f"outside dim {d}")
    if groups != 1:
        raise TTFatal(f"{op}: groups={groups} is not modelled by ttsim (only groups=1)")
    if output_tensor is not None:
        raise TTFatal(f"{op}: output_tensor= is not modelled by ttsim; use the returned tensor")
    shape = list(first._shape)
    shape[d] = builtins.sum(t._shape[d] for t in ts.values())
    return run_op(op, list(ts.values()), shape, first._dtype, first._layout,
                  lambda *vs: torch.cat(vs, dim=d), memory_config=memory_config)


def pad(
    input_tensor: Tensor,
    padding,
    value,
    *args,
    use_multicore: bool = True,
    memory_config: MemoryConfig | None = None,
    sub_core_grids=None,
) -> Tensor:
    """Pad with ``value``: ``padding`` is one ``(before, after)`` pair per dim (outermost
    first; fewer pairs than dims pad the trailing dims). 0.81.1's other overload,
    ``pad(input_tensor, output_padded_shape, input_tensor_start, value)`` (attention/tp.py's
    ``ttnn.pad(k, [1, B, 32, HD], [0, 0, 0, 0], 0.0)``), binds positionally: the input lands at
    ``input_tensor_start`` of a tensor of shape ``output_padded_shape``."""
    op = "pad"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if args:
        if len(args) != 1:
            raise TypeError(f"pad() takes at most 4 positional arguments ({3 + len(args)} given)")
        out_shape, start, value = _ints(op, "output_padded_shape", padding), _ints(op, "input_tensor_start", value), \
            args[0]
        if len(out_shape) != len(x._shape) or len(start) != len(x._shape):
            raise TTFatal(f"{op}: output_padded_shape {out_shape} and input_tensor_start {start} need one entry per "
                          f"dim of input_tensor {_describe(x)}")
        padding = [(b, o - d - b) for b, o, d in zip(start, out_shape, x._shape)]
    try:
        pairs = [(int(a), int(b)) for a, b in padding]
    except (TypeError, ValueError):
        raise TTFatal(f"{op}: padding must be a sequence of (before, after) int pairs, got {padding!r}") from None
    rank = len(x._shape)
    if len(pairs) > rank or any(a < 0 or b < 0 for a, b in pairs):
        raise TTFatal(f"{op}: padding {pairs} must hold at most {rank} non-negative (before, after) pairs "
                      f"for input_tensor {_describe(x)}")
    pairs = [(0, 0)] * (rank - len(pairs)) + pairs
    shape = [s + a + b for s, (a, b) in zip(x._shape, pairs)]
    flat = []
    for a, b in reversed(pairs):
        flat += [a, b]
    fill = float(value)

    def math(v):
        if v.is_floating_point():
            return F.pad(v, flat, value=fill)
        return F.pad(v.to(torch.int64), flat, value=int(fill))

    return run_op(op, [x], shape, x._dtype, x._layout, math, memory_config=memory_config)


def repeat(input_tensor: Tensor, repeat_dims, *, memory_config: MemoryConfig | None = None,
           optional_output_tensor: Tensor | None = None) -> Tensor:
    """Tile the tensor ``repeat_dims[i]`` times along dim i (torch ``Tensor.repeat``)."""
    op = "repeat"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    reps = _ints(op, "repeat_dims", repeat_dims)
    if len(reps) != len(x._shape) or any(r < 1 for r in reps):
        raise TTFatal(f"{op}: repeat_dims {reps} must hold one positive count per dim of input_tensor "
                      f"{_describe(x)}")
    if optional_output_tensor is not None:
        raise TTFatal(f"{op}: optional_output_tensor= is not modelled by ttsim; use the returned tensor")
    shape = [s * r for s, r in zip(x._shape, reps)]
    return run_op(op, [x], shape, x._dtype, x._layout, lambda v: v.repeat(*reps), memory_config=memory_config)


def clone(input, *, dtype: DataType | None = None, memory_config: MemoryConfig | None = None,  # noqa: A002
          compute_kernel_config=None) -> Tensor:
    """A copy in a new buffer (optionally converted to ``dtype``)."""
    op = "clone"
    x = require_device_tensor(op, "input", input)
    out_dtype = x._dtype if dtype is None else dtype
    if out_dtype in BLOCK_FLOATS and x._layout != Layout.TILE:
        raise TTFatal(f"{op}: dtype {out_dtype!r} needs a TILE_LAYOUT input, got {_describe(x)}")
    return run_op(op, [x], x._shape, out_dtype, x._layout, lambda v: v, memory_config=memory_config)


def copy(input_a: Tensor, input_b: Tensor) -> Tensor:
    """Copy ``input_a``'s values INTO ``input_b`` (same shape and layout; converted to
    ``input_b``'s dtype). ``input_b`` keeps its buffer; it is returned."""
    op = "copy"
    a = require_device_tensor(op, "input_a", input_a)
    b = require_device_tensor(op, "input_b", input_b)
    require_same_device(op, {"input_a": a, "input_b": b})
    if tuple(a._shape) != tuple(b._shape) or a._layout != b._layout:
        raise TTFatal(f"{op}: input_a {_describe(a)} and input_b {_describe(b)} must share shape and layout")

    def update(target, v, _chip):
        target.copy_(storage(v, b._dtype, b._layout).reshape(target.shape))

    run_inplace(op, b, [a], update)
    return b
