"""ttnn's unary activations as fusable ops: UnaryOpType, UnaryWithParam, and the math ttsim
applies for the ``activations`` / ``input_tensor_a_activations`` / ``input_tensor_b_activations``
of binary ops (tt_transformers' MLP: ``mul(w1, w3, input_tensor_a_activations=[SILU])``)."""

from __future__ import annotations

import enum
from typing import Callable

import torch
import torch.nn.functional as F

from ..types import TTFatal, _tt_enum


@_tt_enum
class UnaryOpType(enum.Enum):
    """ttnn.UnaryOpType: the members ttsim can fuse (values as in ttnn 0.81.1)."""

    EXP = 0
    RECIP = 1
    GELU = 2
    GELU_TANH = 3
    RELU = 4
    SQRT = 5
    SIGMOID = 6
    LOG = 7
    TANH = 9
    SIN = 12
    COS = 13
    ABS = 16
    SQUARE = 19
    LEAKY_RELU = 30
    ELU = 31
    RSQRT = 39
    RELU6 = 40
    ERF = 44
    SOFTPLUS = 59
    SILU = 58
    IDENTITY = 60
    NEG = 61
    MISH = 93


_NO_PARAM: dict[UnaryOpType, Callable[[torch.Tensor], torch.Tensor]] = {
    UnaryOpType.EXP: torch.exp,
    UnaryOpType.RECIP: torch.reciprocal,
    UnaryOpType.GELU: F.gelu,
    UnaryOpType.GELU_TANH: lambda x: F.gelu(x, approximate="tanh"),
    UnaryOpType.RELU: torch.relu,
    UnaryOpType.SQRT: torch.sqrt,
    UnaryOpType.SIGMOID: torch.sigmoid,
    UnaryOpType.LOG: torch.log,
    UnaryOpType.TANH: torch.tanh,
    UnaryOpType.SIN: torch.sin,
    UnaryOpType.COS: torch.cos,
    UnaryOpType.ABS: torch.abs,
    UnaryOpType.SQUARE: torch.square,
    UnaryOpType.RSQRT: torch.rsqrt,
    UnaryOpType.RELU6: F.relu6,
    UnaryOpType.ERF: torch.erf,
    UnaryOpType.SOFTPLUS: F.softplus,
    UnaryOpType.SILU: F.silu,
    UnaryOpType.IDENTITY: lambda x: x,
    UnaryOpType.NEG: torch.neg,
    UnaryOpType.MISH: F.mish,
}
_ONE_PARAM: dict[UnaryOpType, Callable[[torch.Tensor, float], torch.Tensor]] = {
    UnaryOpType.LEAKY_RELU: lambda x, p: F.leaky_relu(x, p),
    UnaryOpType.ELU: lambda x, p: F.elu(x, p),
    # the param is fast_and_approximate_mode: a precision hint (ttsim/hints.py), the accurate GELU
    UnaryOpType.GELU: lambda x, p: F.gelu(x),
}
#: ttnn 0.81.1's three-argument UnaryWithParam(op, p0, p1): SOFTPLUS's (beta, threshold), as
#: ttnn.softplus takes them (``log(1 + exp(beta x)) / beta``, ``x`` where ``beta x > threshold``)
_TWO_PARAMS: dict[UnaryOpType, Callable[[torch.Tensor, float, float], torch.Tensor]] = {
    UnaryOpType.SOFTPLUS: lambda x, beta, threshold: F.softplus(x, beta=beta, threshold=threshold),
}


class UnaryWithParam:
    """ttnn.UnaryWithParam: one fused activation, as 0.81.1's overloads build it:
    ``(op)``, ``(op, param)``, ``(op, param0, param1)`` or ``((op, param))``."""

    def __init__(self, arg, /, *params):
        if isinstance(arg, tuple):
            if params or len(arg) != 2:
                raise TTFatal(f"UnaryWithParam: a tuple argument is (op, param), got {arg!r}{params or ''}")
            arg, params = arg[0], arg[1:]
        if not isinstance(arg, UnaryOpType):
            raise TTFatal(f"UnaryWithParam: expected a ttnn.UnaryOpType, got {arg!r}")
        if len(params) > 2:
            raise TTFatal(f"UnaryWithParam: at most two params (0.81.1's overloads), got {len(params)}")
        self.op_type = arg
        self.params = [float(p) for p in params]

    def __repr__(self) -> str:  # 0.81.1's text: UnaryWithParam(op_type=UnaryOpType::SOFTPLUS, params=[1, 20])
        shown = ", ".join(f"{p:g}" for p in self.params)
        return f"UnaryWithParam(op_type=UnaryOpType::{self.op_type.name}, params=[{shown}])"


def _one(name: str, where: str, act) -> Callable[[torch.Tensor], torch.Tensor]:
    item = act if isinstance(act, UnaryWithParam) else UnaryWithParam(act) if isinstance(act, (UnaryOpType, tuple)) \
        else None
    if item is None:
        raise TTFatal(f"{name}: {where} entries must be ttnn.UnaryOpType or ttnn.UnaryWithParam, got {act!r}")
    op, params = item.op_type, item.params
    if op in _NO_PARAM and not params:
        return _NO_PARAM[op]
    if op in _ONE_PARAM and len(params) == 1:
        p = params[0]
        return lambda x: _ONE_PARAM[op](x, p)
    if op in _TWO_PARAMS and len(params) == 2:
        p0, p1 = params
        return lambda x: _TWO_PARAMS[op](x, p0, p1)
    raise TTFatal(f"{name}: {where}: {op!r} with params {params} is not modelled by ttsim")


def chain(name: str, where: str, acts) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The composition of ``acts`` (applied in order), validated at the call; None if empty."""
    fns = [_one(name, where, a) for a in (acts or ())]
    if not fns:
        return None

    def apply(x):
        for fn in fns:
            x = fn(x)
        return x

    return apply


def fused(name: str, fn, activations, a_activations, b_activations):
    """``fn(a, b)`` with ttnn's fused activations: on a, on b (tensor operands), on the result."""
    post = chain(name, "activations", activations)
    pre_a = chain(name, "input_tensor_a_activations", a_activations)
    pre_b = chain(name, "input_tensor_b_activations", b_activations)
    if post is None and pre_a is None and pre_b is None:
        return fn

    def math(a, b):
        if pre_a is not None:
            a = pre_a(a)
        if pre_b is not None and isinstance(b, torch.Tensor):
            b = pre_b(b)
        y = fn(a, b)
        return y if post is None else post(y)

    return math
