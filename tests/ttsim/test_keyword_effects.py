"""Every optional keyword either changes values the way the real op does (checked here
against torch) or is refused at the call with a TT_FATAL naming it (the table below).
tests/ttsim/test_keyword_rule.py holds the suite to this."""

import pytest
import torch

import ttsim


def _tile(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device)


def _rm(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.ROW_MAJOR_LAYOUT, device=device)


def _ints(x, device):
    return ttsim.from_torch(torch.tensor(x, dtype=torch.int32), dtype=ttsim.int32, device=device)


def _r(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


T = ttsim.transformer
E = ttsim.experimental

# (id, call(device, t) -> op result, message). ``t`` is a [1, 1, 32, 32] bf16 TILE tensor.
REFUSED = [
    ("all_gather-output", lambda d, t: ttsim.all_gather(t, 3, output_tensor=t), r"all_gather: output_tensor="),
    ("all_gather-axis", lambda d, t: ttsim.all_gather(t, 3, cluster_axis=7), r"cluster_axis must be None, 0 or 1"),
    ("reduce_scatter-output", lambda d, t: ttsim.reduce_scatter(t, 3, output_tensor=t), r"reduce_scatter: output_tensor="),
    ("concat-output", lambda d, t: ttsim.concat([t, t], 3, output_tensor=t), r"concat: output_tensor="),
    ("concat-groups", lambda d, t: ttsim.concat([t, t], 3, groups=2), r"concat: groups=2"),
    ("repeat-output", lambda d, t: ttsim.repeat(t, [1, 1, 1, 2], optional_output_tensor=t), r"optional_output_tensor="),
    ("slice-output", lambda d, t: ttsim.slice(t, [0, 0, 0, 0], [1, 1, 32, 32], output_tensor=t), r"slice: output_tensor="),
    ("embedding-output", lambda d, t: ttsim.embedding(_rm(torch.zeros(1, 4, dtype=torch.int32), d, ttsim.uint32),
                                                       _rm(torch.zeros(8, 32), d), output_tensor=t),
     r"embedding: output_tensor="),
    ("fill-mesh_coords", lambda d, t: E.paged_fill_cache(t, t, _ints([[0]], d), mesh_coords=[(0, 0)]), r"mesh_coords="),
    ("fill-block_size", lambda d, t: E.paged_fill_cache(t, t, _ints([[0]], d), block_size=64), r"block_size=64"),
    ("fill-modulo", lambda d, t: E.paged_fill_cache(t, t, _ints([[0]], d), cache_position_modulo=8),
     r"cache_position_modulo=8"),
    ("fill-valid_len", lambda d, t: E.paged_fill_cache(t, t, _ints([[0]], d), valid_seq_len_tensor=_ints([4], d)),
     r"valid_seq_len_tensor="),
    ("update-share_cache", lambda d, t: E.paged_update_cache(t, t, update_idxs=[0], share_cache=True,
                                                              page_table=_ints([[0]], d)), r"share_cache=True"),
    ("update-batch_offset", lambda d, t: E.paged_update_cache(t, t, update_idxs=[0], batch_offset=1,
                                                               page_table=_ints([[0]], d)), r"batch_offset=1"),
    ("update-mesh_coords", lambda d, t: E.paged_update_cache(t, t, update_idxs=[0], mesh_coords=[(0, 0)],
                                                              page_table=_ints([[0]], d)), r"mesh_coords="),
    ("update-block_size", lambda d, t: E.paged_update_cache(t, t, update_idxs=[0], block_size=64,
                                                             page_table=_ints([[0]], d)), r"block_size=64 / num_kv"),
    ("update-num_kv_heads", lambda d, t: E.paged_update_cache(t, t, update_idxs=[0], num_kv_heads=2,
                                                               page_table=_ints([[0]], d)), r"num_kv_heads=2 reinterp"),
    ("update-modulo", lambda d, t: E.paged_update_cache(t, t, update_idxs=[0], cache_position_modulo=4,
                                                         page_table=_ints([[0]], d)),
     r"cache_position_modulo \(4\) must be a positive multiple of effective block_size \(32\)"),
    ("update-modulo-blocks", lambda d, t: E.paged_update_cache(t, t, update_idxs=[0], cache_position_modulo=64,
                                                                page_table=_ints([[0]], d)),
     r"cache_position_modulo/block_size \(2\) must be <= max_num_blocks \(1\)"),
    ("rope-decode", lambda d, t: E.rotary_embedding_llama(t, t, t, t, is_decode_mode=True), r"is_decode_mode=True needs"),
    ("from_torch-spec", lambda d, t: ttsim.from_torch(torch.zeros(2), spec=object()), r"from_torch: spec="),
    ("from_torch-col_tilize", lambda d, t: ttsim.from_torch(torch.zeros(2), col_tilize=True), r"col_tilize=True"),
    ("layer_norm-recip", lambda d, t: ttsim.layer_norm(t, recip_tensor=t), r"layer_norm: recip_tensor="),
    ("linear-in0_offset", lambda d, t: ttsim.linear(t, t, in0_column_offset=32), r"in0_column_offset=32"),
    ("sum-correction", lambda d, t: ttsim.sum(t, 3, correction=1), r"sum: correction=1"),
    ("mean-correction", lambda d, t: ttsim.mean(t, 3, correction=1), r"mean: correction=1"),
    ("max-correction", lambda d, t: ttsim.max(t, 3, correction=1), r"max: correction=1"),
    ("sigmoid-vector_mode", lambda d, t: ttsim.sigmoid(t, vector_mode=2), r"vector_mode=2 is not modelled"),
    ("record_event-range", lambda d, t: ttsim.record_event(d, 0, device_range=object()), r"device_range is not modelled"),
    ("open_mesh-offset", lambda d, t: ttsim.open_mesh_device(ttsim.MeshShape(1, 1), offset=(0, 1)), r"offset="),
    ("gdn-per_token", lambda d, t: T.fused_recurrent_gated_delta_rule(*_gdn(d), output_per_token_state=True),
     r"output_per_token_state=True"),
    ("chunked-start_tensor", lambda d, t: T.chunked_scaled_dot_product_attention(
        t, t, t, _ints([[0]], d), 0, chunk_start_idx_tensor=_ints([0], d)),
     r"!\(chunk_start_idx.has_value\(\) && chunk_start_idx_tensor.has_value\(\)\)"),
    ("chunked-geometry", lambda d, t: T.chunked_scaled_dot_product_attention(
        t, t, t, _ints([[0]], d), 0, paged_cache_geometry=object()), r"paged_cache_geometry="),
    ("decode-geometry", lambda d, t: T.paged_scaled_dot_product_attention_decode(
        t, t, t, _ints([[0]], d), cur_pos_tensor=_ints([0], d), paged_cache_geometry=object()), r"paged_cache_geometry="),
    ("decode-modulo", lambda d, t: T.paged_scaled_dot_product_attention_decode(
        t, t, t, _ints([[0]], d), cur_pos_tensor=_ints([0], d), cache_position_modulo=8), r"cache_position_modulo=8"),
    ("decode-spec_tiles", lambda d, t: T.paged_scaled_dot_product_attention_decode(
        t, t, t, _ints([[0]], d), cur_pos_tensor=_ints([0], d), spec_multi_pos_tiles=2), r"spec_multi_pos_tiles=2"),
    ("sdpa-window_offset", lambda d, t: T.scaled_dot_product_attention(t, t, t, windowed_q_token_offset=32),
     r"windowed_q_token_offset=32"),
    ("sdpa-window_offset_tensor", lambda d, t: T.scaled_dot_product_attention(
        t, t, t, windowed_q_token_offset_tensor=_ints([0], d)), r"windowed_q_token_offset_tensor="),
    ("sdpa-block_map", lambda d, t: T.scaled_dot_product_attention(t, t, t, attn_mask_block_map=object()),
     r"attn_mask_block_map="),
    ("decode-share_cache", lambda d, t: T.scaled_dot_product_attention_decode(t, t, t, cur_pos=[0], share_cache=True),
     r"share_cache=True"),
]


def _gdn(device, t=8, h=2, k=32):
    g = torch.Generator().manual_seed(3)
    q = _tile(torch.randn(1, t, h, k, generator=g), device, ttsim.float32)
    v = _tile(torch.randn(1, t, h, k, generator=g), device, ttsim.float32)
    gate = _tile(-torch.rand(1, t, h, generator=g), device, ttsim.float32)
    beta = _tile(torch.rand(1, t, h, generator=g), device, ttsim.float32)
    return q, q, v, gate, beta


@pytest.mark.parametrize("call, message", [pytest.param(c, m, id=i) for i, c, m in REFUSED])
def test_unmodelled_keywords_are_refused_at_the_call(device, call, message):
    t = _tile(torch.zeros(1, 1, 32, 32), device)
    with pytest.raises(ttsim.TTFatal, match=message):
        call(device, t)


# -- keywords that change values ------------------------------------------------------

def _host(t):
    return ttsim.to_torch(t).float()


def test_binary_dtype_and_rounding_mode(device):
    a, b = _r(32, 32, seed=1) * 10, _r(32, 32, seed=2).abs() + 0.5
    ta, tb = _tile(a, device), _tile(b, device)
    af, bf = a.bfloat16().float(), b.bfloat16().float()
    for name, fn in (("subtract", torch.sub), ("multiply", torch.mul), ("maximum", torch.maximum)):
        out = getattr(ttsim, name)(ta, tb, dtype=ttsim.float32)
        assert out.dtype == ttsim.float32 and torch.equal(ttsim.to_torch(out), fn(af, bf)), name
    floor = ttsim.divide(ta, tb, rounding_mode="floor", dtype=ttsim.float32)
    trunc = ttsim.divide(ta, tb, rounding_mode="trunc", dtype=ttsim.float32)
    assert torch.equal(ttsim.to_torch(floor), torch.div(af, bf, rounding_mode="floor"))
    assert torch.equal(ttsim.to_torch(trunc), torch.div(af, bf, rounding_mode="trunc"))
    assert not torch.equal(ttsim.to_torch(floor), ttsim.to_torch(trunc))


def test_comparisons_write_their_dtype_and_output_tensor(device):
    a = _tile(torch.arange(1024.0).reshape(32, 32) % 3, device)
    b = _tile(torch.ones(32, 32), device)
    out = _tile(torch.zeros(32, 32), device, ttsim.float32)
    for name, want in (("eq", (torch.arange(1024).reshape(32, 32) % 3 == 1)),
                       ("ne", (torch.arange(1024).reshape(32, 32) % 3 != 1))):
        got = getattr(ttsim, name)(a, b, dtype=ttsim.float32, output_tensor=out)
        assert got is out and torch.equal(ttsim.to_torch(out), want.float()), name


@pytest.mark.parametrize("name, fn", [("log", torch.log), ("reciprocal", torch.reciprocal), ("rsqrt", torch.rsqrt),
                                      ("sqrt", torch.sqrt), ("square", torch.square)])
def test_more_unary_ops_write_output_tensor(device, name, fn):
    a = _r(32, 32, seed=4).abs() + 0.5
    out = _tile(torch.zeros(32, 32), device, ttsim.float32)
    getattr(ttsim, name)(_tile(a, device, ttsim.float32), output_tensor=out)
    assert torch.allclose(ttsim.to_torch(out), fn(a), rtol=1e-6)


def test_softplus_beta_and_threshold(device):
    x = torch.linspace(-4, 4, 1024).reshape(32, 32)
    got = _host(ttsim.softplus(_tile(x, device, ttsim.float32), beta=2.0, threshold=1.0))
    assert torch.allclose(got, torch.nn.functional.softplus(x, beta=2.0, threshold=1.0), atol=1e-6)
    assert not torch.allclose(got, torch.nn.functional.softplus(x), atol=1e-2)


def test_matmul_and_linear_keywords(device):
    a, w, bias = _r(64, 32, seed=5), _r(64, 32, seed=6), _r(1, 64, seed=7)
    ta, tw, tb = _tile(a, device, ttsim.float32), _tile(w, device, ttsim.float32), _tile(bias, device, ttsim.float32)
    mm = ttsim.matmul(ta, tw, transpose_b=True, dtype=ttsim.float32, activation="relu")
    assert mm.dtype == ttsim.float32
    assert torch.allclose(_host(mm), torch.relu(a @ w.T), atol=1e-4)
    lin = ttsim.linear(ta, tw, bias=tb, transpose_b=True, activation="silu")
    assert torch.allclose(_host(lin), torch.nn.functional.silu(a @ w.T + bias), atol=1e-4)
    lt = ttsim.linear(_tile(a.T.contiguous(), device, ttsim.float32), tw, transpose_a=True, transpose_b=True)
    assert torch.allclose(_host(lt), a @ w.T, atol=1e-4)


def test_reduction_scalar_and_output_layout(device):
    x = _r(32, 64, seed=8)
    t = _tile(x, device, ttsim.float32)
    assert torch.allclose(_host(ttsim.max(t, 1, scalar=2.0)), x.amax(1) * 2, atol=1e-5)
    m = ttsim.mean(t, 1, scalar=0.5, output_layout=ttsim.ROW_MAJOR_LAYOUT)
    assert m.layout == ttsim.ROW_MAJOR_LAYOUT and torch.allclose(_host(m), x.mean(1) * 0.5, atol=1e-5)
    s = ttsim.sum(t, 0, output_layout=ttsim.ROW_MAJOR_LAYOUT)
    assert s.layout == ttsim.ROW_MAJOR_LAYOUT and torch.allclose(_host(s), x.sum(0), atol=1e-4)


def test_norm_bias_and_residual(device):
    x, r, w, b = _r(32, 64, seed=9), _r(32, 64, seed=10), _r(64, seed=11), _r(64, seed=12)
    dev = [_tile(v, device, ttsim.float32) for v in (x, r)] + [_rm(v.reshape(1, 1, 2, 32), device, ttsim.float32)
                                                               for v in (w, b)]
    rms = _host(ttsim.rms_norm(dev[0], epsilon=1e-6, weight=dev[2], bias=dev[3]))
    want = x * torch.rsqrt(x.square().mean(-1, keepdim=True) + 1e-6) * w + b
    assert torch.allclose(rms, want, atol=1e-4)
    ln = _host(ttsim.layer_norm(dev[0], epsilon=1e-5, residual_input_tensor=dev[1]))
    assert torch.allclose(ln, torch.nn.functional.layer_norm(x + r, (64,), eps=1e-5), atol=1e-4)


def test_embedding_type_and_dtype(device):
    table = _r(8, 32, seed=13)
    ids = _rm(torch.tensor([[1, 3, 3, 7]], dtype=torch.int32), device, ttsim.uint32)
    out = ttsim.embedding(ids, _rm(table, device, ttsim.float32), padding_idx=3,
                          embeddings_type=ttsim.EmbeddingsType.PADDED, dtype=ttsim.float32)
    got = _host(out)[0]
    assert out.dtype == ttsim.float32
    assert torch.equal(got[0], table[1]) and not got[1].any() and not got[2].any() and torch.equal(got[3], table[7])


def test_layout_dtype_and_pad_values_on_host(device):
    x = torch.arange(6.0).reshape(2, 3)
    host = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, pad_value=-7.0)
    assert host._host[0][0, 5].item() == -7.0  # tile padding holds pad_value
    rm = ttsim.from_torch(x, dtype=ttsim.float32)
    tiled = ttsim.to_layout(rm, ttsim.TILE_LAYOUT, dtype=ttsim.bfloat16, pad_value=2.5)
    assert tiled.dtype == ttsim.bfloat16 and tiled._host[0][1, 31].item() == 2.5
    assert torch.equal(ttsim.to_torch(tiled, dtype=torch.float32), x)
    assert ttsim.to_torch(tiled, dtype=torch.float32).dtype == torch.float32
    assert list(ttsim.to_torch(ttsim.from_torch(torch.zeros(1, 1, 5)), torch_rank=1).shape) == [5]


