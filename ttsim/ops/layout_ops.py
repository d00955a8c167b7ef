"""Tensor layout, dtype and placement ops: to_layout, typecast, tilize / untilize (and their
padding forms), to_memory_config, the sharding conversions, experimental.view,
is_tensor_storage_on_device; ttnn.Tile."""

from __future__ import annotations

import math as _math

from ..tensor import Tensor, _describe, check_layout_change, host_block_float_to_row_major, host_to_layout
from ..types import BLOCK_FLOATS, DRAM_MEMORY_CONFIG, TILE_SIZE, DataType, Layout, MemoryConfig, Shape, TTFatal
from .base import require_device_tensor, require_layout, run_op, take_output


def to_layout(
    tensor: Tensor,
    layout: Layout,
    dtype: DataType | None = None,
    memory_config: MemoryConfig | None = None,
    sub_core_grids=None,
    pad_value: float = 0.0,
) -> Tensor:
    """Convert between ROW_MAJOR_LAYOUT and TILE_LAYOUT (padding to 32x32 tiles), on host or device.

    ``pad_value`` fills the tile padding of host tensors; device tile padding is always 0 in ttsim.
    """
    if not isinstance(tensor, Tensor):
        raise TTFatal(f"to_layout: expected a ttnn.Tensor, got {type(tensor).__name__}")
    if (tensor._device is None and tensor._dtype in BLOCK_FLOATS and layout == Layout.ROW_MAJOR
            and dtype in (None, tensor._dtype)):
        return host_block_float_to_row_major(tensor)
    dtype = check_layout_change(tensor, layout, dtype)
    if layout == tensor._layout and dtype == tensor._dtype:
        return tensor
    if tensor._device is None:
        return host_to_layout(tensor, layout, dtype, pad_value)
    require_device_tensor("to_layout", "tensor", tensor)
    return run_op("to_layout", [tensor], tensor._shape, dtype, layout, lambda x: x, tile=tensor._tile,
                  memory_config=memory_config, moves_values=True)


def typecast(
    input_tensor: Tensor,
    dtype: DataType,
    *,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    sub_core_grids=None,
) -> Tensor:
    """Convert a device tensor's dtype (float <-> int truncates toward zero)."""
    require_device_tensor("typecast", "input_tensor", input_tensor)
    if not isinstance(dtype, DataType) or dtype == DataType.INVALID:
        raise TTFatal(f"typecast: dtype must be a ttnn DataType, got {dtype!r}")
    if dtype in BLOCK_FLOATS and input_tensor._layout != Layout.TILE:
        raise TTFatal(f"typecast: {dtype!r} requires a TILE_LAYOUT input, got {input_tensor._layout!r}")
    if output_tensor is not None:
        dtype = take_output("typecast", output_tensor, input_tensor._shape, dtype, input_tensor._layout, input_tensor,
                            dtype_given=True)
    return run_op("typecast", [input_tensor], input_tensor._shape, dtype, input_tensor._layout, lambda x: x,
                  tile=input_tensor._tile,
                  memory_config=memory_config, output_tensor=output_tensor, moves_values=True)



from .. import tiles as _tiles  # noqa: E402
from ..tiles import STANDARD as _STANDARD_TILE, Tile  # noqa: E402 - ttnn.Tile lives in ttsim/tiles.py


def _standard_tile(op: str, tile) -> None:
    if tile is not None and not _tiles.is_standard(tile):
        raise TTFatal(f"{op}: tile={tile!r} is not modelled by ttsim (only 32x32 tiles)")


def _out_dtype(op: str, x: Tensor, dtype) -> DataType:
    out = x._dtype if dtype is None else dtype
    if not isinstance(out, DataType):
        raise TTFatal(f"{op}: dtype must be a ttnn DataType, got {dtype!r}")
    return out


def tilize(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None, dtype: DataType | None = None,
           use_multicore: bool = True, use_low_perf: bool = False, tile: Tile = _STANDARD_TILE,
           sub_core_grids=None) -> Tensor:
    """ROW_MAJOR -> TILE on the device; the last two dims must already be tile multiples
    (use tilize_with_zero_padding / tilize_with_val_padding otherwise)."""
    op = "tilize"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.ROW_MAJOR)
    _standard_tile(op, tile)
    shape = list(x._shape)
    if len(shape) < 2 or shape[-1] % TILE_SIZE or shape[-2] % TILE_SIZE:
        raise TTFatal(f"{op}: input_tensor's last two dims must be multiples of {TILE_SIZE}, got {_describe(x)}; "
                      f"use tilize_with_zero_padding")
    return run_op(op, [x], shape, _out_dtype(op, x, dtype), Layout.TILE, lambda v: v, memory_config=memory_config)


