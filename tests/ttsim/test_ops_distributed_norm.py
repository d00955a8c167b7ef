"""rms_norm_pre_all_gather / rms_norm_post_all_gather: tt_transformers' tt_distributed_rmsnorm
on a 1x2 mesh (pre, reshape, all_gather on dim 3, post) against a float64 RMS norm over the
full width; the stats layout of tt-metal's golden (sum(x^2) in column 0 of each 32-wide block)."""

import pytest
import torch

import ttsim


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _bf(x):
    return x.to(torch.bfloat16)


def test_pre_all_gather_puts_the_sum_of_squares_in_column_zero(device):
    x = _bf(torch.randn(1, 1, 40, 96, generator=_g(1)))
    r = _bf(torch.randn(1, 1, 40, 96, generator=_g(2)))
    dev = lambda t: ttsim.from_torch(t, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)  # noqa: E731
    stats = ttsim.rms_norm_pre_all_gather(dev(x), residual_input_tensor=dev(r))
    assert list(stats.shape) == [1, 1, 40, 32] and stats.dtype == ttsim.bfloat16
    got = ttsim.to_torch(stats)
    want = (x.double() + r.double()).square().sum(-1).float().to(torch.bfloat16)
    assert torch.equal(got[..., 0], want)
    assert torch.equal(got[..., 1:], torch.zeros(1, 1, 40, 31, dtype=torch.bfloat16))
    f32 = ttsim.rms_norm_pre_all_gather(dev(x), dtype=ttsim.float32)
    assert f32.dtype == ttsim.float32
    assert torch.allclose(ttsim.to_torch(f32)[..., 0], x.float().square().sum(-1), rtol=1e-6)


@pytest.mark.parametrize("mesh_device", [2], indirect=True)
def test_distributed_rms_norm_over_a_1x2_mesh_equals_the_full_width_norm(mesh_device):
    """The sequence tt_transformers.tt.ccl.tt_distributed_rmsnorm runs."""
    x = _bf(torch.randn(1, 1, 32, 256, generator=_g(3)) * 3)
    gamma = _bf(torch.randn(256, generator=_g(4)))
    shard = ttsim.ShardTensorToMesh(mesh_device, dim=3)
    tx = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=mesh_device, mesh_mapper=shard)
    tg = ttsim.from_torch(gamma.reshape(1, 1, 8, 32), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT,
                          device=mesh_device, mesh_mapper=ttsim.ShardTensorToMesh(mesh_device, dim=2))
    stats = ttsim.rms_norm_pre_all_gather(tx, dtype=ttsim.bfloat16)
    stats = ttsim.reshape(stats, ttsim.Shape((1, 1, x.shape[-2], 32)))
    gathered = ttsim.all_gather(stats, 3, cluster_axis=1, memory_config=ttsim.DRAM_MEMORY_CONFIG)
    assert list(gathered.shape) == [1, 1, 32, 64]
    out = ttsim.rms_norm_post_all_gather(tx, gathered, epsilon=1e-6, weight=tg)
    got = ttsim.to_torch(out, mesh_composer=ttsim.ConcatMeshToTensor(mesh_device, dim=3)).double()
    xd = x.double()
    want = xd * torch.rsqrt(xd.square().mean(-1, keepdim=True) + 1e-6) * gamma.double()
    assert ttsim.pearson_correlation_coefficient(want, got) > 0.9999
    # the global mean square (not each chip's own) normalises: a per-chip norm is measurably different
    local = torch.cat([h * torch.rsqrt(h.square().mean(-1, keepdim=True) + 1e-6) for h in xd.chunk(2, dim=-1)], -1)
    assert (got - want).abs().max() < 0.05 < (local * gamma.double() - want).abs().max()


def test_post_all_gather_bias_dtype_and_golden(device):
    x = _bf(torch.randn(1, 1, 32, 64, generator=_g(5)))
    b = _bf(torch.randn(64, generator=_g(6)))
    dev = lambda t, **k: ttsim.from_torch(t, layout=ttsim.TILE_LAYOUT, device=device, **k)  # noqa: E731
    tx = dev(x, dtype=ttsim.bfloat16)
    stats = ttsim.rms_norm_pre_all_gather(tx)
    out = ttsim.rms_norm_post_all_gather(tx, stats, epsilon=1e-5, bias=dev(b.reshape(1, 1, 1, 64)),
                                         dtype=ttsim.float32)
    assert out.dtype == ttsim.float32
    golden_stats = ttsim.get_golden_function(ttsim.rms_norm_pre_all_gather)(x.float())
    want = ttsim.get_golden_function(ttsim.rms_norm_post_all_gather)(x.float(), golden_stats, epsilon=1e-5,
                                                                     bias=b.float())
    assert torch.allclose(ttsim.to_torch(out), want, rtol=1e-2, atol=1e-2)
    assert ttsim.pearson_correlation_coefficient(want, ttsim.to_torch(out)) > 0.9999


def test_distributed_norm_refusals_in_tt_metals_words(device):
    rm = ttsim.from_torch(torch.ones(1, 1, 32, 64), dtype=ttsim.bfloat16, device=device)
    with pytest.raises(ttsim.TTFatal, match="Only tilized inputs supported."):
        ttsim.rms_norm_pre_all_gather(rm)
    tile = ttsim.from_torch(torch.ones(1, 1, 32, 64), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match="Only interleaved inputs supported."):
        ttsim.rms_norm_pre_all_gather(ttsim.to_memory_config(tile, ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG))
    ints = ttsim.from_torch(torch.ones(1, 1, 32, 64, dtype=torch.int32), layout=ttsim.TILE_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match="Input data format not supported."):
        ttsim.rms_norm_pre_all_gather(ints)
    with pytest.raises(ttsim.TTFatal, match="Residual tensor must have TILE layout"):
        ttsim.rms_norm_pre_all_gather(tile, residual_input_tensor=rm)
    with pytest.raises(ttsim.TTFatal, match="Stats tensor must have TILE layout"):
        ttsim.rms_norm_post_all_gather(tile, ttsim.from_torch(torch.ones(1, 1, 32, 32), dtype=ttsim.bfloat16,
                                                              device=device))
    with pytest.raises(ttsim.TTFatal, match="multiple of 32"):
        ttsim.rms_norm_post_all_gather(tile, ttsim.from_torch(torch.ones(1, 1, 32, 48), dtype=ttsim.bfloat16,
                                                              layout=ttsim.TILE_LAYOUT, device=device))
