"""conv1d and the weight preparation it uses: ttnn.conv1d, ttnn.prepare_conv_weights,
ttnn.Conv1dConfig (0.81.1's Conv2dConfig under that name), ttnn.PaddingMode and the
ttnn.Conv2dL1FullSliceConfig slice config.

As 0.81.1 documents conv1d: a 2-D convolution of input height 1 and width ``input_length``.
The input is read as ``batch_size x input_length`` rows of ``in_channels`` (the 4-D split of
its shape does not matter: gdn/tp.py passes ``[1, T, 1, C]``); the output is
``[1, 1, batch_size * L_out, out_channels]``, height sharded in L1 unless ``memory_config`` says
otherwise, TILE unless ``conv_config.output_layout``. Values: the weights rounded to
``conv_config.weights_dtype``, fp32 accumulation, one rounding to ``dtype``.

Refused where a card is silently wrong or ttsim cannot say what it does:
- a weight prepared (prepare_conv_weights) for another geometry than the conv's (qwen36's
  gdn/tp.py measured a mismatched padding pair give wrong values, max |diff| 26.9);
- ``conv_config.activation`` (gdn/tp.py measured the card's fused SiLU at PCC ~0.84 on this conv;
  ttsim would compute it exactly);
- width slicing through DRAM (``slice_config`` None with a DRAM input, or a DRAM slice config)
  inside a trace capture: that path reads on the host, which a capture rejects.
"""

from __future__ import annotations

import enum

import torch
import torch.nn.functional as F

from ..tensor import Tensor, _describe, from_torch, to_device
from ..types import (
    BLOCK_FLOATS,
    L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    BufferType,
    DataType,
    Layout,
    MemoryConfig,
    TTFatal,
    _tt_enum,
)
from .base import require_device_tensor, run_op


@_tt_enum
class PaddingMode(enum.Enum):
    """ttnn.PaddingMode: how a convolution pads (0.81.1's members)."""

    Zeros = 0
    Replicate = 1


class Op2DSliceConfig:
    """What ttnn.Conv2dL1FullSliceConfig is: keep the whole conv in L1 (``L1_FULL``), or slice
    its width through DRAM. Values are the same either way; only placement (and, for DRAM
    slicing, host reads) differ."""

    def __init__(self, *, slice_type: str, num_slices: int = 0):
        self.slice_type, self.num_slices = slice_type, num_slices

    def __repr__(self) -> str:  # 0.81.1's text
        return f"Op2DSliceConfig(slice_type=SliceType::{self.slice_type},num_slices={self.num_slices})"


Conv2dL1FullSliceConfig = Op2DSliceConfig(slice_type="L1_FULL", num_slices=0)


