"""experimental.nlp_create_qkv_heads(_decode) and nlp_concat_heads(_decode) against the
references of tt-metal's unit tests (test_nlp_create_qkv_heads.py,
test_nlp_create_qkv_heads_decode.py): torch.split of the fused projection, heads moved to dim 1
(prefill) or kept as [1, B, heads, HD] (decode); pure data movement, so bit-exact."""

import pytest
import torch

import ttsim


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _dev(x, device, dtype=ttsim.bfloat16, **kw):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device, **kw)


@pytest.mark.parametrize("batch, seq_len, head_dim, nq, nkv, transpose_k, separate_kv", [
    (1, 128, 64, 71, 1, False, False), (3, 64, 96, 5, 3, True, False), (2, 64, 64, 8, 8, True, True),
    (1, 32, 128, 4, 1, False, False)])
def test_create_qkv_heads_is_the_unit_tests_reference(device, batch, seq_len, head_dim, nq, nkv, transpose_k,
                                                        separate_kv):
    if separate_kv:
        a = torch.randn(batch, 1, seq_len, nq * head_dim, generator=_g(1))
        b = torch.randn(batch, 1, seq_len, 2 * nkv * head_dim, generator=_g(2))
        q, k, v = ttsim.experimental.nlp_create_qkv_heads(_dev(a, device), _dev(b, device), num_heads=nq,
                                                          num_kv_heads=nkv, transpose_k_heads=transpose_k,
                                                          memory_config=ttsim.L1_MEMORY_CONFIG)
        ref_q, (ref_k, ref_v) = a, torch.split(b, [nkv * head_dim, nkv * head_dim], dim=-1)
    else:
        a = torch.randn(batch, 1, seq_len, (nq + 2 * nkv) * head_dim, generator=_g(3))
        q, k, v = ttsim.experimental.nlp_create_qkv_heads(_dev(a, device), num_heads=nq, num_kv_heads=nkv,
                                                          transpose_k_heads=transpose_k)
        ref_q, ref_k, ref_v = torch.split(a, [nq * head_dim, nkv * head_dim, nkv * head_dim], dim=-1)
    ref_q = ref_q.reshape(batch, seq_len, nq, head_dim).transpose(-3, -2)
    ref_k = ref_k.reshape(batch, seq_len, nkv, head_dim).transpose(-3, -2)
    ref_v = ref_v.reshape(batch, seq_len, nkv, head_dim).transpose(-3, -2)
    if transpose_k:
        ref_k = ref_k.transpose(-2, -1)
    assert list(q.padded_shape) == [batch, nq, seq_len, head_dim]
    assert list(k.padded_shape) == ([batch, nkv, head_dim, seq_len] if transpose_k else [batch, nkv, seq_len, head_dim])
    for got, ref in ((q, ref_q), (k, ref_k), (v, ref_v)):
        assert torch.equal(ttsim.to_torch(got), ref.to(torch.bfloat16))


def test_create_qkv_heads_kv_tied_reads_v_from_ks_columns(device):
    a = torch.randn(2, 1, 64, (4 + 2) * 64, generator=_g(4))
    q, k, v = ttsim.experimental.nlp_create_qkv_heads(_dev(a, device), num_heads=4, num_kv_heads=2,
                                                      transpose_k_heads=False, kv_tied=True)
    src_q, src_kv = torch.split(a, [4 * 64, 2 * 64], dim=-1)
    ref_kv = src_kv.reshape(2, 64, 2, 64).transpose(1, 2).to(torch.bfloat16)
    assert torch.equal(ttsim.to_torch(k), ref_kv) and torch.equal(ttsim.to_torch(v), ref_kv)
    assert torch.equal(ttsim.to_torch(q), src_q.reshape(2, 64, 4, 64).transpose(1, 2).to(torch.bfloat16))


