"""SDPA variants that change values: sliding windows, attention sinks, non-causal decode
masks, non-paged decode. Each is checked against a float64 reference written here from
tt-metal's documented semantics (its unit tests' reference masks), at tt-metal's bars:
prefill sliding window bfp8 RMSE < 0.01, attention sink RMSE < 0.02, decode PCC >= 0.99.
Joint attention is checked against torch's SDPA over the concatenated main and joint tokens."""

import math

import pytest
import torch
import torch.nn.functional as F

import ttsim
from model.pcc import comp_pcc

CFG = dict(compute_with_storage_grid_size=ttsim.CoreCoord(13, 10))


def _tile(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device)


def _ints(x, device):
    return ttsim.from_torch(torch.tensor(x, dtype=torch.int32), dtype=ttsim.int32, device=device)


def _fa_rand(g, *shape):
    """tt-metal's SDPA test distribution: normal plus rare 10x outliers (written from its description)."""
    return torch.randn(shape, generator=g) + torch.randn(shape, generator=g) * 10 * torch.bernoulli(
        torch.full(shape, 0.001), generator=g)


def _ref(q, k, v, *, causal=True, window=None, sink=None, mask=None, q_offset=0, scale=None):
    """float64 attention. q [b, nqh, sq, d], k/v [b, nkv, sk, d]; keys are positions 0..sk-1,
    query i is at q_offset + i. sink: per-head logit (already scaled)."""
    q, k, v = q.double(), k.double(), v.double()
    b, nqh, sq, d = q.shape
    nkv, sk = k.shape[1], k.shape[2]
    k, v = k.repeat_interleave(nqh // nkv, 1), v.repeat_interleave(nqh // nkv, 1)
    s = q @ k.transpose(-1, -2) * (d ** -0.5 if scale is None else scale)
    qpos = (q_offset + torch.arange(sq))[:, None]
    kpos = torch.arange(sk)[None, :]
    hide = torch.zeros(sq, sk, dtype=torch.bool)
    if causal:
        hide |= kpos > qpos
        if window:
            hide |= kpos <= qpos - window
    elif window:
        hide |= (kpos < qpos - window // 2) | (kpos > qpos + window // 2)
    s = s.masked_fill(hide, float("-inf"))
    if mask is not None:
        s = s + mask.double()
    if sink is not None:
        col = sink.double().view(1, nqh, 1, 1).expand(b, nqh, sq, 1)
        return torch.softmax(torch.cat([s, col], -1), -1)[..., :-1] @ v
    return torch.softmax(s, -1) @ v


def _rmse(a, b):
    return torch.sqrt(((a.double() - b.double()) ** 2).mean()).item()


def _q(x, dtype):
    """What the device holds for x after from_torch (inputs are compared after their own rounding)."""
    return ttsim.to_torch(ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT)).float()


def test_prefill_sliding_window_bfp8_meets_tt_metal_rmse(device):
    g = torch.Generator().manual_seed(11)
    b, nh, nkv, s, d, w = 1, 4, 1, 512, 64, 128
    q, k, v = _fa_rand(g, b, nh, s, d), _fa_rand(g, b, nkv, s, d), _fa_rand(g, b, nkv, s, d)
    cfg = ttsim.SDPAProgramConfig(**CFG, q_chunk_size=128, k_chunk_size=128)
    out = ttsim.transformer.scaled_dot_product_attention(
        _tile(q, device, ttsim.bfloat8_b), _tile(k, device, ttsim.bfloat8_b), _tile(v, device, ttsim.bfloat8_b),
        is_causal=True, sliding_window_size=w, program_config=cfg)
    got = ttsim.to_torch(out)
    want = _ref(q, k, v, window=w)
    assert _rmse(want, got) < 0.01, _rmse(want, got)
    ok, pcc = comp_pcc(want, got, 0.994)
    assert ok, pcc
    # the window really bites: plain causal attention is far from it
    assert _rmse(_ref(q, k, v), got) > 0.05


def test_prefill_window_rows_equal_attention_over_their_last_w_keys(device):
    """Independent of the mask reference: row i with window w is causal attention of that
    one query over keys i-w+1..i, computed by the plain (windowless) op on sliced inputs."""
    g = torch.Generator().manual_seed(12)
    d, w, s = 32, 40, 96
    q, k, v = (torch.randn(1, 2, s, d, generator=g) for _ in range(3))
    full = ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(
        _tile(q, device), _tile(k, device), _tile(v, device), is_causal=True, sliding_window_size=w))
    for i in (0, 39, 40, 41, 95):
        lo = max(0, i - w + 1)
        kk, vv = k[:, :, lo:i + 1], v[:, :, lo:i + 1]
        qq = q[:, :, i:i + 1]
        one = ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(
            _tile(qq, device), _tile(kk, device), _tile(vv, device), is_causal=False))
        assert torch.allclose(full[:, :, i], one[:, :, 0], atol=2e-2), i