def test_gdn_scale_and_final_state(device):
    q, k, v, g, beta = _gdn(device)
    o1 = _host(T.fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=0.5))
    o2 = _host(T.fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=1.0))
    assert torch.allclose(o1 * 2, o2, atol=1e-5)  # the output is linear in the query scale
    o3, s3 = T.chunk_gated_delta_rule(q, k, v, g, beta, scale=0.5, output_final_state=True, chunk_size=4)
    o4, s4 = T.fused_recurrent_gated_delta_rule(q, k, v, g, beta, scale=0.5, output_final_state=True)
    assert torch.allclose(_host(o3), o1, atol=1e-4) and torch.allclose(_host(s3), _host(s4), atol=1e-4)


def test_contiguous_decode_keywords(device):
    g = torch.Generator().manual_seed(14)
    b, nqh, s, d = 2, 4, 64, 32
    q, k, v = torch.randn(1, b, nqh, d, generator=g), torch.randn(b, 1, s, d, generator=g), torch.randn(b, 1, s, d, generator=g)
    tq, tk, tv = (_tile(x, device) for x in (q, k, v))
    mask = torch.zeros(b, 1, nqh, s)
    mask[..., 10:] = float("-inf")
    causal = _host(T.scaled_dot_product_attention_decode(tq, tk, tv, cur_pos=[9, 9], scale=0.3))
    masked = _host(T.scaled_dot_product_attention_decode(tq, tk, tv, is_causal=False, attn_mask=_tile(mask, device),
                                                         scale=0.3))
    assert torch.allclose(causal, masked, atol=1e-6)  # the same keys, two ways
    other = _host(T.scaled_dot_product_attention_decode(tq, tk, tv, cur_pos=[9, 9]))
    assert not torch.allclose(causal, other, atol=1e-3)  # scale matters
    sunk = _host(T.scaled_dot_product_attention_decode(tq, tk, tv, cur_pos=[9, 9], scale=0.3,
                                                       attention_sink=_tile(torch.full((nqh, 32), 50.0), device)))
    assert sunk.abs().max() < causal.abs().max() / 10  # a dominant sink takes almost all the weight