def test_create_qkv_heads_refusals(device):
    x = _dev(torch.randn(1, 1, 32, 6 * 64), device)
    with pytest.raises(ttsim.TTFatal, match="does not split"):
        ttsim.experimental.nlp_create_qkv_heads(x, num_heads=3, num_kv_heads=2)
    with pytest.raises(ttsim.TTFatal, match="multiple of 32"):
        ttsim.experimental.nlp_create_qkv_heads(_dev(torch.randn(1, 1, 32, 6 * 16), device), num_heads=4,
                                                num_kv_heads=1)
    with pytest.raises(ttsim.TTFatal, match="output_tensors= is not modelled"):
        ttsim.experimental.nlp_create_qkv_heads(x, num_heads=4, num_kv_heads=1, output_tensors=[x, x, x])
    with pytest.raises(ttsim.TTFatal, match="input_kv must be"):
        ttsim.experimental.nlp_create_qkv_heads(x, _dev(torch.randn(1, 1, 32, 64), device), num_heads=6,
                                                num_kv_heads=1)


@pytest.mark.parametrize("nq, nkv, head_dim, batch", [(8, 1, 128, 32), (8, 4, 96, 8), (16, 2, 64, 1), (4, 1, 256, 3)])
def test_create_qkv_heads_decode_is_the_unit_tests_reference(device, nq, nkv, head_dim, batch):
    proj = torch.rand(1, 1, batch, head_dim * (nq + 2 * nkv), generator=_g(batch))
    q, k, v = ttsim.experimental.nlp_create_qkv_heads_decode(
        _dev(proj, device, memory_config=ttsim.L1_MEMORY_CONFIG), num_heads=nq, num_kv_heads=nkv,
        memory_config=ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    ref_q = proj[:, :, :batch, :head_dim * nq].view(1, batch, nq, head_dim)
    ref_k = proj[:, :, :batch, head_dim * nq:head_dim * (nq + nkv)].view(1, batch, nkv, head_dim)
    ref_v = proj[:, :, :batch, head_dim * (nq + nkv):].view(1, batch, nkv, head_dim)
    for got, ref in ((q, ref_q), (k, ref_k), (v, ref_v)):
        assert got.memory_config().memory_layout == ttsim.TensorMemoryLayout.HEIGHT_SHARDED
        assert torch.equal(ttsim.to_torch(got), ref.to(torch.bfloat16))


@pytest.mark.parametrize("offset", [0, 8, 24])
def test_create_qkv_heads_decode_batch_offset_reads_the_device_tensor(device, offset):
    """test_create_heads_with_slice: batch_offset is an int tensor on device, slice_size users."""
    proj = torch.rand(1, 1, 32, 128 * 10, generator=_g(offset))
    off = ttsim.from_torch(torch.tensor([offset], dtype=torch.int32), device=device, layout=ttsim.TILE_LAYOUT)
    q, k, v = ttsim.experimental.nlp_create_qkv_heads_decode(_dev(proj, device), num_heads=8, num_kv_heads=1,
                                                             batch_offset=off, slice_size=8)
    assert list(q.shape) == [1, 8, 8, 128]
    assert torch.equal(ttsim.to_torch(q), proj[:, :, offset:offset + 8, :1024].view(1, 8, 8, 128).to(torch.bfloat16))
    assert torch.equal(ttsim.to_torch(v), proj[:, :, offset:offset + 8, 1152:].view(1, 8, 1, 128).to(torch.bfloat16))


def test_create_qkv_heads_decode_refusals(device):
    x = _dev(torch.rand(1, 1, 8, 128 * 10), device)
    with pytest.raises(ttsim.TTFatal, match="must be HEIGHT_SHARDED"):
        ttsim.experimental.nlp_create_qkv_heads_decode(x, num_heads=8, num_kv_heads=1,
                                                       memory_config=ttsim.L1_MEMORY_CONFIG)
    with pytest.raises(ttsim.TTFatal, match="batch_offset and slice_size go together"):
        ttsim.experimental.nlp_create_qkv_heads_decode(x, num_heads=8, num_kv_heads=1, slice_size=4)
    with pytest.raises(ttsim.TTFatal, match="output_tensors= is not modelled"):
        ttsim.experimental.nlp_create_qkv_heads_decode(x, num_heads=8, num_kv_heads=1, output_tensors=[x, x, x])
    with pytest.raises(ttsim.TTFatal, match="num_heads 40 must fit one tile"):
        ttsim.experimental.nlp_create_qkv_heads_decode(_dev(torch.rand(1, 1, 8, 32 * 42), device), num_heads=40,
                                                       num_kv_heads=1)


@pytest.mark.parametrize("batch, nh, seq, hd", [(1, 8, 128, 64), (2, 3, 64, 96)])
def test_concat_heads_inverts_create_heads(device, batch, nh, seq, hd):
    x = torch.randn(batch, nh, seq, hd, generator=_g(nh))
    out = ttsim.experimental.nlp_concat_heads(_dev(x, device), memory_config=ttsim.L1_MEMORY_CONFIG)
    assert list(out.shape) == [batch, 1, seq, nh * hd]
    assert torch.equal(ttsim.to_torch(out), x.transpose(1, 2).reshape(batch, 1, seq, nh * hd).to(torch.bfloat16))


def test_concat_heads_decode_pads_the_batch_to_32_and_leaves_those_rows_alone(device):
    """attention/tp.py's _concat_heads_decode: height-sharded [1,B,NH,HD] -> [1,1,32,NH*HD], sliced back to B."""
    b, nh, hd = 5, 8, 64
    x = torch.randn(1, b, nh, hd, generator=_g(40))
    sh = ttsim.to_memory_config(_dev(x, device, memory_config=ttsim.L1_MEMORY_CONFIG),
                                ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    out = ttsim.experimental.nlp_concat_heads_decode(sh, num_heads=nh)
    assert list(out.shape) == [1, 1, 32, nh * hd]
    assert out.memory_config().memory_layout == ttsim.TensorMemoryLayout.WIDTH_SHARDED
    got = ttsim.to_torch(out)
    assert torch.equal(got[0, 0, :b], x.reshape(b, nh * hd).to(torch.bfloat16))
    sliced = ttsim.slice(out, (0, 0, 0, 0), (1, 1, b, nh * hd))
    assert torch.equal(ttsim.to_torch(sliced)[0, 0], x.reshape(b, nh * hd).to(torch.bfloat16))


def test_concat_heads_decode_rows_past_the_batch_are_what_memory_held(device):
    """The op writes B rows: the other 32 - B hold the buffer's previous occupant, as on a card."""
    b, nh, hd = 2, 4, 32
    junk = ttsim.from_torch(torch.full((1, 1, 32, nh * hd), 7.0), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT,
                            device=device, memory_config=ttsim.L1_WIDTH_SHARDED_MEMORY_CONFIG)
    ttsim.deallocate(junk)  # its L1 is free; the next allocation of the same size lands there
    x = torch.randn(1, b, nh, hd, generator=_g(41))
    sh = ttsim.to_memory_config(_dev(x, device, memory_config=ttsim.DRAM_MEMORY_CONFIG),
                                ttsim.MemoryConfig(ttsim.TensorMemoryLayout.HEIGHT_SHARDED, ttsim.BufferType.DRAM))
    got = ttsim.to_torch(ttsim.experimental.nlp_concat_heads_decode(sh, num_heads=nh))
    assert torch.equal(got[0, 0, :b], x.reshape(b, nh * hd).to(torch.bfloat16))
    assert torch.equal(got[0, 0, b:], torch.full((32 - b, nh * hd), 7.0, dtype=torch.bfloat16))


def test_concat_heads_decode_refusals(device):
    x = _dev(torch.randn(1, 4, 8, 64), device)
    with pytest.raises(ttsim.TTFatal, match="HEIGHT_SHARDED"):
        ttsim.experimental.nlp_concat_heads_decode(x, num_heads=8)
    sh = ttsim.to_memory_config(x, ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ttsim.TTFatal, match="output_tensor= is not modelled"):
        ttsim.experimental.nlp_concat_heads_decode(sh, num_heads=8, output_tensor=x)
    with pytest.raises(ttsim.TTFatal, match="exceeds the input's 8 heads"):
        ttsim.experimental.nlp_concat_heads_decode(sh, num_heads=9)