def test_noncausal_sliding_window_is_centred(device):
    g = torch.Generator().manual_seed(13)
    q, k, v = (torch.randn(1, 2, 128, 32, generator=g) for _ in range(3))
    out = ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(
        _tile(q, device), _tile(k, device), _tile(v, device), is_causal=False, sliding_window_size=33))
    ref = _ref(_q(q, ttsim.bfloat16), _q(k, ttsim.bfloat16), _q(v, ttsim.bfloat16), causal=False, window=33)
    ok, pcc = comp_pcc(ref, out, 0.999)
    assert ok, pcc
    assert not comp_pcc(_ref(q, k, v, causal=False), out, 0.99)[0]


def test_prefill_attention_sink_meets_tt_metal_rmse(device):
    g = torch.Generator().manual_seed(14)
    b, nh, nkv, s, d = 1, 8, 1, 256, 32
    q, k, v = _fa_rand(g, b, nh, s, d), _fa_rand(g, b, nkv, s, d), _fa_rand(g, b, nkv, s, d)
    sink = torch.rand(1, nh, 1, 1, generator=g) * 4.0
    cfg = ttsim.SDPAProgramConfig(**CFG, q_chunk_size=32, k_chunk_size=128)
    out = ttsim.transformer.scaled_dot_product_attention(
        _tile(q, device), _tile(k, device), _tile(v, device), is_causal=True, program_config=cfg,
        attention_sink=_tile(sink, device))
    got = ttsim.to_torch(out)
    # the device multiplies the stored sink by the softmax scale
    want = _ref(q, k, v, sink=_q(sink, ttsim.bfloat16).reshape(nh) * d ** -0.5)
    assert _rmse(want, got) < 0.02, _rmse(want, got)
    assert _rmse(_ref(q, k, v), got) > 0.02  # the sink changes the answer


def test_sink_only_rescales_rows_by_its_share_of_the_denominator(device):
    """Independent identity: with sink logit z, out_sink = out * L / (L + e^z), where
    L = sum_j e^{s_j} of the row; checked on a uniform-score case (q = 0 so every s_j = 0)."""
    n, d = 64, 32
    q = torch.zeros(1, 1, n, d)
    k = torch.randn(1, 1, n, d, generator=torch.Generator().manual_seed(15))
    v = torch.ones(1, 1, n, d)
    sink_value = 2.0  # stored; logit = 2.0 * d**-0.5
    out = ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(
        _tile(q, device), _tile(k, device), _tile(v, device), is_causal=True,
        attention_sink=_tile(torch.full((1, 1, 1, 1), sink_value), device)))
    z = math.exp(sink_value * d ** -0.5)
    for i in (0, 7, 63):
        expected = (i + 1) / (i + 1 + z)  # row i sees i+1 keys, each weight e^0
        assert out[0, 0, i, 0].item() == pytest.approx(expected, rel=1e-2), i