def test_update_cache_with_a_list_of_positions(device):
    cache = _tile(torch.zeros(2, 1, 32, 32), device)
    x = torch.randn(1, 2, 1, 32, generator=torch.Generator().manual_seed(15))
    E.paged_update_cache(cache, _tile(x, device), update_idxs=[5, -1], page_table=_ints([[1], [0]], device))
    got = ttsim.to_torch(cache).float()
    assert torch.equal(got[1, 0, 5], x[0, 0, 0].bfloat16().float())
    assert got.abs().sum() == got[1, 0, 5].abs().sum()  # row 1 (-1) skipped, nothing else written


def test_queue_and_chip_keywords():
    """cq_id / queue_id / blocking pick the queue and the wait; physical_device_ids the chip."""
    mesh = ttsim.open_mesh_device(ttsim.MeshShape(1, 1), num_command_queues=2, physical_device_ids=[1])
    try:
        assert mesh.get_device_ids() == [1] and mesh.num_command_queues == 2
        x = torch.arange(1024.0).reshape(32, 32)
        t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=mesh, cq_id=1)
        u = ttsim.to_device(ttsim.from_torch(x * 2, dtype=ttsim.float32), mesh, queue_id=1)
        ttsim.synchronize_device(mesh, cq_id=1)
        back = ttsim.from_device(t, blocking=True, queue_id=1)
        assert torch.equal(ttsim.to_torch(back), x)
        host = ttsim.from_torch(torch.zeros(32, 32), dtype=ttsim.float32)
        ttsim.copy_device_to_host_tensor(u, host, blocking=True, cq_id=1)
        assert torch.equal(ttsim.to_torch(host), x * 2)
        with pytest.raises(ttsim.TTFatal, match=r"cq_id 2 is out of range"):
            ttsim.from_device(t, queue_id=2)
    finally:
        ttsim.close_mesh_device(mesh)
