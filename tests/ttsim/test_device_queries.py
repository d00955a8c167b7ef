"""Device queries tt-metal's tests make: the program cache (hits for the same program,
new entries for new specs), core_grid and compute_with_storage_grid_size, and the arch
queries (arch(), device.is_blackhole / is_wormhole_b0)."""

import torch

import ttsim


def _tile(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device)


def test_the_same_program_twice_is_one_cache_entry(device):
    device.clear_program_cache()
    a, b = _tile(torch.randn(32, 64), device), _tile(torch.randn(32, 64), device)
    for _ in range(3):
        ttsim.add(a, b)
    assert device.num_program_cache_entries() == 1
    ttsim.add(_tile(torch.randn(64, 64), device), _tile(torch.randn(64, 64), device))  # new shapes: new program
    ttsim.add(a, b, dtype=ttsim.float32)  # new output dtype: new program
    ttsim.multiply(a, b)  # another op
    assert device.num_program_cache_entries() == 4
    assert device.program_cache.hits == 2


def test_each_part_of_a_tensor_spec_makes_its_own_program(device):
    """Shape, dtype, layout and memory config each key the program; values and addresses do not."""
    device.clear_program_cache()
    x = torch.randn(32, 64)
    variants = [
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device),
        ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device),
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT, device=device),
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device,
                         memory_config=ttsim.L1_MEMORY_CONFIG),
        ttsim.from_torch(x[:, :32], dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device),
    ]
    for t in variants:
        ttsim.neg(t)
    assert device.num_program_cache_entries() == len(variants) and device.program_cache.hits == 0
    ttsim.neg(ttsim.from_torch(x * 3, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device))
    assert device.num_program_cache_entries() == len(variants) and device.program_cache.hits == 1


def test_sdpa_run_twice_compiles_once(device):
    """tt-metal's test_sdpa_tt_with_program_cache idiom (host conversions are not programs)."""
    device.clear_program_cache()
    cfg = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=device.compute_with_storage_grid_size(),
                                  q_chunk_size=32, k_chunk_size=32)
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        q, k, v = (_tile(torch.randn(1, 2, 64, 32, generator=g), device, ttsim.bfloat8_b) for _ in range(3))
        ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(q, k, v, program_config=cfg))
    assert device.num_program_cache_entries() == 1


def test_disable_and_clear_empties_the_cache_until_enabled(device):
    a = _tile(torch.randn(32, 32), device)
    ttsim.neg(a)
    assert device.num_program_cache_entries() >= 1
    device.disable_and_clear_program_cache()
    ttsim.neg(a)
    assert device.num_program_cache_entries() == 0 and not device.program_cache_enabled
    device.enable_program_cache()
    ttsim.neg(a)
    ttsim.neg(a)
    assert device.num_program_cache_entries() == 1


def test_core_grid_and_compute_grid_agree(device):
    size = device.compute_with_storage_grid_size()
    assert (size.x, size.y) == (13, 10)  # Blackhole p150a worker grid
    assert device.core_grid == ttsim.CoreGrid(x=13, y=10)
    assert device.core_grid.num_cores == 130 and repr(device.core_grid) == "ttnn.CoreGrid(x=13, y=10)"


def test_core_grid_refuses_non_positive_sizes():
    import pytest

    with pytest.raises(ttsim.TTFatal, match=r"CoreGrid: y must be a positive int, got 0"):
        ttsim.CoreGrid(x=8, y=0)


def test_compute_kernel_config_is_built_as_tt_metal_builds_it(device):
    """tt-metal tests build WormholeComputeKernelConfig and pass it to ops: a precision/placement
    hint (ttsim/hints.py) that ttsim accepts and computes in fp32 regardless."""
    import pytest

    cfg = ttsim.WormholeComputeKernelConfig(math_fidelity=ttsim.MathFidelity.HiFi2, math_approx_mode=False,
                                            fp32_dest_acc_en=True, packer_l1_acc=False,
                                            throttle_level=ttsim.ThrottleLevel.LEVEL_1)
    assert (cfg.math_fidelity, cfg.fp32_dest_acc_en, cfg.throttle_level) == (
        ttsim.MathFidelity.HiFi2, True, ttsim.ThrottleLevel.LEVEL_1)
    a = _tile(torch.randn(32, 32), device)
    assert torch.equal(ttsim.to_torch(ttsim.matmul(a, a, compute_kernel_config=cfg)), ttsim.to_torch(ttsim.matmul(a, a)))
    with pytest.raises(ttsim.TTFatal, match=r"math_fidelity must be a ttnn.MathFidelity"):
        ttsim.WormholeComputeKernelConfig(math_fidelity="HiFi4")