def test_chunked_prefill_window_and_sink_match_the_reference(device):
    g = torch.Generator().manual_seed(16)
    nb, nkv, bs, d, nqh = 8, 2, 32, 64, 4
    k, v = torch.randn(nb, nkv, bs, d, generator=g), torch.randn(nb, nkv, bs, d, generator=g)
    table = torch.randperm(nb, generator=g).reshape(1, 8).int()
    start, sq, w = 64, 64, 48
    q = torch.randn(1, nqh, sq, d, generator=g)
    sink = torch.randn(1, nqh, 1, 1, generator=g)
    cfg = ttsim.SDPAProgramConfig(**CFG, q_chunk_size=32, k_chunk_size=32)
    out = ttsim.transformer.chunked_scaled_dot_product_attention(
        _tile(q, device), _tile(k, device), _tile(v, device), _ints(table.tolist(), device), start,
        program_config=cfg, sliding_window_size=w, attention_sink=_tile(sink, device))
    length = start + sq
    kc = torch.cat([_q(k, ttsim.bfloat16)[table[0, p]] for p in range(length // bs)], 1)[None]
    vc = torch.cat([_q(v, ttsim.bfloat16)[table[0, p]] for p in range(length // bs)], 1)[None]
    ref = _ref(_q(q, ttsim.bfloat16), kc, vc, window=w, q_offset=start,
               sink=_q(sink, ttsim.bfloat16).reshape(nqh) * d ** -0.5)
    ok, pcc = comp_pcc(ref, ttsim.to_torch(out), 0.999)
    assert ok, pcc
    assert _rmse(ref, ttsim.to_torch(out)) < 0.01


def _paged(device, b, nkv, s, d, bs, g, dtype=ttsim.bfloat16):
    k, v = torch.randn(b, nkv, s, d, generator=g), torch.randn(b, nkv, s, d, generator=g)
    pages = s // bs
    perm = torch.randperm(b * pages, generator=g)

    def paged(x):
        blocks = x.reshape(b, nkv, pages, bs, d).transpose(1, 2).reshape(b * pages, nkv, bs, d)
        return blocks[perm]

    table = torch.argsort(perm).reshape(b, pages).int()
    return k, v, _tile(paged(k), device, dtype), _tile(paged(v), device, dtype), _ints(table.tolist(), device)


def _decode_ref(q, k, v, pos, *, window=None, sink=None, mask=None):
    """q [1, b, nqh, d]; k/v [b, nkv, S, d] contiguous. Causal at pos[r], or additive mask [b, 1, nqh, S]."""
    b, nqh = q.shape[1], q.shape[2]
    out = torch.empty(1, b, nqh, v.shape[3], dtype=torch.float64)
    for r in range(b):
        qq = q[0, r][None, :, None, :]
        if mask is None:
            p = pos[r]
            o = _ref(qq, k[r:r + 1, :, :p + 1], v[r:r + 1, :, :p + 1], window=window, sink=sink, q_offset=p)
        else:
            o = _ref(qq, k[r:r + 1], v[r:r + 1], causal=False, sink=sink, mask=mask[r, 0][:, None, :][None])
        out[0, r] = o[0, :, 0]
    return out


def test_paged_decode_window_and_sink_match_the_reference(device):
    g = torch.Generator().manual_seed(17)
    b, nkv, nqh, s, d, bs, w = 4, 2, 8, 256, 64, 32, 70
    k, v, tk, tv, tt = _paged(device, b, nkv, s, d, bs, g)
    q = torch.randn(1, b, nqh, d, generator=g)
    pos = [255, 69, 5, 130]
    sink = torch.randn(nqh, 1, generator=g)
    sink_dev = _tile(torch.nn.functional.pad(sink, (0, 31)), device)  # tt-metal pads it to a tile row
    out = ttsim.transformer.paged_scaled_dot_product_attention_decode(
        _tile(q, device), tk, tv, tt, cur_pos_tensor=_ints(pos, device), sliding_window_size=w,
        attention_sink=sink_dev)
    ref = _decode_ref(_q(q, ttsim.bfloat16), _q(k, ttsim.bfloat16), _q(v, ttsim.bfloat16), pos, window=w,
                      sink=_q(sink, ttsim.bfloat16).reshape(nqh) * d ** -0.5)
    ok, pcc = comp_pcc(ref, ttsim.to_torch(out), 0.999)
    assert ok, pcc
    plain = _decode_ref(q, k, v, pos)
    assert not comp_pcc(plain, ttsim.to_torch(out), 0.99)[0]


def test_paged_decode_window_matches_prefill_window_at_the_same_position(device):
    """Decode at position p with window w equals the last row of windowed prefill over 0..p."""
    g = torch.Generator().manual_seed(18)
    nkv, nqh, s, d, bs, w = 1, 2, 128, 32, 32, 50
    k, v, tk, tv, tt = _paged(device, 1, nkv, s, d, bs, g)
    p = 127
    q = torch.randn(1, nqh, s, d, generator=g)
    pre = ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(
        _tile(q, device), _tile(k, device), _tile(v, device), is_causal=True, sliding_window_size=w))
    dec = ttsim.to_torch(ttsim.transformer.paged_scaled_dot_product_attention_decode(
        _tile(q[:, :, p][None], device), tk, tv, tt, cur_pos_tensor=_ints([p], device), sliding_window_size=w))
    assert torch.allclose(pre[0, :, p], dec[0, 0], atol=1e-2)


def test_noncausal_paged_decode_with_mask(device):
    g = torch.Generator().manual_seed(19)
    b, nkv, nqh, s, d, bs = 2, 1, 4, 128, 32, 32
    k, v, tk, tv, tt = _paged(device, b, nkv, s, d, bs, g)
    q = torch.randn(1, b, nqh, d, generator=g)
    mask = torch.bernoulli(torch.full((b, 1, nqh, s), 0.25), generator=g) * torch.finfo(torch.float32).min
    out = ttsim.transformer.paged_scaled_dot_product_attention_decode(
        _tile(q, device), tk, tv, tt, is_causal=False, attn_mask=_tile(mask, device, ttsim.bfloat4_b))
    ref = _decode_ref(_q(q, ttsim.bfloat16), _q(k, ttsim.bfloat16), _q(v, ttsim.bfloat16), None, mask=mask)
    ok, pcc = comp_pcc(ref, ttsim.to_torch(out), 0.999)
    assert ok, pcc
    assert not comp_pcc(_decode_ref(q, k, v, None, mask=torch.zeros_like(mask)), ttsim.to_torch(out), 0.99)[0]


def test_noncausal_decode_without_a_mask_is_refused_at_the_call(device):
    g = torch.Generator().manual_seed(20)
    _, _, tk, tv, tt = _paged(device, 1, 1, 64, 32, 32, g)
    with pytest.raises(ttsim.TTFatal, match=r"is_causal=False needs attn_mask \[1, 1, 2, 64\]"):
        ttsim.transformer.paged_scaled_dot_product_attention_decode(
            _tile(torch.zeros(1, 1, 2, 32), device), tk, tv, tt, is_causal=False)


@pytest.mark.parametrize("by_tensor", [False, True])
def test_contiguous_decode_matches_the_reference(device, by_tensor):
    g = torch.Generator().manual_seed(21)
    b, nkv, nqh, s, d = 3, 1, 8, 96, 64
    k, v = torch.randn(b, nkv, s, d, generator=g), torch.randn(b, nkv, s, d, generator=g)
    q = torch.randn(1, b, nqh, d, generator=g)
    pos = [0, 50, 95]
    kwargs = dict(cur_pos_tensor=_ints(pos, device)) if by_tensor else dict(cur_pos=pos)
    out = ttsim.transformer.scaled_dot_product_attention_decode(
        _tile(q, device), _tile(k, device), _tile(v, device), **kwargs)
    ref = _decode_ref(_q(q, ttsim.bfloat16), _q(k, ttsim.bfloat16), _q(v, ttsim.bfloat16), pos)
    ok, pcc = comp_pcc(ref, ttsim.to_torch(out), 0.999)
    assert ok, pcc


def test_contiguous_decode_equals_paged_decode_on_the_same_cache(device):
    g = torch.Generator().manual_seed(22)
    b, nkv, nqh, s, d, bs = 2, 2, 4, 64, 32, 32
    k, v, tk, tv, tt = _paged(device, b, nkv, s, d, bs, g)
    q = _tile(torch.randn(1, b, nqh, d, generator=g), device)
    pos = [63, 17]
    paged = ttsim.to_torch(ttsim.transformer.paged_scaled_dot_product_attention_decode(
        q, tk, tv, tt, cur_pos_tensor=_ints(pos, device), sliding_window_size=20))
    flat = ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention_decode(
        q, _tile(k, device), _tile(v, device), cur_pos=pos, sliding_window_size=20))
    assert torch.equal(paged, flat)


@pytest.mark.parametrize("kwargs, message", [
    (dict(sliding_window_size=0), r"sliding_window_size must be a positive int or None, got 0"),
    (dict(cu_window_seqlens=[0, 32]), r"cu_window_seqlens=\[0, 32\] is not modelled by ttsim"),
    (dict(output_concat_heads=True), r"output_concat_heads=True is not modelled"),
])
def test_prefill_refuses_what_it_cannot_honour_at_the_call(device, kwargs, message):
    x = _tile(torch.zeros(1, 2, 32, 32), device)
    with pytest.raises(ttsim.TTFatal, match=message):
        ttsim.transformer.scaled_dot_product_attention(x, x, x, **kwargs)


def test_sink_of_the_wrong_shape_is_refused_at_the_call(device):
    x = _tile(torch.zeros(1, 4, 32, 32), device)
    with pytest.raises(ttsim.TTFatal, match=r"attention_sink must be \[1, 4, 1, 1\]"):
        ttsim.transformer.scaled_dot_product_attention(x, x, x, attention_sink=_tile(torch.zeros(4, 32), device))


def test_mask_with_causal_is_refused_as_tt_metal_does(device):
    x = _tile(torch.zeros(1, 2, 32, 32), device)
    m = _tile(torch.zeros(1, 1, 32, 32), device)
    with pytest.raises(ttsim.TTFatal, match=r"attn_mask needs is_causal=False"):
        ttsim.transformer.scaled_dot_product_attention(x, x, x, attn_mask=m)


def test_paged_decode_bfp8_cache_meets_tt_metal_pcc(device):
    """bfp8 KV cache (as tt-metal's decode tests store it), GQA, 2k context: PCC >= 0.99 and the
    answer differs from the bf16-cache one only by the cache's own quantisation."""
    g = torch.Generator().manual_seed(23)
    b, nkv, nqh, s, d, bs = 4, 2, 8, 2048, 64, 64
    k, v, tk, tv, tt = _paged(device, b, nkv, s, d, bs, g, dtype=ttsim.bfloat8_b)
    q = torch.randn(1, b, nqh, d, generator=g)
    pos = [2047, 1000, 31, 1500]
    out = ttsim.to_torch(ttsim.transformer.paged_scaled_dot_product_attention_decode(
        _tile(q, device), tk, tv, tt, cur_pos_tensor=_ints(pos, device)))
    ok, pcc = comp_pcc(_decode_ref(q, k, v, pos), out, 0.99)
    assert ok, pcc
    kq, vq = (ttsim.to_torch(ttsim.from_torch(x, dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT)) for x in (k, v))
    ok, pcc = comp_pcc(_decode_ref(_q(q, ttsim.bfloat16), kq, vq, pos), out, 0.9999)
    assert ok, pcc


# -- joint SDPA --------------------------------------------------------------------------------

def _joint_inputs(device, b=1, nh=2, n=64, length=32, d=32, seed=8):
    g = torch.Generator().manual_seed(seed)
    ts = [torch.randn(b, nh, m, d, generator=g).bfloat16().float() for m in (n, n, n, length, length, length)]
    return ts, [ttsim.from_torch(t, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device) for t in ts]


def _pc_joint():
    return ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(8, 8), q_chunk_size=32, k_chunk_size=32)


def test_joint_sdpa_attends_over_main_and_joint_tokens(device):
    """0.81.1's golden: cat(q, joint_q) etc. along the sequence, non-causal, split at N."""
    (q, k, v, jq, jk, jv), tt = _joint_inputs(device)
    out, joint = ttsim.transformer.joint_scaled_dot_product_attention(*tt, joint_strategy="rear",
                                                                      program_config=_pc_joint())
    ref = F.scaled_dot_product_attention(torch.cat([q, jq], 2), torch.cat([k, jk], 2), torch.cat([v, jv], 2))
    assert list(out.shape) == [1, 2, 64, 32] and list(joint.shape) == [1, 2, 32, 32]
    assert torch.allclose(ttsim.to_torch(out).float(), ref[:, :, :64], atol=0.02)
    assert torch.allclose(ttsim.to_torch(joint).float(), ref[:, :, 64:], atol=0.02)
    alone = F.scaled_dot_product_attention(q, k, v)  # without the joint keys it would differ
    assert not torch.allclose(ttsim.to_torch(out).float(), alone, atol=0.05)
    golden = ttsim.get_golden_function(ttsim.transformer.joint_scaled_dot_product_attention)
    g_out, g_joint = golden(q, k, v, jq, jk, jv, joint_strategy="rear")
    assert torch.allclose(g_out, ref[:, :, :64]) and torch.allclose(g_joint, ref[:, :, 64:])


def test_joint_sdpa_scale_and_one_program(device):
    (q, k, v, jq, jk, jv), tt = _joint_inputs(device, seed=9)
    device.clear_program_cache()
    for _ in range(2):
        out, _ = ttsim.transformer.joint_scaled_dot_product_attention(*tt, joint_strategy="rear",
                                                                      program_config=_pc_joint(), scale=0.5)
    assert device.num_program_cache_entries() == 1  # both outputs come from one program
    ref = F.scaled_dot_product_attention(torch.cat([q, jq], 2), torch.cat([k, jk], 2), torch.cat([v, jv], 2),
                                         scale=0.5)
    assert torch.allclose(ttsim.to_torch(out).float(), ref[:, :, :64], atol=0.02)


def test_joint_sdpa_refuses_other_strategies_and_shapes(device):
    _, tt = _joint_inputs(device)
    with pytest.raises(ttsim.TTFatal, match=r"joint_strategy must be 'rear', got 'front'"):
        ttsim.transformer.joint_scaled_dot_product_attention(*tt, joint_strategy="front", program_config=_pc_joint())
    _, gqa = _joint_inputs(device, nh=1)
    with pytest.raises(ttsim.TTFatal, match=r"same b, nh and d"):
        ttsim.transformer.joint_scaled_dot_product_attention(tt[0], gqa[1], gqa[2], *tt[3:], joint_strategy="rear",
                                                             program_config=_pc_joint())
