"""Gated delta rule ops: transformer.chunk_gated_delta_rule (prefill),
fused_recurrent_gated_delta_rule (decode) and gated_delta_attn_seq (the low-level chunk scan).

Layouts as tt-metal's op (chunk_gated_delta_rule.cpp; its TT_FATAL texts are in 0.81.1's
library): q, k ``[B, T, H, K]``, v ``[B, T, HV, V]`` (HV a multiple of H: value head j reads
key head j // (HV/H)), g and beta ``[B, T, HV]``. The chunked op also takes q/k/v FLAT
(``[B, T, H*K]``, ``[B, T, HV*V]``, production's fused_chunk.py always passes them so): HV comes
from beta, V from v's width, K is taken equal to V ("flat q/k path assumes K==V"), and the kernel
L2-normalises flat q and k itself (folding the scale into q), which needs chunk_size 32 and T a
multiple of it. ``output_head_major`` returns o as ``[B*HV, T, V]`` (0.81.1's golden:
``o.permute(0, 2, 1, 3).reshape(-1, T, V)``).
"""

from __future__ import annotations

import torch

from ..kernels import gdn as G
from ..tensor import Tensor, _describe
from ..types import ChunkGdnWyInverse, DataType, Layout, MemoryConfig, TTFatal
from .base import logical, require_device_tensor, require_same_device, run_op
from .unmodelled import refuse_unmodelled as _refuse


def _check_int(op: str, name: str, t: Tensor) -> None:
    if t._dtype not in (DataType.INT32, DataType.UINT32):
        raise TTFatal(f"{op}: {name} must be int32 or uint32, got {_describe(t)}")


class _Dims:
    """B, T, H (key heads), K, HV (value heads), V, and which of q/k, v came flat."""

    def __init__(self, bsz, t, hk, dk, h, dv, flat_qk=False, flat_v=False):
        self.bsz, self.t, self.hk, self.dk, self.h, self.dv = bsz, t, hk, dk, h, dv
        self.flat_qk, self.flat_v = flat_qk, flat_v


def _gdn_inputs(op, q, k, v, g, beta, allow_flat=False):
    tensors = {"q": q, "k": k, "v": v, "g": g, "beta": beta}
    for name, t in tensors.items():
        require_device_tensor(op, name, t)
    require_same_device(op, tensors)
    if tuple(k.shape) != tuple(q.shape) or len(q.shape) not in ((3, 4) if allow_flat else (4,)):
        raise TTFatal(f"{op}: q and k must both be [B, T, H, K]: q {_describe(q)}, k {_describe(k)}")
    flat_qk, flat_v = len(q.shape) == 3, len(v.shape) == 3
    if flat_v and not allow_flat:
        raise TTFatal(f"{op}: v must be [B, T, HV, V], got {_describe(v)}")
    bsz, t = q.shape[0], q.shape[1]
    if tuple(v.shape[:2]) != (bsz, t) or len(v.shape) not in (3, 4):
        raise TTFatal(f"{op}: v must be [B, T, HV, V] (or flat [B, T, HV*V]), got {_describe(v)}")
    if flat_v:  # tt-metal: HV comes from beta [B, T, HV]
        if len(beta.shape) != 3:
            raise TTFatal(f"{op}: beta must be [B, T, HV], got {_describe(beta)}")
        h = beta.shape[2]
        if v.shape[2] % h:
            raise TTFatal(f"{op}: flat v width {v.shape[2]} does not split into HV={h} heads")
        dv = v.shape[2] // h
    else:
        h, dv = v.shape[2], v.shape[3]
    if flat_qk:
        dk = dv  # tt-metal: "flat q/k path assumes K==V"
        hk = q.shape[2] // dk
        if q.shape[2] != hk * dk:
            raise TTFatal(f"flat q width {q.shape[2]} != H*K ({hk}*{dk}); flat q/k path assumes K==V")
    else:
        hk, dk = q.shape[2], q.shape[3]
    if not hk or h % hk:
        raise TTFatal(f"HV ({h}) must be divisible by H ({hk})")
    for name in ("g", "beta"):
        if tuple(tensors[name].shape) != (bsz, t, h):
            raise TTFatal(f"{op}: {name} must be [B, T, HV] = {[bsz, t, h]}, got {_describe(tensors[name])}")
    return list(tensors.values()), _Dims(bsz, t, hk, dk, h, dv, flat_qk, flat_v)


