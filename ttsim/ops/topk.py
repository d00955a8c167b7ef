"""ttnn.topk: the k largest (or smallest) values along a dim and where they are.

Semantics of ttnn 0.81.1, from its docstring and validation texts (read from the package):
- the input is a device tensor in TILE layout, BFLOAT16, BFLOAT8_B or FLOAT32; any dim (the
  card transposes it to the last one and back);
- values keep the input's dtype, indices are UINT16, or UINT32 when 32 bits are needed (a
  FLOAT32 input, or a tile-padded reduced dim above 65536); both TILE, shape = input with
  ``dim`` cut to k;
- ``stable=True``: equal values come lowest index first and -0.0 is returned as +0.0.
  ``stable=False``: the sorting network may return any index among equal values. ttsim picks
  the HIGHEST index among equal values there, deterministically, so code that leans on
  torch's lowest-index habit without asking for ``stable=True`` fails here as it may on a card;
- ``sorted=False`` only promises the set: ttsim returns it in index order, not by value;
- ``indices_tensor`` supplies the label returned for each position (UINT16 or UINT32 here).
Refused by name: a k above the dim's logical size (the card would then return its -inf/+inf
padding), a preallocated ``output_tensor``, INT32 labels (their output dtype is unmeasured)
and sharded output configs.
"""

from __future__ import annotations

import torch

from ..device import WORKER_GRID, current_cq_id
from ..grid import CoreRange, CoreRangeSet
from ..tensor import Tensor, _describe
from ..types import CoreCoord, DataType, Layout, MemoryConfig, TTFatal
from .base import _allocate_output, chip_logical, require_device_tensor, require_same_device, storage

_VALUE_TYPES = (DataType.BFLOAT16, DataType.BFLOAT8_B, DataType.FLOAT32)
_LABEL_TYPES = (DataType.UINT16, DataType.UINT32)
_UINT16_LIMIT = 65536  # the doc: 32-bit indices once the tile-padded reduced dim is above this
_DEVICE_GRID = CoreRange(CoreCoord(0, 0), CoreCoord(WORKER_GRID.x - 1, WORKER_GRID.y - 1))


def _pick(v: torch.Tensor, k: int, dim: int, largest: bool, sorted_: bool, stable: bool):
    """(values, positions) of the k picked elements of ``v`` along ``dim``."""
    if stable:
        order = torch.sort(v, dim=dim, descending=largest, stable=True).indices
    else:
        # a stable sort of the reversed row ranks equal values by descending original index
        order = v.shape[dim] - 1 - torch.sort(v.flip(dim), dim=dim, descending=largest, stable=True).indices
    positions = order.narrow(dim, 0, k)
    if not sorted_:
        positions = torch.sort(positions, dim=dim).values
    values = torch.gather(v, dim, positions)
    if stable:
        values = values + 0.0  # the stable engines canonicalise -0.0 to +0.0
    return values, positions


