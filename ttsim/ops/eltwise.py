"""Elementwise ops: binary with broadcasting (tensor or scalar operand) and unary, fp32 math
rounded to the output dtype; then the rest of ttnn's elementwise surface: the short names
(mul, sub, div), in-place forms (add_, sub_, mul_), comparisons, where, and unary activations
(gelu, clip, threshold, ...)."""

from __future__ import annotations

import enum
from typing import Callable

import torch
import torch.nn.functional as F

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


# -- short names: the same ops under ttnn's aliases -------------------------------------
mul = multiply
sub = subtract
div = divide

# -- comparisons and binary math ----------------------------------------------------------
gt = _binary("gt", lambda a, b: (a > b).to(torch.float32), fast_default=None)
lt = _binary("lt", lambda a, b: (a < b).to(torch.float32), fast_default=None)
ge = _binary("ge", lambda a, b: (a >= b).to(torch.float32), fast_default=None)
le = _binary("le", lambda a, b: (a <= b).to(torch.float32), fast_default=None)
squared_difference = _binary("squared_difference", lambda a, b: (a - b) ** 2, fast_default=None)


def minimum(input_tensor_a: Tensor, input_tensor_b, *, dtype=None, memory_config: MemoryConfig | None = None,
            output_tensor: Tensor | None = None, activations=(), input_tensor_a_activations=(),
            input_tensor_b_activations=()) -> Tensor:
    """ttnn.minimum: elementwise, fp32 math, rounded to the output dtype."""
    math = fused("minimum", lambda a, b: torch.minimum(a, torch.as_tensor(b, dtype=a.dtype)), activations,
                 input_tensor_a_activations, input_tensor_b_activations)
    return _run_binary("minimum", math, input_tensor_a, input_tensor_b, dtype, memory_config, output_tensor)


def rsub(input_tensor_a: Tensor, input_tensor_b, *, dtype=None, memory_config: MemoryConfig | None = None,
         output_tensor: Tensor | None = None, activations=(), input_tensor_a_activations=(),
         input_tensor_b_activations=(), fast_and_approximate_mode: bool = True) -> Tensor:
    """ttnn.rsub: ``input_tensor_b - input_tensor_a``."""
    math = fused("rsub", lambda a, b: b - a, activations, input_tensor_a_activations, input_tensor_b_activations)
    return _run_binary("rsub", math, input_tensor_a, input_tensor_b, dtype, memory_config, output_tensor)


