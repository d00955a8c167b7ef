"""Elementwise ops: binary with broadcasting (tensor or scalar operand) and unary."""

from __future__ import annotations

import enum
from typing import Callable

import torch

from ..tensor import Tensor, _describe
from ..types import DataType, MemoryConfig, TTFatal, _tt_enum
from .activation import fused
from .base import broadcast_shapes, require_device_tensor, require_same_device, run_op, take_output


def _broadcast_shape(op: str, a: Tensor, b: Tensor) -> tuple[int, ...]:
    shape = broadcast_shapes(a._shape, b._shape)
    if shape is None:
        raise TTFatal(f"{op}: shapes do not broadcast: {_describe(a)} and {_describe(b)}")
    return shape


def _run_binary(name: str, fn, input_tensor_a, input_tensor_b, dtype, memory_config, output_tensor=None) -> Tensor:
    a = require_device_tensor(name, "input_tensor_a", input_tensor_a)
    out_dtype = a._dtype if dtype is None else dtype
    if isinstance(input_tensor_b, (int, float)):
        scalar = float(input_tensor_b)
        if output_tensor is not None:
            out_dtype = take_output(name, output_tensor, a._shape, out_dtype, a._layout, a, dtype is not None)
        return run_op(name, [a], a._shape, out_dtype, a._layout, lambda x: fn(x, scalar),
                      memory_config=memory_config, output_tensor=output_tensor)
    b = require_device_tensor(name, "input_tensor_b", input_tensor_b)
    require_same_device(name, {"input_tensor_a": a, "input_tensor_b": b})
    if a._layout != b._layout:
        raise TTFatal(f"{name}: operands must share a layout: {_describe(a)} vs {_describe(b)}")
    shape = _broadcast_shape(name, a, b)
    if output_tensor is not None:
        out_dtype = take_output(name, output_tensor, shape, out_dtype, a._layout, a, dtype is not None)
    return run_op(name, [a, b], shape, out_dtype, a._layout, fn, memory_config=memory_config,
                  output_tensor=output_tensor)


def _named(op, name: str, doc: str):
    op.__name__ = op.__qualname__ = name
    op.__doc__ = doc
    return op


_BINARY_DOC = "ttnn.{}: elementwise, fp32 math (fused activations applied in fp32), rounded to the output dtype."


def _binary(name: str, fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], fast_default: bool | None):
    """add / subtract / multiply (with fast_and_approximate_mode) and eq / ne (without), as ttnn declares them."""
    if fast_default is None:
        def op(input_tensor_a: Tensor, input_tensor_b, *, dtype: DataType | None = None,
               memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None, activations=(),
               input_tensor_a_activations=(), input_tensor_b_activations=(), sub_core_grids=None,
               sub_device_id=None) -> Tensor:
            math = fused(name, fn, activations, input_tensor_a_activations, input_tensor_b_activations)
            return _run_binary(name, math, input_tensor_a, input_tensor_b, dtype, memory_config, output_tensor)
    else:
        def op(input_tensor_a: Tensor, input_tensor_b, *, fast_and_approximate_mode: bool = fast_default,
               dtype: DataType | None = None, memory_config: MemoryConfig | None = None,
               output_tensor: Tensor | None = None, activations=(), input_tensor_a_activations=(),
               input_tensor_b_activations=(), sub_core_grids=None, sub_device_id=None) -> Tensor:
            math = fused(name, fn, activations, input_tensor_a_activations, input_tensor_b_activations)
            return _run_binary(name, math, input_tensor_a, input_tensor_b, dtype, memory_config, output_tensor)
    return _named(op, name, _BINARY_DOC.format(name))


def divide(input_tensor_a: Tensor, input_tensor_b, *, fast_and_approximate_mode: bool = False,
           rounding_mode: str | None = None, dtype: DataType | None = None,
           memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None, activations=(),
           input_tensor_a_activations=(), input_tensor_b_activations=(), sub_core_grids=None,
           sub_device_id=None) -> Tensor:
    """ttnn.divide: elementwise, fp32 math (``rounding_mode`` None, "trunc" or "floor"), rounded to the output dtype."""
    if rounding_mode not in (None, "trunc", "floor"):
        raise TTFatal(f"divide: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    math = fused("divide", lambda a, b: torch.div(a, b, rounding_mode=rounding_mode), activations,
                 input_tensor_a_activations, input_tensor_b_activations)
    return _run_binary("divide", math, input_tensor_a, input_tensor_b, dtype, memory_config, output_tensor)


