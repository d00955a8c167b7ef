"""ttnn.get_golden_function: the torch reference of an op, for the ops ttsim models.

tt-metal's tests compute their expected values with it (``ttnn.get_golden_function(ttnn.add)
(torch_a, torch_b)``). These are ttsim's own references, with the signatures and semantics of
ttnn 0.81.1's goldens (measured: matmul/linear apply the program config's fused activation,
else ``activation``; softmax's dim defaults to -1; rms_norm adds the residual first). An op
without one raises as ttnn does: ``<op> does not have a golden function``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .types import TTFatal


def _binary(fn):
    def golden(input_tensor_a, input_tensor_b, *args, activations=None, input_tensor_a_activations=None,
               input_tensor_b_activations=None, dtype=None, **kwargs):
        from .ops.activation import chain

        pre_a = chain("golden", "input_tensor_a_activations", input_tensor_a_activations)
        pre_b = chain("golden", "input_tensor_b_activations", input_tensor_b_activations)
        post = chain("golden", "activations", activations)
        a = pre_a(input_tensor_a) if pre_a else input_tensor_a
        b = pre_b(input_tensor_b) if pre_b and isinstance(input_tensor_b, torch.Tensor) else input_tensor_b
        out = fn(a, b)
        return post(out) if post else out

    return golden


def _unary(fn):
    def golden(input_tensor, *args, **kwargs):
        return fn(input_tensor)

    return golden


_ACT = {"relu": torch.relu, "silu": F.silu, "gelu": F.gelu}


def _activation(program_config, activation):
    """The program config's fused activation first, else the ``activation`` string (ttnn's golden)."""
    fused = getattr(program_config, "fused_activation", None) if program_config is not None else None
    if fused is not None:
        from .ops.activation import chain

        return chain("golden", "program_config.fused_activation", [fused])
    return _ACT.get(activation) if activation is not None else None


def _matmul(input_tensor_a, input_tensor_b, transpose_a=False, transpose_b=False, *, bias=None, activation=None,
            program_config=None, dtype=None, **kwargs):
    if transpose_a:
        input_tensor_a = input_tensor_a.transpose(-1, -2)
    if transpose_b:
        input_tensor_b = input_tensor_b.transpose(-1, -2)
    out = input_tensor_a @ input_tensor_b.to(input_tensor_a.dtype)
    act = _activation(program_config, activation)
    return act(out) if act else out


def _linear(input_tensor_a, input_tensor_b, transpose_a=False, transpose_b=False, *, bias=None, program_config=None,
            activation=None, dtype=None, **kwargs):
    if transpose_a:
        input_tensor_a = input_tensor_a.transpose(-1, -2)
    if transpose_b:
        input_tensor_b = input_tensor_b.transpose(-1, -2)
    out = input_tensor_a @ input_tensor_b.to(input_tensor_a.dtype)
    if bias is not None:
        out = out + bias.reshape(-1, bias.shape[-1])[0]
    act = _activation(program_config, activation)
    return act(out) if act else out


def _softmax(input_tensor, dim=None, **_):
    return torch.softmax(input_tensor, -1 if dim is None else dim)


def _rms_norm(input_tensor, weight=None, *, epsilon=1e-12, bias=None, residual_input_tensor=None, **_):
    if residual_input_tensor is not None:
        input_tensor = input_tensor + residual_input_tensor
    var = input_tensor.to(torch.float32).pow(2).mean(-1, keepdim=True)
    out = input_tensor * torch.rsqrt(var + epsilon)
    if weight is not None:
        out = out * weight
    return out + bias if bias is not None else out


def _layer_norm(input_tensor, *, epsilon=1e-12, residual_input_tensor=None, weight=None, bias=None, **_):
    if residual_input_tensor is not None:
        input_tensor = input_tensor + residual_input_tensor
    return F.layer_norm(input_tensor, (input_tensor.shape[-1],), weight, bias, epsilon)


def _reduce(fn):
    def golden(input_tensor, dim=None, keepdim=False, **_):
        return fn(input_tensor) if dim is None else fn(input_tensor, dim, keepdim)

    return golden


def _max(x, *dim):
    return torch.amax(x, *dim) if dim else torch.max(x)


def _topk(input_tensor, k=32, dim=-1, largest=True, sorted=True, *, stable=False, indices_tensor=None, **_):  # noqa: A002
    # as the real golden: torch.topk, or a stable sort (lowest index first) with stable=True;
    # it does not promise the card's order among ties without stable (nor does ttsim's op)
    if stable:
        order = torch.sort(input_tensor, dim=dim, descending=largest, stable=True)
        values, indices = order.values.narrow(dim, 0, k), order.indices.narrow(dim, 0, k)
    else:
        values, indices = torch.topk(input_tensor, k, dim=dim, largest=largest, sorted=sorted)
    if indices_tensor is not None:
        indices = torch.gather(indices_tensor.to(torch.int64), dim, indices)
    return values, indices


def _unsqueeze_to_4d(input_tensor):
    return input_tensor.reshape([1] * (4 - input_tensor.dim()) + list(input_tensor.shape))


def _joint(input_tensor_q, input_tensor_k, input_tensor_v, joint_tensor_q, joint_tensor_k, joint_tensor_v, *,
           joint_strategy, scale=None, **_):
    if joint_strategy != "rear":
        raise ValueError(f"Only joint_strategy='rear' is supported, got {joint_strategy!r}")
    n = input_tensor_q.shape[-2]
    q = torch.cat([input_tensor_q, joint_tensor_q], dim=-2)
    k = torch.cat([input_tensor_k, joint_tensor_k], dim=-2)
    v = torch.cat([input_tensor_v, joint_tensor_v], dim=-2)
    out = F.scaled_dot_product_attention(q, k, v, scale=scale)
    return out[..., :n, :], out[..., n:, :]


def _goldens(t) -> dict:
    """The golden of each op ttsim models, keyed by the op object of the namespace ``t``."""
    return {
        t.add: _binary(torch.add), t.subtract: _binary(torch.sub), t.multiply: _binary(torch.mul),
        t.divide: _binary(torch.div), t.maximum: _binary(torch.maximum), t.minimum: _binary(torch.minimum),
        t.exp: _unary(torch.exp), t.log: _unary(torch.log), t.sqrt: _unary(torch.sqrt), t.rsqrt: _unary(torch.rsqrt),
        t.neg: _unary(torch.neg), t.reciprocal: _unary(torch.reciprocal), t.square: _unary(torch.square),
        t.relu: _unary(torch.relu), t.silu: _unary(F.silu), t.sigmoid: _unary(torch.sigmoid),
        t.tanh: _unary(torch.tanh), t.gelu: _unary(F.gelu), t.abs: _unary(torch.abs), t.sin: _unary(torch.sin),
        t.cos: _unary(torch.cos), t.mish: _unary(F.mish),
        t.matmul: _matmul, t.linear: _linear, t.softmax: _softmax, t.rms_norm: _rms_norm,
        t.layer_norm: _layer_norm, t.sum: _reduce(torch.sum), t.mean: _reduce(torch.mean), t.max: _reduce(_max),
        t.transformer.joint_scaled_dot_product_attention: _joint, t.topk: _topk, t.unsqueeze_to_4D: _unsqueeze_to_4d,
    }


_TABLE: dict = {}


def install(namespace) -> None:
    """Key the goldens by ``namespace``'s op objects (ttsim._namespace hands itself over once
    every op is imported, so this module never imports the package)."""
    _TABLE.update(_goldens(namespace))


def get_golden_function(operation):
    golden = _TABLE.get(operation)
    if golden is None:
        raise TTFatal(f"{operation} does not have a golden function")
    return golden