def _grouped(kernel, group: int):
    """Grouped value heads (Qwen3.6 GDN: HV = 2 x H key heads): value head j reads key head
    j // group, so q and k are repeated per value head (HF Qwen3-Next's repeat_interleave)."""
    if group == 1:
        return kernel

    def run(q, k, *rest, **kwargs):
        return kernel(q.repeat_interleave(group, dim=2), k.repeat_interleave(group, dim=2), *rest, **kwargs)

    return run


def chunk_gated_delta_rule(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
    use_qk_l2norm: bool = False,
    output_head_major: bool = False,
    program_config=None,
    wy_inverse: ChunkGdnWyInverse = ChunkGdnWyInverse.AUTO,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
    eye=None, tril=None, ones=None, masks=None,
):
    """Chunked gated delta rule (prefill). Returns o ``[B, T, HV, V]`` (``[B*HV, T, V]`` with
    ``output_head_major``) and, if asked, the final state ``[B, HV, K, V]`` (fp32)."""
    op = "chunk_gated_delta_rule"
    inputs, dims = _gdn_inputs(op, q, k, v, g, beta, allow_flat=True)
    if use_qk_l2norm:  # 0.81.1's TT_FATAL(!use_qk_l2norm): the flat q/k path norms in-kernel, this flag does not
        raise TTFatal("chunk_gated_delta_rule: use_qk_l2norm not yet supported; pre-normalize q/k on host")
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size <= 0:
        raise TTFatal(f"{op}: chunk_size must be a positive int, got {chunk_size!r}")
    if dims.flat_v and dims.t % chunk_size:
        raise TTFatal(f"OPT-A flat v requires T ({dims.t}) to be a multiple of chunk_size ({chunk_size})")
    if dims.flat_qk:
        if chunk_size != 32:
            raise TTFatal("OPT-A flat q/k needs the in-kernel norm (chunk_size == 32)")
        if dims.t % chunk_size:
            raise TTFatal(f"OPT-A flat q/k requires T ({dims.t}) to be a multiple of chunk_size ({chunk_size})")
    return _gdn(op, G.chunk_gated_delta_rule, inputs, dims, scale, initial_state, None, output_final_state,
                dims.flat_qk, memory_config, {"chunk_size": chunk_size}, output_head_major)


def fused_recurrent_gated_delta_rule(
    q: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor, *,
    scale: float | None = None,
    initial_state: Tensor | None = None,
    initial_state_block_idx: Tensor | None = None,
    output_final_state: bool = False,
    output_per_token_state: bool = False,
    use_qk_l2norm: bool = False,
    memory_config: MemoryConfig | None = None,
    compute_kernel_config=None,
):
    """Token-by-token gated delta rule (decode). With ``initial_state_block_idx`` the state
    pool ``initial_state [N, H, K, V]`` is read at each row's index and updated IN PLACE
    (rows whose index is < 0 are skipped), as a per-slot recurrent state needs."""
    op = "fused_recurrent_gated_delta_rule"
    inputs, dims = _gdn_inputs(op, q, k, v, g, beta)
    _refuse(op, output_per_token_state=output_per_token_state)
    if use_qk_l2norm:  # 0.81.1's TT_FATAL(!use_qk_l2norm)
        raise TTFatal("fused_recurrent_gated_delta_rule: use_qk_l2norm not done here; L2-normalize q/k on host")
    return _gdn(op, G.recurrent_gated_delta_rule, inputs, dims, scale, initial_state, initial_state_block_idx,
                output_final_state, False, memory_config, {}, False)


def _unflatten(dims: _Dims, qq, kk, vv):
    """The kernel's [B, T, heads, D] views of flat q/k/v."""
    if dims.flat_qk:
        qq = qq.reshape(dims.bsz, dims.t, dims.hk, dims.dk)
        kk = kk.reshape(dims.bsz, dims.t, dims.hk, dims.dk)
    if dims.flat_v:
        vv = vv.reshape(dims.bsz, dims.t, dims.h, dims.dv)
    return qq, kk, vv


