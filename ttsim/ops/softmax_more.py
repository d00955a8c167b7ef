"""Fused scale + mask + softmax (ttnn.scale_mask_softmax and its in-place form) and
softmax_in_place: fp32 math over the last dim, rounded to the input dtype."""

from __future__ import annotations

import torch

from ..tensor import Tensor, _describe
from ..types import INTEGER_TYPES, TILE_SIZE, MemoryConfig, TTFatal
from .base import broadcast_shapes, require_device_tensor, require_same_device, run_op


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