def tilize_with_zero_padding(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None,
                             output_dtype: DataType | None = None, use_multicore: bool = True,
                             sub_core_grids=None) -> Tensor:
    """ROW_MAJOR -> TILE, the tile padding of the last two dims filled with 0 (logical shape kept)."""
    op = "tilize_with_zero_padding"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.ROW_MAJOR)
    return run_op(op, [x], x._shape, _out_dtype(op, x, output_dtype), Layout.TILE, lambda v: v,
                  memory_config=memory_config)


def tilize_with_val_padding(input_tensor: Tensor, output_tensor_shape, pad_value, *,
                            memory_config: MemoryConfig | None = None, dtype: DataType | None = None,
                            use_multicore: bool = True, sub_core_grids=None) -> Tensor:
    """ROW_MAJOR -> TILE with ``output_tensor_shape`` as the padded shape, as tt-metal's op: the
    logical shape stays the input's; only the storage grows (its padding holds ``pad_value``).

    ttsim stores every TILE tensor in its own tile padding, so padding beyond the input's last
    tile is reported by ``padded_shape`` but not stored (no op of ttsim reads padding)."""
    op = "tilize_with_val_padding"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.ROW_MAJOR)
    want = [int(d) for d in output_tensor_shape]
    have = list(x._shape)
    if len(want) != len(have) or any(w < h for w, h in zip(want, have)):
        raise TTFatal(f"{op}: output_tensor_shape {want} must have input_tensor's rank and be >= its shape {have}")
    if len(want) < 2 or want[-1] % TILE_SIZE or want[-2] % TILE_SIZE:
        raise TTFatal(f"{op}: output_tensor_shape {want} must have tile-multiple last two dims")
    float(pad_value)  # validated as tt-metal's float/int pad value; it fills padding only
    out = run_op(op, [x], have, _out_dtype(op, x, dtype), Layout.TILE, lambda v: v, memory_config=memory_config)
    out._padded_report = Shape(want)
    return out


def untilize(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None, use_multicore: bool = True,
             sub_core_grids=None) -> Tensor:
    """TILE -> ROW_MAJOR on the device (bfloat8_b/bfloat4_b come out as bfloat16)."""
    op = "untilize"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.TILE)
    dtype = DataType.BFLOAT16 if x._dtype in BLOCK_FLOATS else x._dtype
    return run_op(op, [x], x._shape, dtype, Layout.ROW_MAJOR, lambda v: v, memory_config=memory_config)


def untilize_with_unpadding(input_tensor: Tensor, output_tensor_end, *, memory_config: MemoryConfig | None = None,
                            use_multicore: bool = True, sub_core_grids=None) -> Tensor:
    """TILE -> ROW_MAJOR keeping indices ``0..output_tensor_end[i]`` (inclusive) of each dim."""
    op = "untilize_with_unpadding"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.TILE)
    end = [int(e) for e in output_tensor_end]
    if len(end) != len(x._shape) or any(not 0 <= e < s for e, s in zip(end, x._shape)):
        raise TTFatal(f"{op}: output_tensor_end {end} must hold one index per dim inside input_tensor {_describe(x)}")
    shape = [e + 1 for e in end]
    dtype = DataType.BFLOAT16 if x._dtype in BLOCK_FLOATS else x._dtype
    return run_op(op, [x], shape, dtype, Layout.ROW_MAJOR, lambda v: v[tuple(slice(0, n) for n in shape)],
                  memory_config=memory_config)


def to_memory_config(tensor: Tensor, memory_config: MemoryConfig, dtype: DataType | None = None,
                     output_tensor: Tensor | None = None) -> Tensor:
    """Move a device tensor to ``memory_config`` (DRAM/L1, interleaved/sharded), optionally
    converting its dtype; the same tensor back if nothing changes."""
    op = "to_memory_config"
    x = require_device_tensor(op, "tensor", tensor)
    if not isinstance(memory_config, MemoryConfig):
        raise TTFatal(f"{op}: memory_config must be a ttnn.MemoryConfig, got {memory_config!r}")
    out_dtype = _out_dtype(op, x, dtype)
    if out_dtype in BLOCK_FLOATS and x._layout != Layout.TILE:
        raise TTFatal(f"{op}: {out_dtype!r} requires a TILE_LAYOUT tensor, got {_describe(x)}")
    if output_tensor is not None:
        out_dtype = take_output(op, output_tensor, x._shape, out_dtype, x._layout, x, dtype is not None)
    elif memory_config == x._memory_config and out_dtype == x._dtype:
        return x
    return run_op(op, [x], x._shape, out_dtype, x._layout, lambda v: v, memory_config=memory_config, tile=x._tile,
                  output_tensor=output_tensor)


