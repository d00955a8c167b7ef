"""transformer.joint_scaled_dot_product_attention (SD3.5-style joint attention).

Semantics of ttnn 0.81.1 (its golden, read from the real package): with joint_strategy "rear"
the joint tokens follow the main ones, ``Q = cat(q, joint_q)``, ``K = cat(k, joint_k)``,
``V = cat(v, joint_v)`` along the sequence; one non-causal softmax attention over all of them
(scale defaults to 1/sqrt(d)); the result is split back into the main rows and the joint
rows. fp32 math; the program config's chunk sizes only reorder its sums.
"""

from __future__ import annotations

import math as _math

import torch

from ..device import current_cq_id
from ..tensor import Tensor, _describe
from ..types import Layout, TTFatal
from .attention import SDPAProgramConfig
from .base import _allocate_output, chip_logical, require_device_tensor, require_layout, require_same_device, storage


def _attend(q, k, v, scale: float) -> torch.Tensor:
    scores = torch.matmul(q, k.transpose(-1, -2)) * scale
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def joint_scaled_dot_product_attention(input_tensor_q: Tensor, input_tensor_k: Tensor, input_tensor_v: Tensor,
                                       joint_tensor_q: Tensor, joint_tensor_k: Tensor, joint_tensor_v: Tensor, *,
                                       joint_strategy: str, program_config: SDPAProgramConfig, scale=None,
                                       compute_kernel_config=None):
    """``(out [b, nh, N, dv], joint_out [b, nh, L, dv])`` for q/k/v ``[b, nh, N, d]`` and the
    joint q/k/v ``[b, nh, L, d]``."""
    op = "joint_scaled_dot_product_attention"
    names = ("input_tensor_q", "input_tensor_k", "input_tensor_v", "joint_tensor_q", "joint_tensor_k",
             "joint_tensor_v")
    tensors = dict(zip(names, (input_tensor_q, input_tensor_k, input_tensor_v, joint_tensor_q, joint_tensor_k,
                               joint_tensor_v)))
    for name, t in tensors.items():
        require_device_tensor(op, name, t)
        require_layout(op, name, t, Layout.TILE)
    require_same_device(op, tensors)
    if joint_strategy != "rear":
        raise TTFatal(f"{op}: joint_strategy must be 'rear', got {joint_strategy!r}")
    if not isinstance(program_config, SDPAProgramConfig):
        raise TTFatal(f"{op}: program_config must be a ttnn.SDPAProgramConfig, got {program_config!r}")
    q, k, v, jq, jk, jv = tensors.values()
    for name, t in tensors.items():
        if len(t.shape) != 4:
            raise TTFatal(f"{op}: {name} must be rank 4 [b, nh, seq, d], got {_describe(t)}")
    b, nh, n, d = q.shape
    length = jq.shape[2]
    ok = (tuple(k.shape) == (b, nh, n, d) and tuple(v.shape[:3]) == (b, nh, n)
          and tuple(jq.shape) == (b, nh, length, d) and tuple(jk.shape) == (b, nh, length, d)
          and tuple(jv.shape) == (b, nh, length, v.shape[3]))
    if not ok:
        raise TTFatal(f"{op}: q/k/v must be [b, nh, N, d] and the joint tensors [b, nh, L, d] with the same "
                      f"b, nh and d: " + ", ".join(f"{n_}={list(t.shape)}" for n_, t in tensors.items()))
    s = 1.0 / _math.sqrt(d) if scale is None else float(scale)
    dv = v.shape[3]
    cq_id = current_cq_id(None)
    out = _allocate_output(op, q, (b, nh, n, dv), q._dtype, Layout.TILE, None, cq_id)
    joint_out = _allocate_output(op, q, (b, nh, length, dv), q._dtype, Layout.TILE, None, cq_id)
    inputs = list(tensors.values())
    in_bufs = [t._buffers for t in inputs]

    def execute():  # one program writes both outputs, as the card's
        for i, (ob, jb) in enumerate(zip(out._buffers, joint_out._buffers)):
            qq, kk, vv, jqq, jkk, jvv = (chip_logical(bufs[i], t) for bufs, t in zip(in_bufs, inputs))
            both = _attend(torch.cat([qq, jqq], 2), torch.cat([kk, jkk], 2), torch.cat([vv, jvv], 2), s)
            ob.data = storage(both[:, :, :n], q._dtype, Layout.TILE)
            jb.data = storage(both[:, :, n:], q._dtype, Layout.TILE)

    device = q._device
    device.program_cache.dispatch(op, inputs, [out, joint_out], (s, repr(program_config)))
    device.enqueue(cq_id, op, execute, writes=out._buffers + joint_out._buffers)
    return out, joint_out
