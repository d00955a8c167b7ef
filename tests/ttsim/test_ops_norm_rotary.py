"""rms_norm, layer_norm, softmax and the rotary embeddings against plain torch formulas."""

import pytest
import torch

import ttsim

BF16_TOL = dict(rtol=1.6e-2, atol=1.6e-2)  # a couple of bf16 ulps on O(1) values


def bf(x: torch.Tensor) -> torch.Tensor:
    """The bf16-rounded value of x, in float32 (what the device stores)."""
    return x.to(torch.bfloat16).float()


def dev(x, device, layout=ttsim.TILE_LAYOUT, dtype=ttsim.bfloat16, memory_config=None):
    return ttsim.from_torch(x, dtype=dtype, layout=layout, device=device, memory_config=memory_config)


def back(t) -> torch.Tensor:
    return ttsim.to_torch(t).float()


# -- rms_norm / layer_norm / softmax ------------------------------------------------------

def test_rms_norm_matches_torch_with_one_plus_w_weight(device):
    g = torch.Generator().manual_seed(0)
    x = bf(torch.randn(1, 1, 40, 64, generator=g))  # 40 rows: the padded tile rows must not leak in
    w = bf(1 + 0.1 * torch.randn(64, generator=g))  # Qwen's (1 + w): the model passes w + 1
    eps = 1e-6
    out = ttsim.rms_norm(dev(x, device), epsilon=eps, weight=dev(w.reshape(1, 1, 1, 64), device))
    want = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + eps) * w
    assert out.shape == ttsim.Shape([1, 1, 40, 64])
    torch.testing.assert_close(back(out), want, **BF16_TOL)


def test_rms_norm_row_major_stick_weight_residual_and_default_eps(device):
    g = torch.Generator().manual_seed(1)
    x, r = bf(torch.randn(1, 1, 32, 64, generator=g)), bf(torch.randn(1, 1, 32, 64, generator=g))
    w = bf(torch.randn(64, generator=g))
    wt = dev(w.reshape(1, 1, 2, 32), device, layout=ttsim.ROW_MAJOR_LAYOUT)  # tt-metal's "sticks" form
    out = ttsim.rms_norm(dev(x, device), weight=wt, residual_input_tensor=dev(r, device))
    h = x + r
    want = h * torch.rsqrt(h.square().mean(-1, keepdim=True) + 1e-12) * w
    torch.testing.assert_close(back(out), want, **BF16_TOL)


def test_layer_norm_matches_torch(device):
    g = torch.Generator().manual_seed(2)
    x = bf(torch.randn(2, 32, 96, generator=g))
    w, b = bf(torch.randn(96, generator=g)), bf(torch.randn(96, generator=g))
    out = ttsim.layer_norm(dev(x, device), epsilon=1e-5, weight=dev(w.reshape(1, 96), device),
                           bias=dev(b.reshape(1, 96), device))
    want = torch.nn.functional.layer_norm(x, (96,), w, b, eps=1e-5)
    torch.testing.assert_close(back(out), want, **BF16_TOL)


@pytest.mark.parametrize("dim", [-1, 2])
def test_softmax_is_stable_and_excludes_tile_padding(device, dim):
    g = torch.Generator().manual_seed(3)
    x = bf(torch.randn(1, 2, 33, 50, generator=g) * 4)
    x[0, 0, 0, 0] = 1000.0  # overflows exp() unless the max is subtracted
    out = back(ttsim.softmax(dev(x, device), dim))
    want = torch.softmax(x, dim=dim)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, want, rtol=1.6e-2, atol=2e-3)


def test_norm_bad_inputs_name_the_argument(device):
    x = dev(torch.ones(1, 1, 32, 64), device)
    with pytest.raises(ttsim.TTFatal, match=r"rms_norm: weight must hold the 64 values"):
        ttsim.rms_norm(x, weight=dev(torch.ones(1, 1, 1, 32), device))
    with pytest.raises(ttsim.TTFatal, match=r"rms_norm: input_tensor must be in Layout.TILE"):
        ttsim.rms_norm(dev(torch.ones(1, 1, 32, 64), device, layout=ttsim.ROW_MAJOR_LAYOUT))
    with pytest.raises(ttsim.TTFatal, match=r"softmax: dim=4 is out of range"):
        ttsim.softmax(x, 4)


# -- rotary ------------------------------------------------------------------------------