def _paged_decode_setup(device, b=2, nkv=1, nh=8, bs=32, pages=8, d=64):
    g = torch.Generator().manual_seed(11)
    k = _tile(torch.randn(b * pages, nkv, bs, d, generator=g), device)
    v = _tile(torch.randn(b * pages, nkv, bs, d, generator=g), device)
    table = ttsim.from_torch(torch.arange(b * pages, dtype=torch.int32).reshape(b, pages), dtype=ttsim.int32,
                             device=device)
    q = _tile(torch.randn(1, b, nh, d, generator=g), device)
    return q, k, v, table


def _pc(k_chunk):
    return ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(8, 8), q_chunk_size=32,
                                   k_chunk_size=k_chunk, exp_approx_mode=False)


def test_paged_decode_keys_its_program_config_not_its_positions(device):
    """tt-metal's run_test_sdpa_decode_paged_attention: growing positions switch k_chunk_size
    32 -> 128 (and a last non-causal step with a mask); it expects one program per chunk size
    plus the non-causal one, while the positions themselves are runtime arguments."""
    device.clear_program_cache()
    q, k, v, table = _paged_decode_setup(device)
    decode = ttsim.transformer.paged_scaled_dot_product_attention_decode
    for pos, chunk in ((5, 32), (40, 32), (100, 128), (200, 128)):
        cur = ttsim.from_torch(torch.tensor([pos, pos // 2], dtype=torch.int32), dtype=ttsim.int32, device=device)
        decode(q, k, v, table, cur_pos_tensor=cur, scale=0.125, program_config=_pc(chunk))
    assert device.num_program_cache_entries() == 2 and device.program_cache.hits == 2
    mask = _tile(torch.zeros(2, 1, 8, 8 * 32), device, ttsim.bfloat4_b)
    decode(q, k, v, table, is_causal=False, attn_mask=mask, scale=0.125, program_config=_pc(128))
    assert device.num_program_cache_entries() == 3


def test_paged_decode_scale_and_window_are_part_of_the_program(device):
    device.clear_program_cache()
    q, k, v, table = _paged_decode_setup(device)
    cur = ttsim.from_torch(torch.tensor([70, 90], dtype=torch.int32), dtype=ttsim.int32, device=device)
    decode = ttsim.transformer.paged_scaled_dot_product_attention_decode
    decode(q, k, v, table, cur_pos_tensor=cur, scale=0.125, program_config=_pc(32))
    decode(q, k, v, table, cur_pos_tensor=cur, scale=0.25, program_config=_pc(32))
    decode(q, k, v, table, cur_pos_tensor=cur, scale=0.25, program_config=_pc(32), sliding_window_size=64)
    decode(q, k, v, table, cur_pos_tensor=cur, scale=0.25, program_config=_pc(32), sliding_window_size=64)
    assert device.num_program_cache_entries() == 3 and device.program_cache.hits == 1


# -- the arch queries (arch(), device.is_blackhole / is_wormhole_b0) ---------------------------

def test_a_device_reports_the_blackhole_arch_as_the_ttnn_enum(device):
    arch = device.arch()
    assert arch is ttsim.Arch.BLACKHOLE and repr(arch) == "Arch.BLACKHOLE" and arch != ttsim.Arch.WORMHOLE_B0
    assert ttsim.device.Arch is ttsim.Arch  # ttnn.device.Arch is ttnn.Arch too
    assert ttsim.get_arch_name() == "blackhole"  # measured: the p150 mock cluster says "blackhole"


def test_is_blackhole_and_is_wormhole_b0_with_and_without_a_device(device):
    # measured on 0.81.1 without a device: is_blackhole() True, is_wormhole_b0() False
    assert ttsim.device.is_blackhole() is True and ttsim.device.is_wormhole_b0() is False
    assert ttsim.device.is_blackhole(device) is True and ttsim.device.is_wormhole_b0(device) is False


def test_the_device_form_asks_the_device_it_is_given():
    """With a device the answer is that device's arch(), not the host's arch name."""

    class Wormhole:
        def arch(self):
            return ttsim.Arch.WORMHOLE_B0

    assert ttsim.device.is_wormhole_b0(Wormhole()) is True and ttsim.device.is_blackhole(Wormhole()) is False
