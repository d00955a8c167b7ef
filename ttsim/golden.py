"""ttnn.get_golden_function: the torch reference of an op, for the ops ttsim models.

tt-metal's tests compute their expected values with it (``ttnn.get_golden_function(ttnn.add)
(torch_a, torch_b)``). These are ttsim's own references, with the signatures and semantics of
ttnn 0.81.1's goldens (measured: matmul/linear apply the program config's fused activation,
else ``activation``; softmax's dim defaults to -1; rms_norm adds the residual first; layout and
sharding conversions pass values through, converting to a given dtype). Every op also carries
them as ``op.golden_function`` (None without one), the attribute form tt-metal's tests use. An
op without one raises as ttnn does: ``<op> does not have a golden function``.
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


def _as_dtype(x, dtype):
    """A result as ``dtype`` (a ttnn DataType) would hold it, as 0.81.1's golden_to_output_dtype."""
    if dtype is None:
        return x
    from .numerics import TORCH_STORAGE

    return x.to(TORCH_STORAGE[dtype])


def _same(input_tensor, *args, **kwargs):  # layout and placement ops: the values are the input's
    return input_tensor


def _with_dtype(key: str):
    def golden(input_tensor, *args, **kwargs):
        return _as_dtype(input_tensor, kwargs.get(key))

    return golden


def _resharded(input_tensor, *args, output_dtype=None, **kwargs):
    # both sharding conversions end their positional arguments with the optional output_dtype
    from .types import DataType

    if output_dtype is None and args and isinstance(args[-1], DataType):
        output_dtype = args[-1]
    return _as_dtype(input_tensor, output_dtype)


def _untilize_with_unpadding(input_tensor, output_tensor_end, *args, **kwargs):
    return input_tensor[tuple(slice(0, int(e) + 1) for e in output_tensor_end)]


def _argmax(input_tensor, dim=None, keepdim=False, **_):
    return torch.argmax(input_tensor) if dim is None else torch.argmax(input_tensor, dim, keepdim)


def _embedding(input_tensor, weight, *, dtype=None, **_):
    return _as_dtype(F.embedding(input_tensor.to(torch.int64), weight), dtype)


def _permute(input_tensor, dims, **_):
    return torch.permute(input_tensor, tuple(dims))


def _reshape(input_tensor, shape, *args, **_):
    return input_tensor.reshape(tuple(shape)).contiguous().clone()


def _squeeze(input_tensor, dim=None, *args, **_):
    if dim is None:
        return torch.squeeze(input_tensor)
    return torch.squeeze(input_tensor, tuple(dim) if isinstance(dim, (list, tuple)) else dim)


def _unsqueeze(input_tensor, dim, *args, **_):
    return torch.unsqueeze(input_tensor, dim)


def _transpose(input_tensor, dim1, dim2, *args, **_):
    return torch.transpose(input_tensor, dim1, dim2)


def _concat(tensors, dim=0, groups=1, **_):
    if groups != 1:
        raise TTFatal("concat golden: groups != 1 is not modelled by ttsim")
    return torch.cat(list(tensors), dim)


def _repeat(tensor, shape, **_):
    dims = [int(d) for d in shape]
    return tensor.repeat(*([1] * (tensor.dim() - len(dims)) + dims))  # fewer dims: leading 1s, as ttnn


def _slice(input_tensor, slice_start=None, slice_end=None, slice_step=None, *args, **kwargs):
    starts = kwargs.get("starts") if slice_start is None else slice_start
    ends = kwargs.get("ends") if slice_end is None else slice_end
    steps = kwargs.get("steps") if slice_step is None else slice_step
    steps = [1] * len(starts) if steps is None else steps
    return input_tensor[tuple(slice(int(a), int(b), int(c)) for a, b, c in zip(starts, ends, steps))]


def _plus_one(input_tensor, *args, skip_negative_entries=False, **_):
    # in place, as the op; negative entries kept with skip_negative_entries
    if skip_negative_entries:
        keep = (input_tensor >= 0) & (input_tensor < 2**31 - 1)
        input_tensor.copy_(torch.where(keep, input_tensor + 1, input_tensor))
    else:
        input_tensor.add_(1)
    return input_tensor


def _compare(fn):
    def golden(input_tensor_a, input_tensor_b, *args, dtype=None, **kwargs):
        return _as_dtype(_binary(fn)(input_tensor_a, input_tensor_b, **kwargs), dtype)

    return golden