def rdiv(input_tensor: Tensor, value, *, rounding_mode: str | None = None, memory_config: MemoryConfig | None = None,
         output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
    """ttnn.rdiv: ``value / input_tensor`` (``rounding_mode`` None, "trunc" or "floor")."""
    if rounding_mode not in (None, "trunc", "floor"):
        raise TTFatal(f"rdiv: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if not isinstance(value, (int, float)):
        raise TTFatal(f"rdiv: value must be a number, got {type(value).__name__}")
    return _run_binary("rdiv", lambda a, b: torch.div(b, a, rounding_mode=rounding_mode), input_tensor, float(value),
                       None, memory_config, output_tensor)


def pow(input_tensor: Tensor, exponent, *, memory_config: MemoryConfig | None = None,  # noqa: A001 - ttnn's name
        output_tensor: Tensor | None = None) -> Tensor:
    """ttnn.pow with a scalar or tensor exponent."""
    return _run_binary("pow", torch.pow, input_tensor, exponent, None, memory_config, output_tensor)


def _inplace_binary(name: str, fn, fast_default: bool, a_name: str = "input_tensor_a", b_name: str = "input_tensor_b"):
    def op(a, b, *, activations=(), input_tensor_a_activations=(), input_tensor_b_activations=(),
           fast_and_approximate_mode: bool = fast_default, sub_core_grids=None, sub_device_id=None) -> Tensor:
        x = require_device_tensor(name, a_name, a)
        math = fused(name, fn, activations, input_tensor_a_activations, input_tensor_b_activations)
        if isinstance(b, Tensor) and _broadcast_shape(name, x, b) != tuple(x._shape):
            raise TTFatal(f"{name}: in place, {b_name} must broadcast to {a_name}'s shape: {_describe(x)}, "
                          f"{_describe(b)}")
        return _run_binary(name, math, x, b, None, None, x)

    if a_name != "input_tensor_a":  # mul_ names its operands input_a / input_b
        def renamed(input_a, input_b, *, activations=(), input_tensor_a_activations=(),
                    input_tensor_b_activations=(), fast_and_approximate_mode: bool = fast_default,
                    sub_core_grids=None, sub_device_id=None) -> Tensor:
            return op(input_a, input_b, activations=activations, input_tensor_a_activations=input_tensor_a_activations,
                      input_tensor_b_activations=input_tensor_b_activations)
        return _named(renamed, name, f"ttnn.{name}: in place into {a_name}; returns it.")

    def plain(input_tensor_a, input_tensor_b, *, activations=(), input_tensor_a_activations=(),
              input_tensor_b_activations=(), fast_and_approximate_mode: bool = fast_default, sub_core_grids=None,
              sub_device_id=None) -> Tensor:
        return op(input_tensor_a, input_tensor_b, activations=activations,
                  input_tensor_a_activations=input_tensor_a_activations,
                  input_tensor_b_activations=input_tensor_b_activations)

    return _named(plain, name, f"ttnn.{name}: in place into {a_name}; returns it.")


add_ = _inplace_binary("add_", torch.add, True)
sub_ = _inplace_binary("sub_", torch.sub, True)
mul_ = _inplace_binary("mul_", torch.mul, False, "input_a", "input_b")


def where(predicate: Tensor, true_value, false_value, *, memory_config: MemoryConfig | None = None,
          output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
    """ttnn.where: ``true_value`` where ``predicate`` != 0, else ``false_value`` (tensors or scalars)."""
    op = "where"
    p = require_device_tensor(op, "predicate", predicate)
    tensors = {"predicate": p}
    for name, v in (("true_value", true_value), ("false_value", false_value)):
        if isinstance(v, Tensor):
            tensors[name] = require_device_tensor(op, name, v)
        elif not isinstance(v, (int, float)):
            raise TTFatal(f"{op}: {name} must be a ttnn.Tensor or a number, got {type(v).__name__}")
    require_same_device(op, tensors)
    shape = broadcast_shapes(*(t._shape for t in tensors.values()))
    if shape is None:
        raise TTFatal(f"{op}: shapes do not broadcast: {[_describe(t) for t in tensors.values()]}") from None
    names = list(tensors)
    dtype = next((t._dtype for n, t in tensors.items() if n != "predicate"), p._dtype)
    if output_tensor is not None:
        dtype = take_output(op, output_tensor, shape, dtype, p._layout, p, False)

    def math(*xs):
        vals = dict(zip(names, xs))
        t = vals.get("true_value", torch.tensor(float(true_value) if not isinstance(true_value, Tensor) else 0.0))
        f = vals.get("false_value", torch.tensor(float(false_value) if not isinstance(false_value, Tensor) else 0.0))
        return torch.where(vals["predicate"] != 0, t.to(torch.float32), f.to(torch.float32))

    return run_op(op, list(tensors.values()), shape, dtype, p._layout, math, memory_config=memory_config,
                  output_tensor=output_tensor)


# -- unary ------------------------------------------------------------------------------------
abs = _unary("abs", torch.abs)  # noqa: A001 - ttnn's name
sin = _unary("sin", torch.sin)
cos = _unary("cos", torch.cos)
sinh = _unary("sinh", torch.sinh)
cosh = _unary("cosh", torch.cosh)
atan = _unary("atan", torch.atan)
sign = _unary("sign", torch.sign)
floor = _unary("floor", torch.floor)
ceil = _unary("ceil", torch.ceil)
relu6 = _unary("relu6", F.relu6)
hardsigmoid = _unary("hardsigmoid", F.hardsigmoid)
hardswish = _unary("hardswish", F.hardswish)
softsign = _unary("softsign", F.softsign)
erfc = _unary("erfc", torch.erfc)
exp2 = _unary("exp2", torch.exp2)
expm1 = _unary("expm1", torch.expm1)
isnan = _unary("isnan", lambda x: torch.isnan(x).to(torch.float32))
logical_not = _unary("logical_not", lambda x: (x == 0).to(torch.float32))
erf = _unary("erf", torch.erf, fast=True)
log1p = _unary("log1p", torch.log1p, fast=True)
mish = _unary("mish", F.mish, fast=True)
gelu = _unary("gelu", F.gelu, fast=True)


def _unary_with(name: str, doc: str):
    """Decorator: ``fn(x, **params)`` becomes the op ``name`` (validated params, fp32 math)."""
    def wrap(fn):
        fn.__name__ = fn.__qualname__ = name
        fn.__doc__ = doc
        return fn
    return wrap


@_unary_with("clip", "ttnn.clip: clamp to [min, max] (either may be None).")
def clip(input_tensor: Tensor, min=None, max=None, *, memory_config: MemoryConfig | None = None) -> Tensor:  # noqa: A002
    return _clamp("clip", input_tensor, min, max, memory_config, None)


@_unary_with("clamp", "ttnn.clamp: clamp to [min, max] (either may be None).")
def clamp(input_tensor: Tensor, min=None, max=None, *, memory_config: MemoryConfig | None = None,  # noqa: A002
          output_tensor: Tensor | None = None) -> Tensor:
    return _clamp("clamp", input_tensor, min, max, memory_config, output_tensor)


def _clamp(op, x, lo, hi, memory_config, output_tensor):
    if lo is None and hi is None:
        raise TTFatal(f"{op}: at least one of min and max must be given")
    for name, v in (("min", lo), ("max", hi)):
        if v is not None and not isinstance(v, (int, float)):
            raise TTFatal(f"{op}: {name} must be a number or None (tensor bounds are not modelled), got {v!r}")
    return _run_unary(op, lambda v: torch.clamp(v, lo, hi), x, memory_config, output_tensor)


@_unary_with("threshold", "ttnn.threshold: ``x if x > threshold else value``.")
def threshold(input_tensor: Tensor, threshold: float, value: float, *, memory_config: MemoryConfig | None = None,
              output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
    t, v = float(threshold), float(value)
    return _run_unary("threshold", lambda x: F.threshold(x, t, v), input_tensor, memory_config, output_tensor)


@_unary_with("leaky_relu", "ttnn.leaky_relu: ``x if x > 0 else negative_slope * x``.")
def leaky_relu(input_tensor: Tensor, negative_slope: float, *, memory_config: MemoryConfig | None = None,
               output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
    s = float(negative_slope)
    return _run_unary("leaky_relu", lambda x: F.leaky_relu(x, s), input_tensor, memory_config, output_tensor)


@_unary_with("elu", "ttnn.elu with ``alpha``.")
def elu(input_tensor: Tensor, *, alpha: float = 1.0, memory_config: MemoryConfig | None = None,
        output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
    a = float(alpha)
    return _run_unary("elu", lambda x: F.elu(x, a), input_tensor, memory_config, output_tensor)


@_unary_with("celu", "ttnn.celu with ``alpha``.")
def celu(input_tensor: Tensor, *, alpha: float = 1.0, memory_config: MemoryConfig | None = None,
         output_tensor: Tensor | None = None, sub_core_grids=None) -> Tensor:
    a = float(alpha)
    return _run_unary("celu", lambda x: F.celu(x, a), input_tensor, memory_config, output_tensor)


@_unary_with("hardtanh", "ttnn.hardtanh: clamp to [min_val, max_val].")
def hardtanh(input_tensor: Tensor, *, min_val: float = -1.0, max_val: float = 1.0,
             memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None,
             sub_core_grids=None) -> Tensor:
    lo, hi = float(min_val), float(max_val)
    return _run_unary("hardtanh", lambda x: F.hardtanh(x, lo, hi), input_tensor, memory_config, output_tensor)


@_unary_with("selu", "ttnn.selu: ``scale * (max(0, x) + min(0, alpha * (exp(x) - 1)))``.")
def selu(input_tensor: Tensor, *, scale: float = 1.0506999492645264, alpha: float = 1.673259973526001,
         memory_config: MemoryConfig | None = None, output_tensor: Tensor | None = None,
         sub_core_grids=None) -> Tensor:
    s, a = float(scale), float(alpha)
    return _run_unary("selu", lambda x: s * (torch.clamp(x, min=0) + torch.clamp(a * torch.expm1(x), max=0)),
                      input_tensor, memory_config, output_tensor)