def _resharded(op: str, x: Tensor, memory_config: MemoryConfig, output_dtype, output_tensor: Tensor | None) -> Tensor:
    """The copy both sharding ops make: the same values in ``memory_config``'s placement, as
    ``output_dtype`` if given (written into ``output_tensor`` if given)."""
    out_dtype = _out_dtype(op, x, output_dtype)
    if out_dtype in BLOCK_FLOATS and x._layout != Layout.TILE:
        raise TTFatal(f"{op}: {out_dtype!r} requires a TILE_LAYOUT tensor, got {_describe(x)}")
    if output_tensor is not None:
        out_dtype = take_output(op, output_tensor, x._shape, out_dtype, x._layout, x, output_dtype is not None,
                                name="preallocated_output")
    return run_op(op, [x], x._shape, out_dtype, x._layout, lambda v: v, memory_config=memory_config, tile=x._tile,
                  output_tensor=output_tensor, moves_values=True)


def interleaved_to_sharded(input_tensor: Tensor, sharded_memory_config: MemoryConfig,
                           output_dtype: DataType | None = None, *, keep_l1_aligned: bool = False,
                           preallocated_output: Tensor | None = None) -> Tensor:
    """Copy an interleaved device tensor into the shards of ``sharded_memory_config`` (values kept;
    placement only in ttsim). 0.81.1's ``(input_tensor, grid, shard_shape, shard_scheme,
    shard_orientation)`` overload is not mirrored: build the config with ttnn.ShardSpec."""
    op = "interleaved_to_sharded"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if not isinstance(sharded_memory_config, MemoryConfig):
        raise TTFatal(f"{op}: sharded_memory_config must be a ttnn.MemoryConfig, got {sharded_memory_config!r}")
    if x._memory_config is not None and x._memory_config.is_sharded():
        raise TTFatal(f"{op}: Input tensor must be Interleaved, got {x._memory_config.memory_layout!r}")
    if not sharded_memory_config.is_sharded():
        raise TTFatal(f"{op}: Output memory config must be sharded, got {sharded_memory_config.memory_layout!r}")
    if sharded_memory_config.shard_spec is None:
        raise TTFatal(f"{op}: Sharded memory config must have a shard spec (build it with ttnn.ShardSpec)")
    return _resharded(op, x, sharded_memory_config, output_dtype, preallocated_output)


def sharded_to_interleaved(input_tensor: Tensor, memory_config: MemoryConfig | None = None,
                           output_dtype: DataType | None = None) -> Tensor:
    """Copy a sharded device tensor into an interleaved one (DRAM unless ``memory_config`` says
    otherwise; values kept)."""
    op = "sharded_to_interleaved"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if x._memory_config is None or not x._memory_config.is_sharded():
        raise TTFatal(f"{op}: Input tensor must be sharded, got {_describe(x)} in {x._memory_config!r}")
    if memory_config is None:
        memory_config = DRAM_MEMORY_CONFIG
    if not isinstance(memory_config, MemoryConfig):
        raise TTFatal(f"{op}: memory_config must be a ttnn.MemoryConfig, got {memory_config!r}")
    if memory_config.is_sharded():
        raise TTFatal(f"{op}: Output memory config must be Interleaved, got {memory_config.memory_layout!r}")
    return _resharded(op, x, memory_config, output_dtype, None)


def is_tensor_storage_on_device(tensor: Tensor) -> bool:
    if not isinstance(tensor, Tensor):
        raise TTFatal(f"is_tensor_storage_on_device: expected a ttnn.Tensor, got {type(tensor).__name__}")
    return tensor._device is not None


def view(input_tensor: Tensor, shape) -> Tensor:
    """experimental.view: a reshape that must not move data. ttnn allows it when the last dim is
    unchanged (ROW_MAJOR), or the last two dims are unchanged or tile-aligned (TILE); ttsim
    returns a reshaped copy with those checks. (The ``view(t, N, C, H, W)`` overload is not mirrored.)"""
    op = "view"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    dims = [int(d) for d in shape]
    if _math.prod(dims) != x.logical_volume() or any(d < 0 for d in dims):
        raise TTFatal(f"{op}: shape {dims} does not hold the {x.logical_volume()} elements of {_describe(x)}")
    old = list(x._shape)
    if x._layout == Layout.ROW_MAJOR:
        ok = dims[-1:] == old[-1:]
    else:
        ok = dims[-2:] == old[-2:] or (dims[-1] == old[-1] and dims[-1] % TILE_SIZE == 0
                                        and dims[-2] % TILE_SIZE == 0 and old[-2] % TILE_SIZE == 0)
    if not ok:
        raise TTFatal(f"{op}: {list(old)} -> {dims} would move data in {x._layout!r}; use ttnn.reshape")
    return run_op(op, [x], dims, x._dtype, x._layout, lambda v: v.reshape(dims))


__all__ = ["to_layout", "typecast", "Tile", "tilize", "tilize_with_zero_padding", "tilize_with_val_padding",
           "untilize", "untilize_with_unpadding", "to_memory_config", "interleaved_to_sharded",
           "sharded_to_interleaved", "is_tensor_storage_on_device", "view"]