def _gdn(op, kernel, inputs, dims, scale, initial_state, block_idx, output_final_state, kernel_norm,
         memory_config, extra, head_major):
    q = inputs[0]
    bsz, t, h, dk, dv = dims.bsz, dims.t, dims.h, dims.dk, dims.dv
    kernel = _grouped(kernel, h // dims.hk)
    if initial_state is not None:
        require_device_tensor(op, "initial_state", initial_state)
    if block_idx is not None:
        if initial_state is None:
            raise TTFatal(f"{op}: initial_state_block_idx needs initial_state (the state pool)")
        require_device_tensor(op, "initial_state_block_idx", block_idx)
        _check_int(op, "initial_state_block_idx", block_idx)
        if tuple(block_idx.shape) != (bsz,):
            raise TTFatal(f"{op}: initial_state_block_idx must be [{bsz}], got {_describe(block_idx)}")
        return _gdn_pooled(op, kernel, inputs, scale, initial_state, block_idx, memory_config)
    state_shape = (bsz, h, dk, dv)
    if initial_state is not None and tuple(initial_state.shape) != state_shape:
        raise TTFatal(f"{op}: initial_state must be {list(state_shape)}, got {_describe(initial_state)}")
    extra_in = [initial_state] if initial_state is not None else []
    results: dict[int, tuple] = {}

    def compute(chip, *xs):
        if chip not in results:
            qq, kk, vv, gg, bb, *s = xs
            qq, kk, vv = _unflatten(dims, qq, kk, vv)
            results[chip] = kernel(qq, kk, vv, gg, bb, scale=scale, initial_state=s[0] if s else None,
                                   use_qk_l2norm=kernel_norm, **extra)
        return results[chip]

    def out_math(*xs):
        *args, chip = xs
        o, _ = compute(chip, *args)
        results.pop(chip, None) if not output_final_state else None
        return o.permute(0, 2, 1, 3).reshape(bsz * h, t, dv) if head_major else o

    out_shape = (bsz * h, t, dv) if head_major else (bsz, t, h, dv)
    out = run_op(op, inputs + extra_in, out_shape, q._dtype, Layout.TILE if head_major else q._layout, out_math,
                 memory_config=memory_config, chip_args=lambda i: (i,))
    if not output_final_state:
        return out

    def state_math(*xs):
        *args, chip = xs
        _, s = compute(chip, *args)
        results.pop(chip)
        return s

    state = run_op(op + " (final state)", inputs + extra_in, state_shape, DataType.FLOAT32, q._layout, state_math,
                   memory_config=memory_config, chip_args=lambda i: (i,))
    return out, state


def _gdn_pooled(op, kernel, inputs, scale, pool, block_idx, memory_config):
    q = inputs[0]
    bsz, t, h, dv = inputs[2].shape

    def math(qq, kk, vv, gg, bb, idx, pool_data):
        rows = [r for r in range(bsz) if int(idx[r]) >= 0]
        out = torch.zeros(bsz, t, h, dv)
        if not rows:
            return out
        sel = torch.tensor(rows)
        slots = idx[sel].to(torch.int64)
        if int(slots.max()) >= pool_data.shape[0]:
            raise TTFatal(f"{op}: initial_state_block_idx {idx.tolist()} exceeds the state pool of {pool_data.shape[0]}")
        o, s = kernel(qq[sel], kk[sel], vv[sel], gg[sel], bb[sel], scale=scale,
                      initial_state=logical(pool_data, pool)[slots])
        pool_data[slots] = s.to(pool_data.dtype)
        out[sel] = o
        return out

    return run_op(op, inputs + [block_idx], (bsz, t, h, dv), q._dtype, q._layout, math,
                  memory_config=memory_config, pool=pool)


def gated_delta_attn_seq(L_unit: Tensor, v_beta_sc: Tensor, k_bd_sc: Tensor, intra_attn: Tensor,  # noqa: N803
                         q_decay: Tensor, k_decay_t: Tensor, dl_exp: Tensor, L_inv: Tensor, *,  # noqa: N803
                         initial_state: Tensor | None = None, memory_config: MemoryConfig | None = None,
                         compute_kernel_config=None):
    """ttnn.transformer.gated_delta_attn_seq: the blocked forward-substitution + state scan of the
    seq adapter (ttnn_delta_rule_seq.py), over BH rows and NC chunks of C tokens. 0.81.1's golden:
    per chunk, ``v_cor = L_unit^-1 v_beta_sc``, ``k_cum = L_unit^-1 k_bd_sc`` (lower triangular),
    ``v_new = v_cor - k_cum S``, ``o = q_decay S + intra_attn v_new``,
    ``S = S * dl_exp + k_decay_t v_new``. ``L_inv`` (the diagonal blocks' inverses the kernel
    uses) only speeds the solve: values are the solve's. Returns ``(o [BH, NC, C, V], S [BH, K, V])``,
    fp32."""
    op = "gated_delta_attn_seq"
    named = {"L_unit": L_unit, "v_beta_sc": v_beta_sc, "k_bd_sc": k_bd_sc, "intra_attn": intra_attn,
             "q_decay": q_decay, "k_decay_t": k_decay_t, "dl_exp": dl_exp, "L_inv": L_inv}
    for name, t in named.items():
        require_device_tensor(op, name, t)
    if len(q_decay.shape) != 4:
        raise TTFatal(f"{op}: q_decay must be [BH, NC, C, K], got {_describe(q_decay)}")
    bh, nc, c, kd = q_decay.shape
    vd = v_beta_sc.shape[-1]
    want = {"L_unit": (bh, nc, c, c), "v_beta_sc": (bh, nc, c, vd), "k_bd_sc": (bh, nc, c, kd),
            "intra_attn": (bh, nc, c, c), "k_decay_t": (bh, nc, kd, c)}
    for name, shape in want.items():
        if tuple(named[name].shape) != shape:
            raise TTFatal(f"{op}: {name} must be {list(shape)}, got {_describe(named[name])}")
    if dl_exp.logical_volume() != bh * nc:
        raise TTFatal(f"{op}: dl_exp must hold one decay per (row, chunk) [{bh}, {nc}, ...], got {_describe(dl_exp)}")
    inputs = [named[n] for n in ("L_unit", "v_beta_sc", "k_bd_sc", "intra_attn", "q_decay", "k_decay_t", "dl_exp")]
    if initial_state is not None:
        require_device_tensor(op, "initial_state", initial_state)
        if tuple(initial_state.shape) != (bh, kd, vd):
            raise TTFatal(f"{op}: initial_state must be [{bh}, {kd}, {vd}], got {_describe(initial_state)}")
        inputs.append(initial_state)
    require_same_device(op, {**named, **({"initial_state": initial_state} if initial_state is not None else {})})
    results: dict[int, tuple] = {}

    def compute(chip, lu, vb, kb, ia, qd, kdt, dl, *s):
        if chip not in results:
            state = s[0] if s else torch.zeros(bh, kd, vd)  # fp32 throughout, as the kernel
            dl = dl.reshape(bh, nc)
            outs = []
            for j in range(nc):
                v_cor = torch.linalg.solve_triangular(lu[:, j], vb[:, j], upper=False)
                k_cum = torch.linalg.solve_triangular(lu[:, j], kb[:, j], upper=False)
                v_new = v_cor - k_cum @ state
                outs.append(qd[:, j] @ state + ia[:, j] @ v_new)
                state = state * dl[:, j, None, None] + kdt[:, j] @ v_new
            results[chip] = (torch.stack(outs, dim=1), state)
        return results[chip]

    def out_math(*xs):
        *args, chip = xs
        return compute(chip, *args)[0]

    def state_math(*xs):
        *args, chip = xs
        return results.pop(chip)[1] if chip in results else compute(chip, *args)[1]

    o = run_op(op, inputs, (bh, nc, c, vd), DataType.FLOAT32, Layout.TILE, out_math, memory_config=memory_config,
               chip_args=lambda i: (i,))
    s = run_op(op + " (final state)", inputs, (bh, kd, vd), DataType.FLOAT32, Layout.TILE, state_math,
               memory_config=memory_config, chip_args=lambda i: (i,))
    return o, s
