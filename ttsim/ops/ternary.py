"""Ternary elementwise ops: mac (``a * b + c``) and addcmul (``a + value * b * c``).

Both are one fused SFPU pass on a card: the product and the sum are formed in fp32 and the
result is rounded to the output dtype ONCE (ttnn 0.81.1's golden for mac says so: "SFPMAD
accumulates in fp32 and rounds once on store"). ttsim forms them in float64 and rounds to
float32 first, which is the fp32 fused multiply-add, then to the output dtype. Operands
broadcast as torch does; a number may stand for any operand but the first (mac's other
overloads: ``mac(a, b, value)``, ``mac(a, value, c)``, ``mac(a, value1, value2)``).
"""

from __future__ import annotations

import torch

from ..tensor import Tensor, _describe
from ..types import INTEGER_TYPES, MemoryConfig, TTFatal
from .base import broadcast_shapes, require_device_tensor, require_same_device, run_op, take_output


def _operands(op: str, names: tuple[str, ...], values) -> tuple[Tensor, dict[str, Tensor], list]:
    """The first operand (a tensor), the tensor operands by name, and every operand in order
    (tensors, or floats for numbers)."""
    first = require_device_tensor(op, names[0], values[0])
    if first._dtype in INTEGER_TYPES:
        raise TTFatal(f"{op}: {names[0]} must be BFLOAT16, BFLOAT8_B or FLOAT32, got {_describe(first)}")
    tensors = {names[0]: first}
    ordered: list = [first]
    for name, v in zip(names[1:], values[1:]):
        if isinstance(v, Tensor):
            tensors[name] = require_device_tensor(op, name, v)
            if v._layout != first._layout:
                raise TTFatal(f"{op}: operands must share a layout: {_describe(first)} vs {_describe(v)}")
            ordered.append(v)
        elif isinstance(v, (int, float)) and not isinstance(v, bool):
            ordered.append(float(v))
        else:
            raise TTFatal(f"{op}: {name} must be a ttnn.Tensor or a number, got {type(v).__name__}")
    require_same_device(op, tensors)
    return first, tensors, ordered


def _fused(op, names, values, combine, memory_config, output_tensor) -> Tensor:
    first, tensors, ordered = _operands(op, names, values)
    shape = broadcast_shapes(*(t._shape for t in tensors.values()))
    if shape is None:
        raise TTFatal(f"{op}: shapes do not broadcast: {[_describe(t) for t in tensors.values()]}")
    dtype = first._dtype
    if output_tensor is not None:
        dtype = take_output(op, output_tensor, shape, dtype, first._layout, first, dtype_given=False)
    slots = [i for i, v in enumerate(ordered) if isinstance(v, Tensor)]

    def math(*xs):
        vals = list(ordered)
        for i, x in zip(slots, xs):
            vals[i] = x.to(torch.float64)
        return combine(*vals).to(torch.float32)  # the fp32 fused result, rounded to the output by storage

    return run_op(op, list(tensors.values()), shape, dtype, first._layout, math, memory_config=memory_config,
                  output_tensor=output_tensor)


def mac(input_tensor_a: Tensor, input_tensor_b, input_tensor_c, *, memory_config: MemoryConfig | None = None,
        output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
    """ttnn.mac: ``a * b + c``, rounded once (b and c may be numbers: ttnn's other overloads)."""
    return _fused("mac", ("input_tensor_a", "input_tensor_b", "input_tensor_c"),
                  (input_tensor_a, input_tensor_b, input_tensor_c), lambda a, b, c: a * b + c,
                  memory_config, output_tensor)


def addcmul(input_a: Tensor, input_b: Tensor, input_c: Tensor, *, value=1.0,
            memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None) -> Tensor:
    """ttnn.addcmul: ``input_a + value * input_b * input_c`` (torch.addcmul), rounded once."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise TTFatal(f"addcmul: value must be a number, got {value!r}")
    for name, t in (("input_b", input_b), ("input_c", input_c)):
        if not isinstance(t, Tensor):
            raise TTFatal(f"addcmul: {name} must be a ttnn.Tensor, got {type(t).__name__}")
    v = float(value)
    return _fused("addcmul", ("input_a", "input_b", "input_c"), (input_a, input_b, input_c),
                  lambda a, b, c: a + v * (b * c), memory_config, output_tensor)
