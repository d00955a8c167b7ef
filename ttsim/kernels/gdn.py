"""Gated delta rule (Gated DeltaNet linear attention) kernels on torch tensors, fp32.

Layout (flash-linear-attention's, which ttnn's gated-delta-rule ops follow): q, k
``[B, T, H, K]``, v ``[B, T, H, V]``, g (log decay, <= 0) and beta ``[B, T, H]``, state
``[B, H, K, V]``. Per token: S <- S * exp(g); S <- S + k (beta (v - S^T k))^T; o = S^T q.

The chunked form uses the WY representation: within a chunk of C tokens,
T = (I + strict_tril(beta K K^T * decay))^-1 turns C sequential rank-1 updates into
matmuls, so prefill equals token-by-token decode up to float rounding.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _prep(q, k, v, g, beta, scale, use_qk_l2norm):
    q, k, v, g, beta = (t.to(torch.float32) for t in (q, k, v, g, beta))
    if use_qk_l2norm:
        q, k = l2norm(q), l2norm(k)
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return q * scale, k, v, g, beta


def recurrent_gated_delta_rule(q, k, v, g, beta, *, scale=None, initial_state=None, use_qk_l2norm=False):
    """Token by token. Returns (o ``[B, T, H, V]``, final state ``[B, H, K, V]``)."""
    q, k, v, g, beta = _prep(q, k, v, g, beta, scale, use_qk_l2norm)
    b, t, h, dk = k.shape
    dv = v.shape[-1]
    state = torch.zeros(b, h, dk, dv) if initial_state is None else initial_state.to(torch.float32).clone()
    out = torch.empty(b, t, h, dv)
    for i in range(t):
        state = state * g[:, i].exp()[..., None, None]
        k_i = k[:, i]
        mem = torch.einsum("bhkv,bhk->bhv", state, k_i)
        delta = (v[:, i] - mem) * beta[:, i][..., None]
        state = state + k_i[..., :, None] * delta[..., None, :]
        out[:, i] = torch.einsum("bhkv,bhk->bhv", state, q[:, i])
    return out, state


def chunk_gated_delta_rule(q, k, v, g, beta, *, scale=None, initial_state=None, chunk_size=64,
                           use_qk_l2norm=False):
    """Chunk-parallel form. Returns (o ``[B, T, H, V]``, final state ``[B, H, K, V]``)."""
    q, k, v, g, beta = _prep(q, k, v, g, beta, scale, use_qk_l2norm)
    b, t, h, dk = k.shape
    dv = v.shape[-1]
    c = chunk_size
    pad = (-t) % c
    # [B, H, T, D] then [B, H, N, C, D]
    q, k, v = (F.pad(x.transpose(1, 2), (0, 0, 0, pad)) for x in (q, k, v))
    g, beta = (F.pad(x.transpose(1, 2), (0, pad)) for x in (g, beta))
    n = (t + pad) // c
    q, k, v = (x.reshape(b, h, n, c, -1) for x in (q, k, v))
    g, beta = g.reshape(b, h, n, c), beta.reshape(b, h, n, c)
    g = g.cumsum(-1)
    decay = (g[..., :, None] - g[..., None, :]).tril().exp().tril()  # [B,H,N,C,C]
    k_beta = k * beta[..., None]
    strict = torch.ones(c, c, dtype=torch.bool).tril(-1)
    lower = (k_beta @ k.transpose(-1, -2) * decay) * strict
    eye = torch.eye(c)
    wy = torch.linalg.solve_triangular(eye + lower, eye.expand_as(lower), upper=False, unitriangular=True)
    u = wy @ (v * beta[..., None])
    w = wy @ (k_beta * g.exp()[..., None])
    state = torch.zeros(b, h, dk, dv) if initial_state is None else initial_state.to(torch.float32).clone()
    causal = torch.ones(c, c, dtype=torch.bool).tril()
    out = torch.empty(b, h, n, c, dv)
    for i in range(n):
        q_i, k_i, g_i = q[:, :, i], k[:, :, i], g[:, :, i]
        v_new = u[:, :, i] - w[:, :, i] @ state
        intra = (q_i @ k_i.transpose(-1, -2) * decay[:, :, i]) * causal
        out[:, :, i] = (q_i * g_i.exp()[..., None]) @ state + intra @ v_new
        g_last = g_i[..., -1]
        state = state * g_last.exp()[..., None, None] + (k_i * (g_last[..., None] - g_i).exp()[..., None]).transpose(
            -1, -2
        ) @ v_new
    out = out.reshape(b, h, n * c, dv)[:, :, :t].transpose(1, 2)
    return out, state