def _index_dtype(op: str, x: Tensor, dim: int, labels: Tensor | None) -> DataType:
    padded = -(-x._shape[dim] // 32) * 32
    wide = x._dtype == DataType.FLOAT32 or padded > _UINT16_LIMIT
    if labels is None:
        return DataType.UINT32 if wide else DataType.UINT16
    if labels._dtype == DataType.UINT16 and wide:
        raise TTFatal(f"{op}: a UINT16 indices_tensor cannot label a result that needs 32-bit indices "
                      f"(input_tensor {_describe(x)})")
    return labels._dtype


def _check_labels(op: str, x: Tensor, labels) -> Tensor:
    t = require_device_tensor(op, "indices_tensor", labels)
    require_same_device(op, {"input_tensor": x, "indices_tensor": t})
    if tuple(t._shape) != tuple(x._shape):
        raise TTFatal(f"{op}: indices_tensor {_describe(t)} must have input_tensor's shape {list(x._shape)}")
    if t._layout != Layout.TILE:
        raise TTFatal(f"{op}: indices_tensor must be in TILE layout, got {_describe(t)}")
    if t._dtype == DataType.INT32:
        raise TTFatal(f"{op}: an INT32 indices_tensor is not modelled by ttsim (its output index dtype is unmeasured)")
    if t._dtype not in _LABEL_TYPES:
        raise TTFatal(f"{op}: indices_tensor must be UINT16, UINT32 or INT32, got {_describe(t)}")
    return t


def _check_grid(op: str, sub_core_grids) -> None:
    """Which cores run the op changes no value; a grid that is not the device's is still refused."""
    if sub_core_grids is None:
        return
    if not isinstance(sub_core_grids, CoreRangeSet) or sub_core_grids.empty():
        raise TTFatal(f"{op}: sub_core_grids must be a non-empty ttnn.CoreRangeSet, got {sub_core_grids!r}")
    if not _DEVICE_GRID.contains(sub_core_grids.bounding_box()):
        raise TTFatal(f"{op}: sub_core_grids {sub_core_grids!r} is not contained in the device grid {_DEVICE_GRID!r}")


def topk(input_tensor: Tensor, k: int = 32, dim: int = -1, largest: bool = True, sorted: bool = True, *,  # noqa: A002
         memory_config: MemoryConfig | None = None, sub_core_grids=None, indices_tensor: Tensor | None = None,
         output_tensor=None, stable: bool = False) -> list[Tensor]:
    """``[values, indices]`` of the k largest (``largest=False``: smallest) elements along ``dim``."""
    op = "topk"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if x._layout != Layout.TILE:
        raise TTFatal("The input must be in tiled format")
    if x._dtype not in _VALUE_TYPES:
        raise TTFatal(f"Input tensor must be BFLOAT16, BFLOAT8_B, or FLOAT32, got: {x._dtype!r}")
    rank = len(x._shape)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        raise TTFatal(f"{op}: dim={dim!r} is out of range for input_tensor {_describe(x)}")
    d = dim % rank
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise TTFatal(f"{op}: k must be a non-negative int, got {k!r}")
    if k == 0:
        raise TTFatal("K must be non-zero")
    if k > x._shape[d]:
        raise TTFatal(f"{op}: k={k} is above the size {x._shape[d]} of dim {dim}: the card would return its "
                      f"padding there; not modelled by ttsim")
    if output_tensor is not None:
        raise TTFatal(f"{op}: a preallocated output_tensor is not modelled by ttsim")
    if memory_config is not None and memory_config.is_sharded():
        raise TTFatal(f"{op}: sharded output memory configs are not supported, got {memory_config!r}")
    _check_grid(op, sub_core_grids)
    labels = None
    if indices_tensor is not None:
        if stable:
            raise TTFatal(f"{op}: indices_tensor cannot be combined with stable=True (tie-breaking against "
                          f"caller-supplied labels is not defined)")
        labels = _check_labels(op, x, indices_tensor)
    index_dtype = _index_dtype(op, x, d, labels)

    out_shape = list(x._shape)
    out_shape[d] = k
    cq_id = current_cq_id(None)
    values = _allocate_output(op, x, out_shape, x._dtype, Layout.TILE, memory_config, cq_id)
    indices = _allocate_output(op, x, out_shape, index_dtype, Layout.TILE, memory_config, cq_id)
    inputs = [x] if labels is None else [x, labels]
    in_bufs = [t._buffers for t in inputs]

    def execute():  # one program writes both outputs, as the card's
        for i, (vb, ib) in enumerate(zip(values._buffers, indices._buffers)):
            v = chip_logical(in_bufs[0][i], x)
            picked, positions = _pick(v, k, d, largest, sorted, stable)
            if labels is not None:
                positions = torch.gather(chip_logical(in_bufs[1][i], labels).to(torch.int64), d, positions)
            vb.data = storage(picked, x._dtype, Layout.TILE)
            ib.data = storage(positions.to(torch.int32), index_dtype, Layout.TILE)

    device = x._device
    device.program_cache.dispatch(op, inputs, [values, indices], (k, d, bool(largest), bool(sorted), bool(stable)))
    device.enqueue(cq_id, op, execute, writes=values._buffers + indices._buffers)
    return [values, indices]
