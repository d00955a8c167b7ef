"""Deterministic synthetic weights (no downloads), HF naming and [out, in] Linear layout.

Scaling keeps activations O(1) through the layers: embeddings ~N(0, 1), projections
~N(0, 1/fan_in) (std 1/sqrt(fan_in)), residual-output projections a further
1/sqrt(2 * num_layers) smaller, (1 + w) RMSNorm weights small around 0, the gated
RMSNorm weight (plain w) around 1, A_log / dt_bias as Qwen3-Next / Mamba2 initialise
them. The LM head is scaled so logits are peaky (std ~4): greedy decoding is then
prompt-dependent and its argmax margins are far above bf16 noise.
"""

from __future__ import annotations

import math

import torch

from .config import ModelConfig

LM_HEAD_GAIN = 4.0


def _normal(gen: torch.Generator, shape, std: float) -> torch.Tensor:
    return torch.randn(*shape, generator=gen, dtype=torch.float32) * std


def generate_weights(config: ModelConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """All parameters as float32 torch tensors, a pure function of (config, seed)."""
    config.validate()
    gen = torch.Generator().manual_seed(int(seed))
    c = config
    h = c.hidden_size
    resid = 1.0 / math.sqrt(2 * c.num_layers)
    w: dict[str, torch.Tensor] = {"embed_tokens": _normal(gen, (c.vocab_size, h), 1.0)}

    def lin(name, out_f, in_f, gain=1.0):
        w[name] = _normal(gen, (out_f, in_f), gain / math.sqrt(in_f))

    def norm_w(name, n):
        w[name] = _normal(gen, (n,), 0.1)

    for i in range(c.num_layers):
        p = f"layers.{i}."
        norm_w(p + "input_layernorm", h)
        norm_w(p + "post_attention_layernorm", h)
        if c.is_attention_layer(i):
            a = p + "self_attn."
            lin(a + "q_proj", c.num_heads * c.head_dim * 2, h)
            lin(a + "k_proj", c.num_kv_heads * c.head_dim, h)
            lin(a + "v_proj", c.num_kv_heads * c.head_dim, h)
            lin(a + "o_proj", h, c.num_heads * c.head_dim, resid)
            norm_w(a + "q_norm", c.head_dim)
            norm_w(a + "k_norm", c.head_dim)
        else:
            g = p + "linear_attn."
            hk, hv = c.linear_num_key_heads, c.linear_num_value_heads
            dk, dv = c.linear_key_head_dim, c.linear_value_head_dim
            lin(g + "in_proj_qkvz", 2 * hk * dk + 2 * hv * dv, h)
            lin(g + "in_proj_ba", 2 * hv, h)
            k = c.conv_kernel_size
            w[g + "conv1d"] = _normal(gen, (c.conv_channels, 1, k), 1.0 / math.sqrt(k))
            a_init = torch.rand(hv, generator=gen) * 15.0 + 1.0  # A ~ U(1, 16)
            w[g + "A_log"] = torch.log(a_init)
            dt = torch.exp(torch.rand(hv, generator=gen) * (math.log(0.1) - math.log(1e-3)) + math.log(1e-3))
            w[g + "dt_bias"] = dt + torch.log(-torch.expm1(-dt))  # inverse softplus
            w[g + "norm"] = 1.0 + _normal(gen, (dv,), 0.1)
            lin(g + "out_proj", h, hv * dv, resid)
        m = p + "mlp."
        lin(m + "gate_proj", c.intermediate_size, h)
        lin(m + "up_proj", c.intermediate_size, h)
        lin(m + "down_proj", h, c.intermediate_size, resid)
    norm_w("norm", h)
    lin("lm_head", c.vocab_size, h, LM_HEAD_GAIN)
    return {k: v.contiguous() for k, v in w.items()}