def _where(predicate, true_value, false_value, *args, **_):  # any nonzero predicate picks true_value
    return torch.where(torch.ne(predicate, 0), true_value, false_value)


def _pow(input_tensor, exponent, *args, dtype=None, **_):
    return _as_dtype(torch.pow(input_tensor, exponent), dtype)


def _clamp(input_tensor, min=None, max=None, *args, **_):  # noqa: A002 - ttnn's names
    return torch.clamp(input_tensor, min, max)


def _leaky_relu(input_tensor, negative_slope=0.01, *args, **_):
    return F.leaky_relu(input_tensor, negative_slope=negative_slope)


def _mac(input_tensor_a, input_tensor_b, input_tensor_c, *args, **kwargs):
    """0.81.1's: one fp32 multiply-add, rounded once to the first tensor operand's dtype."""
    vals = [x.float() if isinstance(x, torch.Tensor) else x for x in (input_tensor_a, input_tensor_b, input_tensor_c)]
    out_dtype = next(x.dtype for x in (input_tensor_a, input_tensor_b, input_tensor_c) if isinstance(x, torch.Tensor))
    return torch.add(torch.mul(vals[0], vals[1]), vals[2]).to(out_dtype)


def _addcmul(input_a, input_b, input_c, *args, value=1, **kwargs):
    return torch.addcmul(input_a, input_b, input_c, value=value)


def _zeros(shape, dtype=None, *args, **kwargs):
    from .numerics import TORCH_STORAGE

    return torch.zeros(tuple(shape), dtype=torch.bfloat16 if dtype is None else TORCH_STORAGE[dtype])


def _chunk(input_tensor, chunks, dim, *args, **kwargs):
    return list(torch.chunk(input_tensor, chunks, dim=dim))


def _repeat_interleave(tensor, repeats, dim=0, **_):
    return torch.repeat_interleave(tensor, repeats, dim=dim)


def _slice_write(input_tensor, output_tensor, start, end, step, *args, **kwargs):
    """0.81.1's: writes into the given output (callers keep seeing each write)."""
    output_tensor[tuple(slice(int(a), int(b), int(c)) for a, b, c in zip(start, end, step))] = input_tensor
    return output_tensor


def _rms_pre_all_gather(input_tensor, *, residual_input_tensor=None, **_):
    """sum(x^2) in column 0 of a 32-wide block (0.81.1's golden; the other columns are undefined there,
    zeros here as in ttsim's op)."""
    if residual_input_tensor is not None:
        input_tensor = input_tensor + residual_input_tensor
    stats = torch.zeros(*input_tensor.shape[:-1], 32)
    stats[..., 0] = input_tensor.float().square().sum(dim=-1)
    return stats


def _rms_post_all_gather(input_tensor, stats, *, epsilon=1e-12, weight=None, bias=None, **_):
    chips = stats.shape[-1] // 32
    mean_sq = stats[..., ::32].sum(dim=-1, keepdim=True) / (input_tensor.shape[-1] * chips)
    out = input_tensor * torch.rsqrt(mean_sq + epsilon)
    if weight is not None:
        out = out * weight.reshape(-1)[: out.shape[-1]]
    if bias is not None:
        out = out + bias.reshape(-1)[: out.shape[-1]]
    return out


def _chunk_gdn(q, k, v, g, beta, *, scale=None, initial_state=None, output_final_state=False, chunk_size=64,
               use_qk_l2norm=False, output_head_major=False, **_):
    """0.81.1's: key heads repeated to the value heads, the chunked rule, o head-major on request."""
    from .kernels import gdn as G

    group = v.shape[2] // q.shape[2]
    if group > 1:
        q, k = q.repeat_interleave(group, dim=2), k.repeat_interleave(group, dim=2)
    o, state = G.chunk_gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=initial_state,
                                        chunk_size=chunk_size, use_qk_l2norm=use_qk_l2norm)
    if output_head_major:
        o = o.permute(0, 2, 1, 3).reshape(-1, o.shape[1], o.shape[-1])
    return o, state if output_final_state else None