def maximum(input_tensor_a: Tensor, input_tensor_b, *, dtype: DataType | None = None,
            memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None, activations=(),
            input_tensor_a_activations=(), input_tensor_b_activations=()) -> Tensor:
    """ttnn.maximum: elementwise, fp32 math, rounded to the output dtype."""
    math = fused("maximum", lambda a, b: torch.maximum(a, torch.as_tensor(b, dtype=a.dtype)), activations,
                 input_tensor_a_activations, input_tensor_b_activations)
    return _run_binary("maximum", math, input_tensor_a, input_tensor_b, dtype, memory_config, output_tensor)


def _run_unary(name: str, fn, input_tensor, memory_config, output_tensor=None) -> Tensor:
    x = require_device_tensor(name, "input_tensor", input_tensor)
    dtype = x._dtype
    if output_tensor is not None:
        dtype = take_output(name, output_tensor, x._shape, dtype, x._layout, x, dtype_given=False)
    return run_op(name, [x], x._shape, dtype, x._layout, fn, memory_config=memory_config,
                  output_tensor=output_tensor)


_UNARY_DOC = "ttnn.{}: elementwise, fp32 math, rounded to the input dtype."


def _unary(name: str, fn: Callable[[torch.Tensor], torch.Tensor], fast: bool = False):
    """Unary ops; ``fast`` adds ttnn's ``fast_and_approximate_mode=False`` (ttsim computes exactly either way)."""
    if fast:
        def op(input_tensor: Tensor, *, fast_and_approximate_mode: bool = False,
               memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None,
               sub_core_grids=None) -> Tensor:
            return _run_unary(name, fn, input_tensor, memory_config, output_tensor)
    else:
        def op(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None,
               output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
            return _run_unary(name, fn, input_tensor, memory_config, output_tensor)
    return _named(op, name, _UNARY_DOC.format(name))


@_tt_enum
class SigmoidMode(enum.Enum):
    """ttnn.SigmoidMode (accepted; ttsim computes the accurate sigmoid in every mode)."""

    FastApproximate = 0
    AccurateWithFastExp = 1
    Accurate = 2


def sigmoid(input_tensor: Tensor, *, vector_mode: int = 4, mode: SigmoidMode = SigmoidMode.Accurate,
            memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None,
            sub_core_grids=None) -> Tensor:
    """ttnn.sigmoid: elementwise, fp32 math, rounded to the input dtype (vector_mode 4 = all rows and columns)."""
    if vector_mode != 4:
        raise TTFatal(f"sigmoid: vector_mode={vector_mode!r} is not modelled by ttsim (only 4)")
    return _run_unary("sigmoid", torch.sigmoid, input_tensor, memory_config, output_tensor)


def softplus(input_tensor: Tensor, *, beta: float = 1.0, threshold: float = 20.0,
             memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None,
             sub_core_grids=None) -> Tensor:
    """ttnn.softplus: ``log(1 + exp(beta x)) / beta``, linear above ``threshold``; fp32 math."""
    return _run_unary("softplus", lambda x: torch.nn.functional.softplus(x, beta=beta, threshold=threshold),
                      input_tensor, memory_config, output_tensor)


def tanh(input_tensor: Tensor, *, memory_config: MemoryConfig | None = None,
         output_tensor: Tensor | None = None, fast_and_approximate_mode: bool = False,
         sub_core_grids=None) -> Tensor:
    """ttnn.tanh: elementwise, fp32 math, rounded to the input dtype."""
    return _run_unary("tanh", torch.tanh, input_tensor, memory_config, output_tensor)


add = _binary("add", torch.add, fast_default=True)
subtract = _binary("subtract", torch.sub, fast_default=True)
multiply = _binary("multiply", torch.mul, fast_default=False)
eq = _binary("eq", lambda a, b: (a == b).to(torch.float32), fast_default=None)
ne = _binary("ne", lambda a, b: (a != b).to(torch.float32), fast_default=None)

exp = _unary("exp", torch.exp, fast=True)
log = _unary("log", torch.log, fast=True)
sqrt = _unary("sqrt", torch.sqrt, fast=True)
rsqrt = _unary("rsqrt", torch.rsqrt, fast=True)
neg = _unary("neg", torch.neg)
silu = _unary("silu", torch.nn.functional.silu)
relu = _unary("relu", torch.relu)
reciprocal = _unary("reciprocal", torch.reciprocal)
square = _unary("square", torch.square)
