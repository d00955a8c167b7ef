"""The gated-delta-rule semantics production's qwen36 relies on: flat [B, T, H*D] q/k/v
(fused_chunk.py), output_head_major (gdn/tp.py), the low-level transformer.gated_delta_attn_seq
(the seq adapter's scan), and chunked SDPA's device-resident chunk_start_idx_tensor; each against
a float64 torch reference (token-by-token delta rule; the real package's golden definitions)."""

import pytest
import torch

import ttsim

T = ttsim.transformer


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _dev(x, device, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT):
    return ttsim.from_torch(x, dtype=dtype, layout=layout, device=device)


def _l2(x):
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)


def _recurrent(q, k, v, g, beta, scale, state=None):
    """float64 token-by-token: S <- S e^g; S += k (beta (v - S^T k))^T; o = S^T q * scale."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    b, t, h, dk = q.shape
    hv, dv = v.shape[2], v.shape[3]
    q, k = q.repeat_interleave(hv // h, dim=2), k.repeat_interleave(hv // h, dim=2)
    s = torch.zeros(b, hv, dk, dv, dtype=torch.float64) if state is None else state.double().clone()
    out = torch.empty(b, t, hv, dv, dtype=torch.float64)
    for i in range(t):
        s = s * g[:, i].exp()[..., None, None]
        mem = torch.einsum("bhkv,bhk->bhv", s, k[:, i])
        s = s + k[:, i][..., None] * ((v[:, i] - mem) * beta[:, i][..., None])[..., None, :]
        out[:, i] = torch.einsum("bhkv,bhk->bhv", s, q[:, i]) * scale
    return out, s


def _inputs(seed, b=1, t=64, h=2, hv=4, d=32):
    g = _g(seed)
    q, k = torch.randn(b, t, h, d, generator=g), torch.randn(b, t, h, d, generator=g)
    v = torch.randn(b, t, hv, d, generator=g)
    gate = -torch.rand(b, t, hv, generator=g) * 0.3
    beta = torch.rand(b, t, hv, generator=g)
    return q, k, v, gate, beta


def test_flat_qkv_normalises_q_and_k_in_the_kernel(device):
    """fused_chunk.py: flat [B,T,H*K] q/k/v, chunk_size=32, no host L2 norm (the kernel's own)."""
    q, k, v, gate, beta = _inputs(1)
    b, t, h, d = q.shape
    hv = v.shape[2]
    flat = [x.reshape(b, t, -1) for x in (q, k, v)]
    o, state = T.chunk_gated_delta_rule(*(_dev(x, device) for x in (*flat, gate, beta)), scale=d ** -0.5,
                                        output_final_state=True, chunk_size=32)
    want_o, want_s = _recurrent(_l2(q), _l2(k), v, gate, beta, d ** -0.5)
    assert list(o.shape) == [b, t, hv, d] and list(state.shape) == [b, hv, d, d]
    assert torch.allclose(ttsim.to_torch(o).double(), want_o, atol=2e-4)
    assert torch.allclose(ttsim.to_torch(state).double(), want_s, atol=2e-4)
    # the normalisation matters: without it the answer is another one
    raw, _ = _recurrent(q, k, v, gate, beta, d ** -0.5)
    assert not torch.allclose(ttsim.to_torch(o).double(), raw, atol=1e-2)


def test_flat_v_with_4d_qk_and_output_head_major(device):
    """gdn/tp.py's return_o_bh: o comes back head-major [B*HV, T, V] (0.81.1's golden)."""
    q, k, v, gate, beta = _inputs(2, b=2, t=32)
    b, t, h, d = q.shape
    hv = v.shape[2]
    init = torch.randn(b, hv, d, d, generator=_g(3)) * 0.1
    o, state = T.chunk_gated_delta_rule(
        *(_dev(x, device) for x in (_l2(q), _l2(k), v.reshape(b, t, hv * d), gate, beta)), scale=0.25,
        initial_state=_dev(init, device), output_final_state=True, chunk_size=32, output_head_major=True)
    want_o, want_s = _recurrent(_l2(q), _l2(k), v, gate, beta, 0.25, init)
    assert list(o.shape) == [b * hv, t, d] and o.layout == ttsim.TILE_LAYOUT
    head_major = want_o.permute(0, 2, 1, 3).reshape(b * hv, t, d)
    assert torch.allclose(ttsim.to_torch(o).double(), head_major, atol=2e-4)
    assert torch.allclose(ttsim.to_torch(state).double(), want_s, atol=2e-4)
    golden = ttsim.get_golden_function(T.chunk_gated_delta_rule)
    g_o, _ = golden(_l2(q), _l2(k), v, gate, beta, scale=0.25, initial_state=init, output_final_state=True,
                    chunk_size=32, output_head_major=True)
    assert torch.allclose(g_o.double(), head_major, atol=2e-4)


def test_flat_refusals_in_tt_metals_words(device):
    q, k, v, gate, beta = _inputs(4, t=48)
    b, t, h, d = q.shape
    flat = [_dev(x.reshape(b, t, -1), device) for x in (q, k, v)]
    rest = [_dev(gate, device), _dev(beta, device)]
    with pytest.raises(ttsim.TTFatal, match=r"OPT-A flat q/k needs the in-kernel norm \(chunk_size == 32\)"):
        T.chunk_gated_delta_rule(*flat[:2], _dev(v, device), *rest, chunk_size=16)
    with pytest.raises(ttsim.TTFatal, match=r"OPT-A flat v requires T \(48\) to be a multiple of chunk_size \(32\)"):
        T.chunk_gated_delta_rule(*flat, *rest, chunk_size=32)
    with pytest.raises(ttsim.TTFatal, match=r"OPT-A flat q/k requires T \(48\) to be a multiple of chunk_size"):
        T.chunk_gated_delta_rule(*flat[:2], _dev(v, device), *rest, chunk_size=32)
    wide = _dev(torch.randn(b, t, 3 * 48), device)
    with pytest.raises(ttsim.TTFatal, match=r"flat q width 144 != H\*K \(4\*32\); flat q/k path assumes K==V"):
        T.chunk_gated_delta_rule(wide, wide, _dev(v, device), *rest, chunk_size=32)
    with pytest.raises(ttsim.TTFatal, match=r"q and k must both be \[B, T, H, K\]"):  # the decode op takes no flat form
        T.fused_recurrent_gated_delta_rule(*flat, *rest)
    with pytest.raises(ttsim.TTFatal, match=r"v must be \[B, T, HV, V\], got"):
        T.fused_recurrent_gated_delta_rule(_dev(q, device), _dev(k, device), flat[2], *rest)


# -- gated_delta_attn_seq ------------------------------------------------------------------------

def _seq_inputs(seed, bh=3, nc=2, c=32, kd=32, vd=32):
    g = _g(seed)
    lower = torch.tril(torch.randn(bh, nc, c, c, generator=g) * 0.05, diagonal=-1) + torch.eye(c)
    return dict(
        L_unit=lower, v_beta_sc=torch.randn(bh, nc, c, vd, generator=g),
        k_bd_sc=torch.randn(bh, nc, c, kd, generator=g) * 0.2,
        intra_attn=torch.tril(torch.randn(bh, nc, c, c, generator=g) * 0.1),
        q_decay=torch.randn(bh, nc, c, kd, generator=g) * 0.2,
        k_decay_t=torch.randn(bh, nc, kd, c, generator=g) * 0.2,
        dl_exp=torch.rand(bh, nc, 1, 1, generator=g) * 0.5 + 0.5,
        L_inv=torch.zeros(bh, nc, c, c))


def _seq_ref(x, state=None):
    d = {n: t.double() for n, t in x.items()}
    bh, nc, c, kd = d["q_decay"].shape
    s = torch.zeros(bh, kd, d["v_beta_sc"].shape[-1], dtype=torch.float64) if state is None else state.double()
    outs = []
    for j in range(nc):
        lower = d["L_unit"][:, j]
        v_cor = torch.linalg.solve(lower, d["v_beta_sc"][:, j])
        k_cum = torch.linalg.solve(lower, d["k_bd_sc"][:, j])
        v_new = v_cor - k_cum @ s
        outs.append(d["q_decay"][:, j] @ s + d["intra_attn"][:, j] @ v_new)
        s = s * d["dl_exp"][:, j].reshape(bh, 1, 1) + d["k_decay_t"][:, j] @ v_new
    return torch.stack(outs, 1), s


def test_gated_delta_attn_seq_is_the_blocked_solve_and_scan(device):
    x = _seq_inputs(10)
    init = torch.randn(3, 32, 32, generator=_g(11)) * 0.1
    o, s = T.gated_delta_attn_seq(*(_dev(t, device) for t in x.values()), initial_state=_dev(init, device),
                                  memory_config=ttsim.DRAM_MEMORY_CONFIG)
    want_o, want_s = _seq_ref(x, init)
    assert list(o.shape) == [3, 2, 32, 32] and o.dtype == ttsim.float32
    assert torch.allclose(ttsim.to_torch(o).double(), want_o, atol=1e-4)
    assert torch.allclose(ttsim.to_torch(s).double(), want_s, atol=1e-4)
    golden_o, golden_s = ttsim.get_golden_function(T.gated_delta_attn_seq)(*x.values(), initial_state=init)
    assert torch.allclose(golden_o.double(), want_o, atol=1e-4) and torch.allclose(golden_s.double(), want_s, atol=1e-4)


def test_gated_delta_attn_seq_from_zero_state_and_its_shape_checks(device):
    x = _seq_inputs(12, bh=2, nc=3)
    o, s = T.gated_delta_attn_seq(*(_dev(t, device) for t in x.values()))
    want_o, want_s = _seq_ref(x)
    assert torch.allclose(ttsim.to_torch(o).double(), want_o, atol=1e-4)
    assert torch.allclose(ttsim.to_torch(s).double(), want_s, atol=1e-4)
    bad = dict(x, intra_attn=torch.zeros(2, 3, 32, 64))
    with pytest.raises(ttsim.TTFatal, match="intra_attn must be"):
        T.gated_delta_attn_seq(*(_dev(t, device) for t in bad.values()))


# -- chunked SDPA: chunk_start_idx_tensor ---------------------------------------------------------

def _paged_cache(device, g, nb=8, nkv=1, bs=32, d=64):
    k, v = torch.randn(nb, nkv, bs, d, generator=g), torch.randn(nb, nkv, bs, d, generator=g)
    table = torch.randperm(nb, generator=g).reshape(1, nb).int()
    tk = _dev(k, device, ttsim.bfloat16)
    tv = _dev(v, device, ttsim.bfloat16)
    tt = ttsim.from_torch(table, dtype=ttsim.int32, device=device)
    return k, v, table, tk, tv, tt


def _attn_ref(q, k, v, table, start):
    """float64 causal attention of q (positions start..) over the paged cache's first tokens."""
    sq = q.shape[2]
    n = start + sq
    kc = torch.cat([k[table[0, p]] for p in range((n + 31) // 32)], 1)[:, :n].double()
    vc = torch.cat([v[table[0, p]] for p in range((n + 31) // 32)], 1)[:, :n].double()
    qd = q.double()
    scores = torch.einsum("bhqd,kd->bhqk", qd, kc[0]) / q.shape[-1] ** 0.5  # one kv head
    mask = torch.arange(n)[None, :] > (torch.arange(sq)[:, None] + start)
    scores = scores.masked_fill(mask, float("-inf"))
    return scores.softmax(-1) @ vc[0]


@pytest.mark.parametrize("start", [0, 64, 128])
def test_chunk_start_idx_tensor_is_read_on_the_device(device, start):
    """attention/tp.py's flexible chunked prefill: the start comes from a device int32 tensor, so one
    program (and one trace) serves every chunk."""
    g = _g(20 + start)
    k, v, table, tk, tv, tt = _paged_cache(device, g)
    q = torch.randn(1, 2, 64, 64, generator=g)
    kb, vb = k.to(torch.bfloat16).float(), v.to(torch.bfloat16).float()
    cfg = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=64, k_chunk_size=64)
    start_t = ttsim.from_torch(torch.tensor([start], dtype=torch.int32), device=device)
    out = T.chunked_scaled_dot_product_attention(input_tensor_q=_dev(q, device, ttsim.bfloat16), input_tensor_k=tk,
                                                 input_tensor_v=tv, page_table_tensor=tt,
                                                 chunk_start_idx_tensor=start_t, program_config=cfg)
    want = _attn_ref(q.to(torch.bfloat16).float(), kb, vb, table, start)
    assert ttsim.pearson_correlation_coefficient(want, ttsim.to_torch(out).double()) > 0.999
    same = T.chunked_scaled_dot_product_attention(_dev(q, device, ttsim.bfloat16), tk, tv, tt, start,
                                                  program_config=cfg)
    assert torch.equal(ttsim.to_torch(out), ttsim.to_torch(same))


def test_chunk_start_idx_tensor_updates_between_calls_and_is_validated(device):
    g = _g(30)
    k, v, table, tk, tv, tt = _paged_cache(device, g)
    q = _dev(torch.randn(1, 1, 64, 64, generator=g), device, ttsim.bfloat16)
    cfg = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=(8, 8), q_chunk_size=64, k_chunk_size=64)
    start_t = ttsim.from_torch(torch.tensor([0], dtype=torch.int32), device=device)
    a = T.chunked_scaled_dot_product_attention(q, tk, tv, tt, chunk_start_idx_tensor=start_t, program_config=cfg)
    ttsim.copy_host_to_device_tensor(ttsim.from_torch(torch.tensor([128], dtype=torch.int32)), start_t)
    b = T.chunked_scaled_dot_product_attention(q, tk, tv, tt, chunk_start_idx_tensor=start_t, program_config=cfg)
    want_b = T.chunked_scaled_dot_product_attention(q, tk, tv, tt, 128, program_config=cfg)
    assert not torch.equal(ttsim.to_torch(a), ttsim.to_torch(b))
    assert torch.equal(ttsim.to_torch(b), ttsim.to_torch(want_b))
    with pytest.raises(ttsim.TTFatal, match=r"chunk_start_idx tensor must be int32"):
        T.chunked_scaled_dot_product_attention(q, tk, tv, tt, chunk_start_idx_tensor=ttsim.from_torch(
            torch.tensor([0], dtype=torch.int32), dtype=ttsim.uint32, device=device), program_config=cfg)
    ttsim.copy_host_to_device_tensor(ttsim.from_torch(torch.tensor([32], dtype=torch.int32)), start_t)
    with pytest.raises(ttsim.TTFatal, match=r"chunk_start_idx=32 must be a non-negative multiple of q_chunk_size=64"):
        ttsim.to_torch(T.chunked_scaled_dot_product_attention(q, tk, tv, tt, chunk_start_idx_tensor=start_t,
                                                               program_config=cfg))


# -- paged_fused_update_cache ------------------------------------------------------------------------

def _shard_cfg(x0, y0, x1, y1, hd):
    grid = ttsim.CoreRangeSet({ttsim.CoreRange(ttsim.CoreCoord(x0, y0), ttsim.CoreCoord(x1, y1))})
    return ttsim.create_sharded_memory_config(shape=(32, hd), core_grid=grid, strategy=ttsim.ShardStrategy.HEIGHT,
                                              orientation=ttsim.ShardOrientation.ROW_MAJOR,
                                              use_height_and_width_as_shard_shape=True)


def test_paged_fused_update_cache_writes_k_and_v_as_two_updates(device):
    """attention/tp.py's fused KV write: K and V on disjoint shard grids (V the natural half)."""
    nb, nkv, bs, hd, b = 4, 1, 32, 64, 2
    g = _g(40)
    kx, vx = torch.randn(1, b, nkv, hd, generator=g), torch.randn(1, b, nkv, hd, generator=g)
    table = ttsim.from_torch(torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), device=device)
    pos = ttsim.from_torch(torch.tensor([5, 33], dtype=torch.int32), device=device)
    kc, vc = (_dev(torch.zeros(nb, nkv, bs, hd), device, ttsim.bfloat16) for _ in range(2))
    k_sh = ttsim.to_memory_config(_dev(kx, device, ttsim.bfloat16), _shard_cfg(0, 1, 1, 1, hd))
    v_sh = ttsim.to_memory_config(_dev(vx, device, ttsim.bfloat16), _shard_cfg(0, 0, 1, 0, hd))
    out_k, out_v = ttsim.experimental.paged_fused_update_cache(kc, k_sh, vc, v_sh, update_idxs_tensor=pos,
                                                               page_table=table)
    assert out_k is kc and out_v is vc
    ref_k, ref_v = (_dev(torch.zeros(nb, nkv, bs, hd), device, ttsim.bfloat16) for _ in range(2))
    ttsim.experimental.paged_update_cache(ref_k, _dev(kx, device, ttsim.bfloat16), update_idxs_tensor=pos,
                                          page_table=table)
    ttsim.experimental.paged_update_cache(ref_v, _dev(vx, device, ttsim.bfloat16), update_idxs=[5, 33],
                                          page_table=table)
    assert torch.equal(ttsim.to_torch(kc), ttsim.to_torch(ref_k)) and torch.equal(ttsim.to_torch(vc), ttsim.to_torch(ref_v))
    got_k = ttsim.to_torch(kc)
    assert torch.equal(got_k[0, 0, 5], kx[0, 0, 0].to(torch.bfloat16))  # user 0, page 0, row 5
    assert torch.equal(got_k[3, 0, 1], kx[0, 1, 0].to(torch.bfloat16))  # user 1, position 33: page 3, row 1


def test_paged_fused_update_cache_refusals_in_tt_metals_words(device):
    hd = 64
    table = ttsim.from_torch(torch.tensor([[0, 1], [2, 3]], dtype=torch.int32), device=device)
    cache = _dev(torch.zeros(4, 1, 32, hd), device, ttsim.bfloat16)
    x = _dev(torch.zeros(1, 2, 1, hd), device, ttsim.bfloat16)
    E = ttsim.experimental
    same = ttsim.to_memory_config(x, _shard_cfg(0, 0, 1, 0, hd))
    with pytest.raises(ttsim.TTFatal, match=r"input_tensor1 \(.*\) and input_tensor2 \(.*\) must not overlap"):
        E.paged_fused_update_cache(cache, same, cache, ttsim.to_memory_config(x, _shard_cfg(1, 0, 2, 0, hd)), update_idxs=[0, 0],
              page_table=table)
    with pytest.raises(ttsim.TTFatal, match="must have same number of cores"):
        E.paged_fused_update_cache(cache, same, cache, ttsim.to_memory_config(x, _shard_cfg(0, 1, 2, 1, hd)), update_idxs=[0, 0],
              page_table=table)
    with pytest.raises(ttsim.TTFatal, match="cache_tensor1 and cache_tensor2 must have identical shapes"):
        E.paged_fused_update_cache(cache, x, _dev(torch.zeros(2, 1, 32, hd), device, ttsim.bfloat16), x, update_idxs=[0, 0],
              page_table=table)
    with pytest.raises(ttsim.TTFatal, match="input_tensor1 and input_tensor2 must have identical shapes"):
        E.paged_fused_update_cache(cache, x, cache, _dev(torch.zeros(1, 1, 1, hd), device, ttsim.bfloat16), update_idxs=[0],
              page_table=table)
    bf8 = _dev(torch.zeros(1, 2, 1, hd), device, ttsim.bfloat8_b)
    with pytest.raises(ttsim.TTFatal, match="must be FLOAT32 or BFLOAT16"):
        E.paged_fused_update_cache(cache, bf8, cache, bf8, update_idxs=[0, 0], page_table=table)
    with pytest.raises(ttsim.TTFatal, match="share_cache=True is not modelled"):
        E.paged_fused_update_cache(cache, x, cache, x, update_idxs=[0, 0], page_table=table, share_cache=True, batch_offset=0,
              mesh_coords=None)