def _gated_delta_attn_seq(L_unit, v_beta_sc, k_bd_sc, intra_attn, q_decay, k_decay_t, dl_exp, L_inv, *,  # noqa: N803
                          initial_state=None, **_):
    """0.81.1's: per chunk, lower-triangular solves against L_unit, then the state scan."""
    bh, nc, _, kd = q_decay.shape
    state = torch.zeros(bh, kd, v_beta_sc.shape[-1]) if initial_state is None else initial_state.float()
    outs = []
    for j in range(nc):
        lower = L_unit[:, j].float()
        v_new = torch.linalg.solve_triangular(lower, v_beta_sc[:, j].float(), upper=False) - \
            torch.linalg.solve_triangular(lower, k_bd_sc[:, j].float(), upper=False) @ state
        outs.append(q_decay[:, j].float() @ state + intra_attn[:, j].float() @ v_new)
        state = state * dl_exp[:, j].float().reshape(bh, 1, 1) + k_decay_t[:, j].float() @ v_new
    return torch.stack(outs, dim=1), state


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
        # layout and placement: the values pass through (a dtype argument converts them)
        t.to_layout: _same, t.to_memory_config: _same, t.untilize: _same,
        t.untilize_with_unpadding: _untilize_with_unpadding, t.tilize: _with_dtype("dtype"),
        t.tilize_with_zero_padding: _with_dtype("output_dtype"), t.tilize_with_val_padding: _with_dtype("dtype"),
        t.clone: _with_dtype("dtype"), t.interleaved_to_sharded: _resharded, t.sharded_to_interleaved: _resharded,
        # shape and indexing
        t.argmax: _argmax, t.embedding: _embedding, t.permute: _permute, t.reshape: _reshape, t.squeeze: _squeeze,
        t.unsqueeze: _unsqueeze, t.transpose: _transpose, t.concat: _concat, t.repeat: _repeat, t.slice: _slice,
        t.plus_one: _plus_one,
        # more eltwise
        t.eq: _compare(torch.eq), t.ne: _compare(torch.ne), t.gt: _compare(torch.gt), t.ge: _compare(torch.ge),
        t.lt: _compare(torch.lt), t.le: _compare(torch.le), t.where: _where, t.pow: _pow, t.clamp: _clamp,
        t.clip: _clamp, t.leaky_relu: _leaky_relu, t.floor: _unary(torch.floor), t.ceil: _unary(torch.ceil),
        t.sign: _unary(torch.sign), t.erf: _unary(torch.erf), t.erfc: _unary(torch.erfc), t.exp2: _unary(torch.exp2),
        t.expm1: _unary(torch.expm1), t.log1p: _unary(torch.log1p), t.sinh: _unary(torch.sinh),
        t.cosh: _unary(torch.cosh), t.atan: _unary(torch.atan), t.isnan: _unary(torch.isnan),
        t.logical_not: _unary(torch.logical_not), t.relu6: _unary(F.relu6), t.softsign: _unary(F.softsign),
        t.hardsigmoid: _unary(F.hardsigmoid), t.hardswish: _unary(F.hardswish),
        # qwen36's vocabulary (0.81.1's goldens)
        t.mac: _mac, t.addcmul: _addcmul, t.zeros: _zeros, t.chunk: _chunk, t.repeat_interleave: _repeat_interleave,
        t.experimental.slice_write: _slice_write, t.rms_norm_pre_all_gather: _rms_pre_all_gather,
        t.rms_norm_post_all_gather: _rms_post_all_gather,
        t.transformer.chunk_gated_delta_rule: _chunk_gdn, t.transformer.gated_delta_attn_seq: _gated_delta_attn_seq,
        t.pearson_correlation_coefficient: lambda expected, actual, *a, **k: t.pearson_correlation_coefficient(
            expected, actual),
    }


_TABLE: dict = {}


def _ops(namespace):
    """Every op function ``namespace`` exports (its own names and transformer./experimental.)."""
    for mod in (namespace, namespace.transformer, namespace.experimental):
        for name, obj in vars(mod).items():
            if not name.startswith("_") and callable(obj) and getattr(obj, "__module__", "").startswith("ttsim.ops"):
                if not isinstance(obj, type):
                    yield obj


def install(namespace) -> None:
    """Key the goldens by ``namespace``'s op objects (ttsim._namespace hands itself over once
    every op is imported, so this module never imports the package), and give every op the
    ``golden_function`` attribute ttnn's operations carry: its golden, or None."""
    _TABLE.update(_goldens(namespace))
    for op in _ops(namespace):
        op.golden_function = _TABLE.get(op)


def get_golden_function(operation):
    golden = _TABLE.get(operation)
    if golden is None:
        raise TTFatal(f"{operation} does not have a golden function")
    return golden
