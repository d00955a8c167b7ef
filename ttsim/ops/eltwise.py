"""Elementwise ops: binary with broadcasting (tensor or scalar operand) and unary."""

from __future__ import annotations

from typing import Callable

import torch

from ..tensor import Tensor, _describe
from ..types import DataType, MemoryConfig, TTFatal
from .base import require_device_tensor, require_same_device, run_op


def _broadcast_shape(op: str, a: Tensor, b: Tensor) -> tuple[int, ...]:
    try:
        return tuple(torch.broadcast_shapes(tuple(a._shape), tuple(b._shape)))
    except RuntimeError:
        raise TTFatal(f"{op}: shapes do not broadcast: {_describe(a)} and {_describe(b)}") from None


def _binary(name: str, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]):
    def op(
        input_tensor_a: Tensor,
        input_tensor_b,
        *,
        memory_config: MemoryConfig | None = None,
        dtype: DataType | None = None,
        output_tensor: Tensor | None = None,
        activations=None,
        input_tensor_a_activations=None,
        input_tensor_b_activations=None,
        use_legacy=None,
        sub_core_grids=None,
    ) -> Tensor:
        a = require_device_tensor(name, "input_tensor_a", input_tensor_a)
        out_dtype = a._dtype if dtype is None else dtype
        if isinstance(input_tensor_b, (int, float)):
            scalar = float(input_tensor_b)
            return run_op(name, [a], a._shape, out_dtype, a._layout, lambda x: fn(x, scalar),
                          memory_config=memory_config)
        b = require_device_tensor(name, "input_tensor_b", input_tensor_b)
        require_same_device(name, {"input_tensor_a": a, "input_tensor_b": b})
        if a._layout != b._layout:
            raise TTFatal(f"{name}: operands must share a layout: {_describe(a)} vs {_describe(b)}")
        shape = _broadcast_shape(name, a, b)
        return run_op(name, [a, b], shape, out_dtype, a._layout, fn, memory_config=memory_config)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"ttnn.{name}: elementwise, fp32 math, rounded to the output dtype."
    return op


def _unary(name: str, fn: Callable[[torch.Tensor], torch.Tensor]):
    def op(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None,
           output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
        x = require_device_tensor(name, "input_tensor", input_tensor)
        return run_op(name, [x], x._shape, x._dtype, x._layout, fn, memory_config=memory_config)

    op.__name__ = op.__qualname__ = name
    op.__doc__ = f"ttnn.{name}: elementwise, fp32 math, rounded to the input dtype."
    return op


add = _binary("add", torch.add)
subtract = _binary("subtract", torch.sub)
multiply = _binary("multiply", torch.mul)
divide = _binary("divide", torch.div)
maximum = _binary("maximum", lambda a, b: torch.maximum(a, torch.as_tensor(b, dtype=a.dtype)))
eq = _binary("eq", lambda a, b: (a == b).to(torch.float32))
ne = _binary("ne", lambda a, b: (a != b).to(torch.float32))

exp = _unary("exp", torch.exp)
neg = _unary("neg", torch.neg)
sigmoid = _unary("sigmoid", torch.sigmoid)
silu = _unary("silu", torch.nn.functional.silu)
relu = _unary("relu", torch.relu)
tanh = _unary("tanh", torch.tanh)
sqrt = _unary("sqrt", torch.sqrt)
rsqrt = _unary("rsqrt", torch.rsqrt)
reciprocal = _unary("reciprocal", torch.reciprocal)
log = _unary("log", torch.log)
softplus = _unary("softplus", torch.nn.functional.softplus)
square = _unary("square", torch.square)
