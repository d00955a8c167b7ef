"""Normalisations: rms_norm, layer_norm, softmax, softmax_in_place and the fused scale + mask +
softmax (scale_mask_softmax and its in-place form). fp32 math, rounded to the input dtype.

Weights (gamma/beta) follow ttnn's two accepted forms for a width-``W`` input:
TILE ``[..., 1, W]`` (one logical row) or ROW_MAJOR ``[..., W/32, 32]`` (tt-metal's
"gamma as sticks" form). Either way the math sees a ``[W]`` vector.
"""

from __future__ import annotations

import torch

from ..tensor import Tensor, _describe
from ..types import INTEGER_TYPES, TILE_SIZE, DataType, Layout, MemoryConfig, TTFatal
from .unmodelled import refuse_unmodelled
from .base import broadcast_shapes, require_device_tensor, require_layout, require_same_device, run_op

_FLOATS = (DataType.BFLOAT16, DataType.FLOAT32, DataType.BFLOAT8_B)


def _vector_param(op: str, name: str, t: Tensor, width: int) -> None:
    """Check a gamma/beta tensor holds exactly ``width`` values in one of ttnn's two forms."""
    if t._dtype not in _FLOATS:
        raise TTFatal(f"{op}: {name} must be BFLOAT16, FLOAT32 or BFLOAT8_B, got {_describe(t)}")
    shape = list(t._shape)
    vol = t.logical_volume()
    if t._layout == Layout.TILE:
        ok = shape[-1] == width and vol == width
        want = f"[1, 1, 1, {width}] in TILE_LAYOUT"
    else:
        ok = width % TILE_SIZE == 0 and shape[-1] == TILE_SIZE and vol == width
        want = f"[1, 1, {width // TILE_SIZE}, {TILE_SIZE}] in ROW_MAJOR_LAYOUT"
    if not ok:
        raise TTFatal(f"{op}: {name} must hold the {width} values of the input's last dim as {want}, "
                      f"got {_describe(t)}")


def _norm(op: str, kind: str, input_tensor, epsilon, weight, bias, residual_input_tensor, memory_config):
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_layout(op, "input_tensor", x, Layout.TILE)
    if x._dtype not in _FLOATS:
        raise TTFatal(f"{op}: input_tensor must be BFLOAT16, FLOAT32 or BFLOAT8_B, got {_describe(x)}")
    width = x._shape[-1]
    tensors = {"input_tensor": x}
    if residual_input_tensor is not None:
        r = require_device_tensor(op, "residual_input_tensor", residual_input_tensor)
        require_layout(op, "residual_input_tensor", r, Layout.TILE)
        if tuple(r._shape) != tuple(x._shape):
            raise TTFatal(f"{op}: residual_input_tensor must match input_tensor's shape {list(x._shape)}, "
                          f"got {_describe(r)}")
        tensors["residual_input_tensor"] = r
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None:
            tensors[name] = require_device_tensor(op, name, t)
            _vector_param(op, name, tensors[name], width)
    require_same_device(op, tensors)
    names = list(tensors)
    eps = float(epsilon)

    def math(*args):
        vals = dict(zip(names, args))
        h = vals["input_tensor"]
        if "residual_input_tensor" in vals:
            h = h + vals["residual_input_tensor"]
        if kind == "rms":
            y = h * torch.rsqrt(h.square().mean(dim=-1, keepdim=True) + eps)
        else:
            mu = h.mean(dim=-1, keepdim=True)
            var = (h - mu).square().mean(dim=-1, keepdim=True)
            y = (h - mu) * torch.rsqrt(var + eps)
        if "weight" in vals:
            y = y * vals["weight"].reshape(width)
        if "bias" in vals:
            y = y + vals["bias"].reshape(width)
        return y

    return run_op(op, list(tensors.values()), x._shape, x._dtype, Layout.TILE, math, memory_config=memory_config)


def rms_norm(
    input_tensor: Tensor,
    *,
    epsilon: float = 1e-12,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    residual_input_tensor: Tensor | None = None,
    memory_config: MemoryConfig | None = None,
    program_config=None,
    compute_kernel_config=None,
) -> Tensor:
    """``x / sqrt(mean(x^2) + epsilon) * weight + bias`` over the last dim (x += residual first).

    The (1 + w) scaling of Qwen-style RMSNorm is the caller's business: pass ``w + 1``.
    """
    return _norm("rms_norm", "rms", input_tensor, epsilon, weight, bias, residual_input_tensor, memory_config)


def layer_norm(
    input_tensor: Tensor,
    *,
    epsilon: float = 1e-12,
    weight: Tensor | None = None,
    bias: Tensor | None = None,
    residual_input_tensor: Tensor | None = None,
    memory_config: MemoryConfig | None = None,
    program_config=None,
    compute_kernel_config=None,
    recip_tensor: Tensor | None = None,
) -> Tensor:
    """``(x - mean) / sqrt(var + epsilon) * weight + bias`` over the last dim (biased variance)."""
    refuse_unmodelled("layer_norm", recip_tensor=recip_tensor)
    return _norm("layer_norm", "layer", input_tensor, epsilon, weight, bias, residual_input_tensor, memory_config)


