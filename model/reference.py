"""Float64 torch reference of the model's math, written independently of model/qwen36.py
and of ttsim (it shares only ModelConfig and the weights dict).

The reference is sequence-stateful (``ReferenceSession``): it keeps a K/V list per
attention layer and the conv window and recurrent state per GDN layer, so chunked
prefill, token-by-token prefill and decode-after-prefill can be compared. The GDN
recurrence is the plain token-by-token gated delta rule (no chunked/WY form), so the
device's chunked kernel is checked against the definition.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .config import ModelConfig

F64 = torch.float64


def _rms(x: torch.Tensor, w: torch.Tensor | None, eps: float, plus_one: bool = True) -> torch.Tensor:
    y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    if w is None:
        return y
    return y * ((1.0 + w) if plus_one else w)


def _l2n(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def _rope(x: torch.Tensor, positions: torch.Tensor, rotary_dim: int, theta: float) -> torch.Tensor:
    """Partial HF RoPE on the first rotary_dim channels. x [T, H, D], positions [T]."""
    half = rotary_dim // 2
    inv = 1.0 / (theta ** (torch.arange(0, rotary_dim, 2, dtype=F64) / rotary_dim))
    ang = positions.to(F64)[:, None] * inv[None, :]  # [T, half]
    emb = torch.cat([ang, ang], -1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    xr, xp = x[..., :rotary_dim], x[..., rotary_dim:]
    rot = torch.cat([-xr[..., half:], xr[..., :half]], -1)
    return torch.cat([xr * cos + rot * sin, xp], -1)


class ReferenceSession:
    """One sequence through the float64 reference."""

    def __init__(self, config: ModelConfig, weights: dict[str, torch.Tensor]):
        self.c = config
        self.w = {k: v.detach().to(F64) for k, v in weights.items()}
        self.pos = 0
        c = config
        self.k_cache: dict[int, torch.Tensor] = {}
        self.v_cache: dict[int, torch.Tensor] = {}
        self.conv: dict[int, torch.Tensor] = {}
        self.state: dict[int, torch.Tensor] = {}
        for i in range(c.num_layers):
            if c.is_attention_layer(i):
                self.k_cache[i] = torch.zeros(0, c.num_kv_heads, c.head_dim, dtype=F64)
                self.v_cache[i] = torch.zeros(0, c.num_kv_heads, c.head_dim, dtype=F64)
            else:
                self.conv[i] = torch.zeros(c.conv_kernel_size - 1, c.conv_channels, dtype=F64)
                self.state[i] = torch.zeros(c.linear_num_value_heads, c.linear_key_head_dim,
                                            c.linear_value_head_dim, dtype=F64)

    # -- blocks ----------------------------------------------------------------------
    def _attention(self, i: int, x: torch.Tensor, last_only: bool = False) -> torch.Tensor:
        c, w = self.c, self.w
        p = f"layers.{i}.self_attn."
        t = x.shape[0]
        nh, nkv, d = c.num_heads, c.num_kv_heads, c.head_dim
        qg = (x @ w[p + "q_proj"].T).view(t, nh, 2 * d)
        q, gate = qg[..., :d], qg[..., d:]
        k = (x @ w[p + "k_proj"].T).view(t, nkv, d)
        v = (x @ w[p + "v_proj"].T).view(t, nkv, d)
        q = _rms(q, w[p + "q_norm"], c.rms_norm_eps)
        k = _rms(k, w[p + "k_norm"], c.rms_norm_eps)
        positions = torch.arange(self.pos, self.pos + t)
        q = _rope(q, positions, c.rotary_dim, c.rope_theta)
        k = _rope(k, positions, c.rotary_dim, c.rope_theta)
        if last_only:  # K/V of every position, the query of the last one only
            q, gate, positions, t = q[-1:], gate[-1:], positions[-1:], 1
        self.k_cache[i] = torch.cat([self.k_cache[i], k])
        self.v_cache[i] = torch.cat([self.v_cache[i], v])
        kk, vv = self.k_cache[i], self.v_cache[i]  # [S, nkv, d]
        s_len = kk.shape[0]
        group = nh // nkv
        kk = kk.repeat_interleave(group, dim=1)
        vv = vv.repeat_interleave(group, dim=1)
        scores = torch.einsum("thd,shd->hts", q, kk) / math.sqrt(d)
        qpos = positions[:, None]
        kpos = torch.arange(s_len)[None, :]
        scores = scores.masked_fill((kpos > qpos)[None], float("-inf"))
        probs = torch.softmax(scores, -1)
        o = torch.einsum("hts,shd->thd", probs, vv)
        o = o * torch.sigmoid(gate)
        return o.reshape(t, nh * d) @ w[p + "o_proj"].T

    def _gdn(self, i: int, x: torch.Tensor) -> torch.Tensor:
        c, w = self.c, self.w
        p = f"layers.{i}.linear_attn."
        t = x.shape[0]
        hk, hv, dk, dv = c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim, \
            c.linear_value_head_dim
        qkvz = x @ w[p + "in_proj_qkvz"].T
        nq = hk * dk
        qkv, z = qkvz[:, : 2 * nq + hv * dv], qkvz[:, 2 * nq + hv * dv:]
        ba = x @ w[p + "in_proj_ba"].T
        b, a = ba[:, :hv], ba[:, hv:]
        # causal depthwise conv1d over [q, k, v], state = last K-1 inputs
        kern = w[p + "conv1d"][:, 0, :]  # [C, K]
        ksz = c.conv_kernel_size
        xpad = torch.cat([self.conv[i], qkv])  # [K-1+T, C]
        conv = sum(xpad[j:j + t] * kern[:, j] for j in range(ksz))
        self.conv[i] = xpad[-(ksz - 1):].clone()
        conv = F.silu(conv)
        q = conv[:, :nq].reshape(t, hk, dk)
        k = conv[:, nq:2 * nq].reshape(t, hk, dk)
        v = conv[:, 2 * nq:].reshape(t, hv, dv)
        q, k = _l2n(q), _l2n(k)
        rep = hv // hk
        q = q.repeat_interleave(rep, dim=1)
        k = k.repeat_interleave(rep, dim=1)
        beta = torch.sigmoid(b)
        g = -torch.exp(w[p + "A_log"]) * F.softplus(a + w[p + "dt_bias"])
        scale = dk ** -0.5
        s = self.state[i].clone()
        out = torch.empty(t, hv, 1, dv, dtype=F64)
        decay = torch.exp(g)[:, :, None, None]  # [T, Hv, 1, 1]
        kr, kc, qr = k[:, :, None, :], k[:, :, :, None], (q * scale)[:, :, None, :]
        vb, bb = v[:, :, None, :], beta[:, :, None, None]
        for j in range(t):  # S <- S e^g;  S <- S + k (beta (v - S^T k))^T;  o = S^T q / sqrt(Dk)
            s.mul_(decay[j])
            delta = (vb[j] - torch.bmm(kr[j], s)) * bb[j]
            s.baddbmm_(kc[j], delta)
            torch.bmm(qr[j], s, out=out[j])
        out = out[:, :, 0, :]
        self.state[i] = s
        o = _rms(out, w[p + "norm"], c.rms_norm_eps, plus_one=False)
        o = o * F.silu(z.view(t, hv, dv))
        return o.reshape(t, hv * dv) @ w[p + "out_proj"].T

    def _mlp(self, i: int, x: torch.Tensor) -> torch.Tensor:
        w = self.w
        p = f"layers.{i}.mlp."
        return (F.silu(x @ w[p + "gate_proj"].T) * (x @ w[p + "up_proj"].T)) @ w[p + "down_proj"].T

    # -- public ----------------------------------------------------------------------
    def forward(self, tokens, *, last_only: bool = False) -> torch.Tensor:
        """Run ``tokens`` (continuing the sequence); float64 logits [T, vocab] (or [1, vocab]
        of the last token with ``last_only``: the final layer then attends for the last query
        only, which makes long-context references O(T) when the last layer is attention)."""
        c, w = self.c, self.w
        ids = torch.as_tensor(list(tokens), dtype=torch.long)
        if ids.numel() == 0:
            raise ValueError("tokens must be non-empty")
        if self.pos + ids.numel() > c.max_context:
            raise ValueError(f"sequence would reach {self.pos + ids.numel()} > max_context {c.max_context}")
        x = w["embed_tokens"][ids]
        for i in range(c.num_layers):
            hx = _rms(x, w[f"layers.{i}.input_layernorm"], c.rms_norm_eps)
            final = last_only and i == c.num_layers - 1  # only the last position feeds the logits
            if c.is_attention_layer(i):
                mixed = self._attention(i, hx, last_only=final)
            else:
                mixed = self._gdn(i, hx)[-1:] if final else self._gdn(i, hx)
            x = (x[-1:] if final else x) + mixed
            hx = _rms(x, w[f"layers.{i}.post_attention_layernorm"], c.rms_norm_eps)
            x = x + self._mlp(i, hx)
        self.pos += ids.numel()
        x = _rms(x, w["norm"], c.rms_norm_eps)
        return x @ w["lm_head"].T

    def prefill(self, tokens, *, last_only: bool = False) -> torch.Tensor:
        return self.forward(tokens, last_only=last_only)

    def decode(self, token: int) -> torch.Tensor:
        """One token; float64 logits [vocab]."""
        return self.forward([int(token)])[0]


def reference_prefill(config: ModelConfig, weights: dict[str, torch.Tensor], tokens, *,
                      chunk: int | None = None) -> torch.Tensor:
    """Float64 logits [L, vocab] of every prompt position (optionally in chunks)."""
    sess = ReferenceSession(config, weights)
    tokens = list(tokens)
    if chunk is None:
        return sess.forward(tokens)
    return torch.cat([sess.forward(tokens[s:s + chunk]) for s in range(0, len(tokens), chunk)])


def reference_last_logits(config: ModelConfig, weights: dict[str, torch.Tensor], tokens, *,
                          chunk: int = 2048) -> torch.Tensor:
    """Float64 logits [vocab] of the last prompt token (long contexts: chunked, last query only)."""
    sess = ReferenceSession(config, weights)
    tokens = list(tokens)
    starts = list(range(0, len(tokens), chunk))
    for s in starts[:-1]:
        sess.forward(tokens[s:s + chunk], last_only=True)  # state only; logits discarded
    return sess.forward(tokens[starts[-1]:], last_only=True)[-1]