def hf_cos_sin(positions: torch.Tensor, dim: int, base: float = 10000.0):
    """HF's cache: emb = cat(freqs, freqs)."""
    inv = 1.0 / base ** (torch.arange(0, dim, 2).float() / dim)
    freqs = positions.float()[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return bf(emb.cos()), bf(emb.sin())


def hf_rope(x, cos, sin):
    """HF apply_rotary_pos_emb: q * cos + rotate_half(q) * sin."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


def test_rotary_embedding_hf_prefill_partial_rope_by_slicing(device):
    # Qwen-style partial RoPE: head_dim 128, rotary_dim = 128 / 4 = 32, rest passes through
    g = torch.Generator().manual_seed(4)
    heads, seq, hd, rd = 2, 40, 128, 32
    x = bf(torch.randn(1, heads, seq, hd, generator=g))
    cos, sin = hf_cos_sin(torch.arange(64), rd)  # cache longer than the prompt
    tx = dev(x, device)
    rot = ttsim.slice(tx, [0, 0, 0, 0], [1, heads, seq, rd])
    rest = ttsim.slice(tx, [0, 0, 0, rd], [1, heads, seq, hd])
    roped = ttsim.experimental.rotary_embedding_hf(
        rot, dev(cos.reshape(1, 1, 64, rd), device), dev(sin.reshape(1, 1, 64, rd), device))
    out = back(ttsim.concat([roped, rest], dim=-1))
    want = torch.cat((hf_rope(x[..., :rd], cos[:seq], sin[:seq]), x[..., rd:]), dim=-1)
    torch.testing.assert_close(out, want, **BF16_TOL)
    assert torch.equal(out[..., rd:], x[..., rd:])


def test_rotary_embedding_hf_decode_uses_each_users_position(device):
    g = torch.Generator().manual_seed(5)
    batch, heads, hd = 4, 3, 64
    pos = torch.tensor([0, 7, 100, 3])
    x = bf(torch.randn(1, batch, heads, hd, generator=g))
    cos, sin = hf_cos_sin(pos, hd)  # [batch, hd]
    sharded = ttsim.MemoryConfig(ttsim.TensorMemoryLayout.HEIGHT_SHARDED, ttsim.BufferType.L1)
    out = ttsim.experimental.rotary_embedding_hf(
        dev(x, device, memory_config=sharded),
        dev(cos.reshape(1, batch, 1, hd), device, memory_config=sharded),
        dev(sin.reshape(1, batch, 1, hd), device, memory_config=sharded),
        is_decode_mode=True,
    )
    want = hf_rope(x, cos.reshape(1, batch, 1, hd), sin.reshape(1, batch, 1, hd))
    torch.testing.assert_close(back(out), want, **BF16_TOL)


def test_rotary_embedding_prefill_and_token_index(device):
    g = torch.Generator().manual_seed(6)
    hd = 64
    cos, sin = hf_cos_sin(torch.arange(48), hd)
    tc, ts = dev(cos.reshape(1, 1, 48, hd), device), dev(sin.reshape(1, 1, 48, hd), device)
    x = bf(torch.randn(1, 2, 20, hd, generator=g))
    out = ttsim.experimental.rotary_embedding(dev(x, device), tc, ts)
    torch.testing.assert_close(back(out), hf_rope(x, cos[:20], sin[:20]), **BF16_TOL)
    xd = bf(torch.randn(1, 1, 8, hd, generator=g))  # decode: [seq=1, 1, batch, hd]
    outd = ttsim.experimental.rotary_embedding(dev(xd, device), tc, ts, 17)
    torch.testing.assert_close(back(outd), hf_rope(xd, cos[17], sin[17]), **BF16_TOL)


def test_rotary_embedding_llama_interleaved_with_trans_mat(device):
    g = torch.Generator().manual_seed(7)
    heads, seq, hd = 2, 32, 64
    x = bf(torch.randn(1, heads, seq, hd, generator=g))
    inv = 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd)
    freqs = torch.arange(seq).float()[:, None] * inv[None, :]  # [seq, hd/2]
    cos = bf(freqs.cos().repeat_interleave(2, dim=-1))
    sin = bf(freqs.sin().repeat_interleave(2, dim=-1))
    tm = torch.zeros(1, 1, 32, 32)
    tm[..., torch.arange(0, 32, 2), torch.arange(1, 32, 2)] = 1
    tm[..., torch.arange(1, 32, 2), torch.arange(0, 32, 2)] = -1
    out = ttsim.experimental.rotary_embedding_llama(
        dev(x, device), dev(cos.reshape(1, 1, seq, hd), device), dev(sin.reshape(1, 1, seq, hd), device),
        dev(tm, device))
    # Meta llama: pairs (x[2i], x[2i+1]) rotated by the complex number e^{i * pos * inv[i]}
    xc = torch.view_as_complex(x.reshape(1, heads, seq, hd // 2, 2).contiguous())
    want = torch.view_as_real(xc * torch.polar(torch.ones_like(freqs), freqs)).reshape(x.shape)
    torch.testing.assert_close(back(out), want, **BF16_TOL)


def test_rotary_bad_inputs_name_the_argument(device):
    x = dev(torch.ones(1, 2, 32, 128), device)
    narrow = dev(torch.ones(1, 1, 32, 32), device)
    with pytest.raises(ttsim.TTFatal, match=r"rotary_embedding_hf: cos_cache last dim \(32\) must equal"):
        ttsim.experimental.rotary_embedding_hf(x, narrow, narrow)
    short = dev(torch.ones(1, 1, 16, 128), device)
    with pytest.raises(ttsim.TTFatal, match=r"cos_cache seq_len \(16\) must be >= input_tensor seq_len \(32\)"):
        ttsim.experimental.rotary_embedding_hf(x, short, short)
    full = dev(torch.ones(1, 2, 1, 128), device)
    with pytest.raises(ttsim.TTFatal, match=r"is_decode_mode=True needs input_tensor HEIGHT_SHARDED"):
        ttsim.experimental.rotary_embedding_hf(dev(torch.ones(1, 2, 4, 128), device), full, full,
                                               is_decode_mode=True)
    with pytest.raises(ttsim.TTFatal, match=r"rotary_embedding_llama: trans_mat must be \[1, 1, 32, 32\]"):
        c = dev(torch.ones(1, 1, 32, 128), device)
        ttsim.experimental.rotary_embedding_llama(x, c, c, dev(torch.ones(1, 1, 32, 64), device))