def softmax(
    input_tensor: Tensor,
    dim: int = -1,
    *,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
    numeric_stable: bool = True,
) -> Tensor:
    """Softmax along ``dim`` in fp32 (max-subtracted), rounded to the input dtype."""
    x = require_device_tensor("softmax", "input_tensor", input_tensor)
    if x._dtype in INTEGER_TYPES:
        raise TTFatal(f"softmax: input_tensor must be a float tensor, got {_describe(x)}")
    rank = len(x._shape)
    if not isinstance(dim, int) or not -rank <= dim < rank:
        raise TTFatal(f"softmax: dim={dim!r} is out of range for input_tensor {_describe(x)}")
    return run_op("softmax", [x], x._shape, x._dtype, x._layout, lambda v: torch.softmax(v, dim=dim),
                  memory_config=memory_config)


class _SoftmaxDefaultProgramConfig:
    """ttnn's default softmax program config (placement only); printed as ttnn prints it."""

    def __repr__(self) -> str:
        return "<ttnn._ttnn.operations.normalization.SoftmaxDefaultProgramConfig object>"


_DEFAULT_PROGRAM = _SoftmaxDefaultProgramConfig()


def _float_input(op: str, t) -> Tensor:
    x = require_device_tensor(op, "input_tensor", t)
    if x._dtype in INTEGER_TYPES:
        raise TTFatal(f"{op}: input_tensor must be a float tensor, got {_describe(x)}")
    return x


def _scale_mask(op, input_tensor, scale, mask, is_causal_mask, memory_config, in_place):
    x = _float_input(op, input_tensor)
    shape = list(x._shape)
    inputs = [x]
    if mask is not None:
        m = require_device_tensor(op, "mask", mask)
        require_same_device(op, {"input_tensor": x, "mask": m})
        ms = list(m._shape)
        rows_ok = ms[-2:] == shape[-2:] if is_causal_mask else (len(ms) >= 2 and ms[-2] in (1, TILE_SIZE)
                                                                and ms[-1] == shape[-1])
        if broadcast_shapes(ms[:-2], shape[:-2]) is None:
            rows_ok = False
        if len(ms) != len(shape) or not rows_ok:
            want = f"[..., {shape[-2]}, {shape[-1]}]" if is_causal_mask else f"[..., 1 or {TILE_SIZE}, {shape[-1]}]"
            raise TTFatal(f"{op}: mask must be {want} broadcasting over input_tensor {_describe(x)} "
                          f"(is_causal_mask={is_causal_mask}), got {_describe(m)}")
        inputs.append(m)
    s = None if scale is None else float(scale)

    def math(v, *rest):
        if s is not None:
            v = v * s
        if rest:
            m = rest[0].to(torch.float32)
            if not is_causal_mask:  # one mask row broadcast over the rows (a tile-padded mask's first row)
                m = m[..., :1, :]
            v = v + m
        return torch.softmax(v, dim=-1)

    out_mc = memory_config if not in_place else x._memory_config
    return run_op(op, inputs, shape, x._dtype, x._layout, math, memory_config=out_mc,
                  output_tensor=x if in_place else None)


def scale_mask_softmax(input_tensor: Tensor, scale: float | None = None, mask: Tensor | None = None, *,
                       memory_config: MemoryConfig | None = None, is_causal_mask: bool = False,
                       compute_kernel_config=None, numeric_stable: bool = True) -> Tensor:
    """``softmax(input_tensor * scale + mask)`` over the last dim. ``is_causal_mask``: the mask
    is a full ``[..., Sq, Sk]`` matrix; otherwise one row ``[..., 1, Sk]`` (or its tile-padded
    ``[..., 32, Sk]``, first row read) broadcast over the rows."""
    return _scale_mask("scale_mask_softmax", input_tensor, scale, mask, is_causal_mask, memory_config, False)


def scale_mask_softmax_in_place(input_tensor: Tensor, scale: float | None = None, mask: Tensor | None = None, *,
                                program_config=_DEFAULT_PROGRAM, is_causal_mask: bool = False,
                                compute_kernel_config=None, numeric_stable: bool = False) -> Tensor:
    """:func:`scale_mask_softmax` written into ``input_tensor``; returns it."""
    return _scale_mask("scale_mask_softmax_in_place", input_tensor, scale, mask, is_causal_mask, None, True)


def softmax_in_place(input_tensor: Tensor, dim: int = -1, *, program_config=_DEFAULT_PROGRAM,
                     compute_kernel_config=None, numeric_stable: bool = True) -> Tensor:
    """Softmax over the last dim written into ``input_tensor``; returns it."""
    op = "softmax_in_place"
    x = _float_input(op, input_tensor)
    if dim not in (-1, len(x._shape) - 1):
        raise TTFatal(f"{op}: dim={dim!r}: ttnn's in-place softmax runs over the last dim only")
    return run_op(op, [x], x._shape, x._dtype, x._layout, lambda v: torch.softmax(v, dim=-1),
                  output_tensor=x)
