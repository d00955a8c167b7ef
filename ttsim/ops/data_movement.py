"""to_layout and typecast."""

from __future__ import annotations

from ..tensor import Tensor, check_layout_change, host_block_float_to_row_major, host_to_layout
from ..types import BLOCK_FLOATS, DataType, Layout, MemoryConfig, TTFatal
from .base import require_device_tensor, run_op, take_output


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
    return run_op("to_layout", [tensor], tensor._shape, dtype, layout, lambda x: x,
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
                  memory_config=memory_config, output_tensor=output_tensor, moves_values=True)