class Conv1dConfig:
    """ttnn.Conv1dConfig (0.81.1: ``Conv1dConfig = Conv2dConfig``). ``weights_dtype``,
    ``output_layout`` and ``padding_mode`` change values or layout and are modelled (a padding
    mode other than Zeros refused); ``activation`` is refused (see the module docstring); the
    rest place or schedule the kernel (ttsim/hints.py)."""

    def __init__(self, *, weights_dtype: DataType | None = None, activation=None, deallocate_activation: bool = False,
                 reallocate_halo_output: bool = True, config_tensors_in_dram: bool = False,
                 act_block_h_override: int = 0, act_block_w_div: int = 1, reshard_if_not_optimal: bool = False,
                 override_sharding_config: bool = False, shard_layout=None, core_grid=None,
                 transpose_shards: bool = False, output_layout: Layout = Layout.TILE,
                 enable_act_double_buffer: bool = False, enable_weights_double_buffer: bool = False,
                 full_inner_dim: bool = False, enable_kernel_stride_folding: bool | None = None,
                 enable_activation_reuse: bool = False, force_split_reader: bool | None = None,
                 override_output_sharding_config: bool = False, padding_mode: PaddingMode = PaddingMode.Zeros):
        if activation is not None:
            raise TTFatal(f"Conv1dConfig: activation={activation!r} is not modelled by ttsim (qwen36 measured the "
                          f"card's fused SiLU on a depthwise conv1d at PCC ~0.84; apply the activation as an op)")
        if padding_mode != PaddingMode.Zeros:
            raise TTFatal(f"Conv1dConfig: padding_mode={padding_mode!r} is not modelled by ttsim (only Zeros)")
        if not isinstance(output_layout, Layout) or output_layout == Layout.INVALID:
            raise TTFatal(f"Conv1dConfig: output_layout must be TILE or ROW_MAJOR, got {output_layout!r}")
        self.weights_dtype, self.activation, self.output_layout = weights_dtype, activation, output_layout
        self.shard_layout, self.core_grid, self.padding_mode = shard_layout, core_grid, padding_mode
        self.deallocate_activation = deallocate_activation
        self.reallocate_halo_output = reallocate_halo_output
        self.config_tensors_in_dram = config_tensors_in_dram
        self.act_block_h_override, self.act_block_w_div = act_block_h_override, act_block_w_div
        self.reshard_if_not_optimal, self.override_sharding_config = reshard_if_not_optimal, override_sharding_config
        self.transpose_shards, self.full_inner_dim = transpose_shards, full_inner_dim
        self.enable_act_double_buffer, self.enable_weights_double_buffer = (enable_act_double_buffer,
                                                                            enable_weights_double_buffer)
        self.enable_kernel_stride_folding, self.enable_activation_reuse = (enable_kernel_stride_folding,
                                                                           enable_activation_reuse)
        self.force_split_reader = force_split_reader
        self.override_output_sharding_config = override_output_sharding_config


def _pair(name: str, v) -> tuple[int, int]:
    vals = [v, v] if isinstance(v, int) else list(v)
    if len(vals) != 2 or not all(isinstance(x, int) and x >= 0 for x in vals):
        raise TTFatal(f"conv1d: {name} must be an int or [left, right] of non-negative ints, got {v!r}")
    return vals[0], vals[1]


def _prep_padding(padding) -> tuple[int, int, int, int]:
    """prepare_conv_weights' padding: (pad_h, pad_w) or (top, bottom, left, right)."""
    p = [int(x) for x in padding]
    if len(p) == 2:
        return p[0], p[0], p[1], p[1]
    if len(p) == 4:
        return p[0], p[1], p[2], p[3]
    raise TTFatal(f"prepare_conv_weights: padding must be [pad_h, pad_w] or [top, bottom, left, right], got {padding!r}")


_PREP_KEYS = ("weight_tensor", "input_memory_config", "input_layout", "weights_format", "in_channels", "out_channels",
              "batch_size", "input_height", "input_width", "kernel_size", "stride", "padding", "dilation", "has_bias",
              "groups", "device", "input_dtype")
_PREP_OPTIONAL = ("output_dtype", "conv_config", "compute_config", "slice_config")


def _weights_dtype(conv_config) -> DataType:
    wd = getattr(conv_config, "weights_dtype", None) if conv_config is not None else None
    return DataType.BFLOAT16 if wd is None else wd


