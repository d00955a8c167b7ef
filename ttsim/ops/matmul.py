"""matmul and linear: fp32 accumulation of bf16/bfp8 storage, TILE layout required."""

from __future__ import annotations

import torch

from ..tensor import Tensor, _describe
from ..types import TILE_SIZE, DataType, Layout, MemoryConfig, TTFatal
from .activation import chain
from .matmul_config import fused_activation_of
from .unmodelled import refuse_unmodelled
from .base import broadcast_shapes, require_device_tensor, require_layout, require_same_device, run_op, take_output


def _matmul_shape(op: str, a: Tensor, b: Tensor, transpose_a: bool, transpose_b: bool) -> tuple[int, ...]:
    sa, sb = list(a._shape), list(b._shape)
    if len(sa) < 2 or len(sb) < 2:
        raise TTFatal(f"{op}: operands need rank >= 2: {_describe(a)}, {_describe(b)}")
    if transpose_a:
        sa[-1], sa[-2] = sa[-2], sa[-1]
    if transpose_b:
        sb[-1], sb[-2] = sb[-2], sb[-1]
    if sa[-1] != sb[-2]:
        raise TTFatal(
            f"{op}: inner dimensions differ: input_tensor_a {sa} (K={sa[-1]}) vs input_tensor_b {sb} (K={sb[-2]})"
        )
    batch = broadcast_shapes(sa[:-2], sb[:-2])
    if batch is None:
        raise TTFatal(f"{op}: batch dims do not broadcast: {sa} vs {sb}")
    return (*batch, sa[-2], sb[-1])


def _output_tile(op: str, output_tile) -> None:
    """Only 32x32 outputs: tt-metal skips its tiny-tile matmul tests on Blackhole ("TinyTile Matmul
    needs to be fixed on BH. Issue #22103"), so what a card computes there is not known."""
    from .. import tiles

    if not tiles.is_standard(tiles.check(op, output_tile)):
        raise TTFatal(f"{op}: output_tile={output_tile!r} is not modelled by ttsim: tiny-tile matmul is broken on "
                      f"Blackhole (tt-metal issue 22103: its tests skip it there)")


def _check_bias(op: str, bias: Tensor, n: int) -> None:
    """ttnn's bias is one row broadcast over the output rows: ``[..., 1, N]`` or tile-padded
    ``[..., 32, N]`` (only its first row is read, as the card's row broadcast does)."""
    shape = list(bias._shape)
    if len(shape) < 2 or shape[-1] != n or shape[-2] not in (1, TILE_SIZE) or any(d != 1 for d in shape[:-2]):
        raise TTFatal(f"{op}: bias must be [1, {n}] (or tile-padded [32, {n}], first row used) with leading dims 1, "
                      f"got {_describe(bias)}")


def _mm(transpose_a: bool, transpose_b: bool):
    def math(x, w, bias=None):
        if transpose_a:
            x = x.transpose(-1, -2)
        if transpose_b:
            w = w.transpose(-1, -2)
        y = torch.matmul(x, w)
        return y if bias is None else y + bias.reshape(-1, bias.shape[-1])[0]

    return math


def matmul(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    transpose_a: bool = False,
    transpose_b: bool = False,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
    program_config=None,
    activation: str | None = None,
    compute_kernel_config=None,
    core_grid=None,
    output_tile=None,
    optional_output_tensor: Tensor | None = None,
    global_cb=None,
    sub_device_id=None,
    prefetcher_pipes=(),
) -> Tensor:
    """Matrix product of two TILE-layout device tensors."""
    _output_tile("matmul", output_tile)
    return _linear("matmul", input_tensor_a, input_tensor_b, None, transpose_a, transpose_b, memory_config,
                   dtype, activation, optional_output_tensor, program_config)


def linear(
    input_tensor_a: Tensor,
    input_tensor_b: Tensor,
    *,
    bias: Tensor | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    memory_config: MemoryConfig | None = None,
    dtype: DataType | None = None,
    program_config=None,
    activation: str | None = None,
    compute_kernel_config=None,
    core_grid=None,
    output_tile=None,
    optional_output_tensor: Tensor | None = None,
    global_cb=None,
    sub_device_id=None,
    prefetcher_pipes=(),
    in0_column_offset=None,
) -> Tensor:
    """``input_tensor_a @ input_tensor_b + bias`` (weights stored [in, out], as ttnn expects)."""
    refuse_unmodelled("linear", in0_column_offset=in0_column_offset)
    _output_tile("linear", output_tile)
    return _linear("linear", input_tensor_a, input_tensor_b, bias, transpose_a, transpose_b, memory_config,
                   dtype, activation, optional_output_tensor, program_config)


_ACTIVATIONS = {None: None, "relu": torch.relu, "silu": torch.nn.functional.silu, "gelu": torch.nn.functional.gelu}


def _linear(op, a, b, bias, transpose_a, transpose_b, memory_config, dtype, activation, output=None,
            program_config=None) -> Tensor:
    a = require_device_tensor(op, "input_tensor_a", a)
    b = require_device_tensor(op, "input_tensor_b", b)
    tensors = {"input_tensor_a": a, "input_tensor_b": b}
    if bias is not None:
        tensors["bias"] = require_device_tensor(op, "bias", bias)
    require_same_device(op, tensors)
    for name, t in tensors.items():
        require_layout(op, name, t, Layout.TILE)
    if activation not in _ACTIVATIONS:
        raise TTFatal(f"{op}: activation must be one of {sorted(k for k in _ACTIVATIONS if k)}, got {activation!r}")
    shape = _matmul_shape(op, a, b, transpose_a, transpose_b)
    if bias is not None:
        _check_bias(op, tensors["bias"], shape[-1])
    # the program config's activation runs in the kernel on a @ b + bias; ``activation`` after
    # it (tt-metal's bound_matmul applies the user's activation as a unary op on the output)
    fused = fused_activation_of(op, program_config)
    acts = [f for f in (chain(op, "program_config.fused_activation", [fused] if fused else None),
                        _ACTIVATIONS[activation]) if f is not None]
    base = _mm(transpose_a, transpose_b)

    def math(*xs):
        y = base(*xs)
        for f in acts:
            y = f(y)
        return y

    out_dtype = a._dtype if dtype is None else dtype
    if output is not None:
        out_dtype = take_output(op, output, shape, out_dtype, Layout.TILE, a, dtype is not None,
                                name="optional_output_tensor")
    return run_op(op, list(tensors.values()), shape, out_dtype, Layout.TILE, math, memory_config=memory_config,
                  output_tensor=output)