def prepare_conv_weights(*args, **kwargs) -> Tensor:
    """ttnn.prepare_conv_weights (keyword-only, as 0.81.1's binding): the weight on ``device``,
    rounded to the conv config's weights dtype and marked with the conv geometry it was
    prepared for (a conv1d of another geometry refuses it)."""
    if args:
        raise TypeError("prepare_conv_weights() takes keyword arguments only")
    unknown = set(kwargs) - set(_PREP_KEYS) - set(_PREP_OPTIONAL)
    missing = [k for k in _PREP_KEYS if k not in kwargs]
    if unknown or missing:
        raise TypeError(f"prepare_conv_weights(): unexpected {sorted(unknown)}, missing {missing}")
    a = kwargs
    w = a["weight_tensor"]
    if not isinstance(w, Tensor):
        raise TypeError(f"prepare_conv_weights: weight_tensor must be a ttnn.Tensor, got {type(w).__name__}")
    if a["weights_format"] != "OIHW":
        raise TTFatal(f"prepare_conv_weights: weights_format {a['weights_format']!r}: only OIHW is supported")
    kernel = tuple(int(k) for k in a["kernel_size"])
    if len(kernel) != 2 or kernel[0] != 1 or int(a["input_height"]) != 1:
        raise TTFatal(f"prepare_conv_weights: ttsim models conv1d geometry (input_height 1, kernel (1, K)), got "
                      f"input_height {a['input_height']}, kernel_size {a['kernel_size']}")
    if tuple(int(s) for s in a["stride"])[0] != 1 or tuple(int(s) for s in a["dilation"])[0] != 1:
        raise TTFatal("prepare_conv_weights: the height stride and dilation of a conv1d are 1")
    shape = list(w.shape)
    o, groups = int(a["out_channels"]), int(a["groups"])
    if len(shape) == 3:
        shape = [shape[0], shape[1], 1, shape[2]]
    if shape != [o, int(a["in_channels"]) // groups, 1, kernel[1]]:
        raise TTFatal(f"prepare_conv_weights: weight_tensor {list(w.shape)} is not OIHW "
                      f"[{o}, {int(a['in_channels']) // groups}, 1, {kernel[1]}]")
    top, bottom, left, right = _prep_padding(a["padding"])
    if top or bottom:
        raise TTFatal("prepare_conv_weights: a conv1d pads only its width (top and bottom 0)")
    geometry = dict(in_channels=int(a["in_channels"]), out_channels=o, batch_size=int(a["batch_size"]),
                    input_length=int(a["input_width"]), kernel_size=kernel[1], stride=int(a["stride"][1]),
                    padding=(left, right), dilation=int(a["dilation"][1]), groups=groups,
                    has_bias=bool(a["has_bias"]))
    wdt = _weights_dtype(a.get("conv_config"))
    layout = Layout.TILE if wdt in BLOCK_FLOATS else Layout.ROW_MAJOR
    # one shard per chip (a mesh-sharded host weight: chip i gets shard i, as to_device places them)
    shards = [from_torch(v.reshape(shape), dtype=wdt, layout=layout) for v in _host_shards(w)]
    host = Tensor._make(tuple(shape), wdt, layout, host=[h for t in shards for h in t._host])
    prepared = to_device(host, a["device"])
    prepared._conv_geometry = geometry
    return prepared


def _host_shards(w: Tensor) -> list[torch.Tensor]:
    """A weight's values per shard, float32 (a device weight is read back first)."""
    from ..tensor import _unpad, from_device

    if w._device is not None:
        w = from_device(w)
    w._await_read()
    return [_unpad(h, w._shape).float() for h in w._host]


def conv1d(*, input_tensor: Tensor, weight_tensor: Tensor, device, in_channels: int, out_channels: int,
           batch_size: int, input_length: int, kernel_size: int, stride: int = 1, padding=0, dilation: int = 1,
           groups: int = 1, dtype: DataType | None = None, bias_tensor: Tensor | None = None,
           conv_config: Conv1dConfig | None = None, compute_config=None, memory_config: MemoryConfig | None = None,
           slice_config: Op2DSliceConfig | None = None, return_output_dim: bool = False,
           return_weights_and_bias: bool = False):
    """``out[b, l, o] = sum_{c,k} x[b, l*stride + k*dilation - pad_left, c] w[o, c, k]`` per group."""
    op = "conv1d"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if x._device is not device:
        raise TTFatal(f"{op}: input_tensor is on {x._device!r}, device= is {device!r}")
    left, right = _pair("padding", padding)
    geometry = dict(in_channels=in_channels, out_channels=out_channels, batch_size=batch_size,
                    input_length=input_length, kernel_size=kernel_size, stride=stride, padding=(left, right),
                    dilation=dilation, groups=groups, has_bias=bias_tensor is not None)
    if x.logical_volume() != batch_size * input_length * in_channels or x.shape[-1] != in_channels:
        raise TTFatal(f"{op}: input_tensor {_describe(x)} is not batch_size x input_length x in_channels = "
                      f"{batch_size} x {input_length} x {in_channels}")
    if in_channels % groups or out_channels % groups:
        raise TTFatal(f"{op}: in_channels {in_channels} and out_channels {out_channels} must divide by groups {groups}")
    prepared = getattr(weight_tensor, "_conv_geometry", None)
    if prepared is None:
        weight_tensor = prepare_conv_weights(
            weight_tensor=weight_tensor, input_memory_config=x._memory_config, input_layout=x._layout,
            weights_format="OIHW", in_channels=in_channels, out_channels=out_channels, batch_size=batch_size,
            input_height=1, input_width=input_length, kernel_size=(1, kernel_size), stride=(1, stride),
            padding=(0, 0, left, right), dilation=(1, dilation), has_bias=bias_tensor is not None, groups=groups,
            device=device, input_dtype=x._dtype, conv_config=conv_config)
    elif prepared != geometry:
        diff = {k: (prepared[k], geometry[k]) for k in geometry if prepared[k] != geometry[k]}
        raise TTFatal(f"{op}: weight_tensor was prepared for another geometry {diff} (prepared, conv): a card "
                      f"computes wrong values with it; prepare it for this conv")
    if getattr(conv_config, "deallocate_activation", False) and x._memory_config.buffer_type != BufferType.DRAM:
        # documented a no-op for a DRAM input (gdn/tp.py); in L1 the card frees the input after the conv
        raise TTFatal(f"{op}: conv_config.deallocate_activation=True with an L1 input is not modelled by ttsim")
    capturing = device._capturing is not None
    dram_slices = slice_config is None and x._memory_config.buffer_type == BufferType.DRAM or (
        slice_config is not None and slice_config.slice_type != "L1_FULL")
    if capturing and dram_slices:
        raise TTFatal(f"{op}: width slicing through DRAM reads on the host, which a trace capture rejects "
                      f"(pass slice_config=ttnn.Conv2dL1FullSliceConfig, as gdn/tp.py does)")
    l_out = (input_length + left + right - dilation * (kernel_size - 1) - 1) // stride + 1
    if l_out < 1:
        raise TTFatal(f"{op}: input_length {input_length} with padding {left, right} is shorter than the kernel")
    inputs = [x, weight_tensor]
    if bias_tensor is not None:
        inputs.append(require_device_tensor(op, "bias_tensor", bias_tensor))
    out_dtype = x._dtype if dtype is None else dtype
    out_layout = conv_config.output_layout if conv_config is not None else Layout.TILE

    def math(v, w, *rest):
        sig = v.reshape(batch_size, input_length, in_channels).transpose(1, 2)  # [B, C, L]
        kern = w.reshape(out_channels, in_channels // groups, kernel_size)
        y = F.conv1d(F.pad(sig, (left, right)), kern, stride=stride, dilation=dilation, groups=groups)
        if rest:
            y = y + rest[0].reshape(-1)[:out_channels, None]
        return y.transpose(1, 2).reshape(1, 1, batch_size * l_out, out_channels)

    out = run_op(op, inputs, (1, 1, batch_size * l_out, out_channels), out_dtype, out_layout, math,
                 memory_config=memory_config or L1_HEIGHT_SHARDED_MEMORY_CONFIG,
                 program_key=tuple(sorted((k, str(v)) for k, v in geometry.items())))
    result = [out]
    if return_output_dim:
        result.append(l_out)
    if return_weights_and_bias:
        result.append((weight_tensor, bias_tensor))
    return out if len(result) == 1 else tuple(result)
