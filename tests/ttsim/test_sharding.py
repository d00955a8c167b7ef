"""Sharded placement and core ranges: CoreRange / CoreRangeSet, ShardSpec,
num_cores_to_corerangeset(_in_subcoregrids), create_sharded_memory_config, the sharded presets,
interleaved_to_sharded / sharded_to_interleaved, and the check a card makes before it places a
tensor with a sharded memory config (ttsim/sharding.py).

Each semantic is checked twice: against what the real ttnn 0.81.1 host path gave
(``real["sharding"]``, recorded by conformance/dump_ttnn.py's probe_sharding), and by a ttsim-only
test of its own (values on a device, refusals at the call)."""

import pytest
import torch

import ttsim

CC, CR, CRS = ttsim.CoreCoord, ttsim.CoreRange, ttsim.CoreRangeSet
T, RM = ttsim.TILE_LAYOUT, ttsim.ROW_MAJOR_LAYOUT


def _crs(ranges):
    return CRS([CR(CC(a, b), CC(c, d)) for a, b, c, d in ranges])


def _outcome(fn) -> str:
    try:
        return repr(fn())
    except Exception as e:  # noqa: BLE001 - the refusal is what is compared
        return f"ERR {e}"


def _same(want: str, got: str) -> bool:
    """A result repr matches exactly; a refusal matches when ttsim's message holds the real info line."""
    if want.startswith("ERR "):
        return got.startswith("ERR ") and want.split(": ", 1)[1] in got
    return got == want


# -- against the real 0.81.1 host path -------------------------------------------------------------

def test_num_cores_to_corerangeset_matches_real(real):
    cases = real["sharding"]["num_cores_to_corerangeset"]
    assert len(cases) >= 15
    bad = []
    for case in cases:
        n, x, y, rw = case["args"]
        got = _outcome(lambda: ttsim.num_cores_to_corerangeset(n, CC(x, y), rw))
        if not _same(case["result"], got):
            bad.append(f"{case['args']}: ttnn {case['result']}, ttsim {got}")
    assert not bad, "\n".join(bad)


def test_num_cores_to_corerangeset_in_subcoregrids_matches_real(real):
    sh = real["sharding"]
    bad = []
    for case in sh["num_cores_to_corerangeset_in_subcoregrids"]:
        grid, x, y, n, rw = case["args"]
        got = _outcome(lambda: ttsim.num_cores_to_corerangeset_in_subcoregrids(
            CC(x, y), n, _crs(sh["sub_grids"][grid]), row_wise=rw))
        if not _same(case["result"], got):
            bad.append(f"{case['args']}: ttnn {case['result']}, ttsim {got}")
    assert not bad, "\n".join(bad)


def test_create_sharded_memory_config_matches_real(real):
    bad = []
    for case in real["sharding"]["create_sharded_memory_config"]:
        shape, grid, strategy, orient, use_hw = case["args"]
        core_grid = ttsim.CoreGrid(x=grid[0], y=grid[1]) if len(grid) == 2 and isinstance(grid[0], int) else _crs(grid)
        strat = getattr(ttsim.ShardStrategy, strategy, ttsim.TensorMemoryLayout.HEIGHT_SHARDED)
        ori = None if orient is None else getattr(ttsim.ShardOrientation, orient)
        got = _outcome(lambda: ttsim.create_sharded_memory_config(
            tuple(shape), core_grid, strat, ori, use_height_and_width_as_shard_shape=use_hw))
        if not _same(case["result"], got):
            bad.append(f"{case['args']}: ttnn {case['result']}, ttsim {got}")
    assert not bad, "\n".join(bad)


def test_placement_check_matches_the_real_tensor_spec(real):
    """Every placement the real host accepts ttsim places (bytes unchanged), every one it refuses
    ttsim refuses with the same words."""
    cases = real["sharding"]["placement"]
    assert sum(c["result"] == "OK" for c in cases) >= 10 and sum(c["result"] != "OK" for c in cases) >= 10
    bad = []
    for case in cases:
        shape, layout, _dtype, ml, ranges, shard, orient, bt = case["args"]
        mc = ttsim.MemoryConfig(getattr(ttsim.TensorMemoryLayout, ml), getattr(ttsim.BufferType, bt),
                                ttsim.ShardSpec(_crs(ranges), shard, getattr(ttsim.ShardOrientation, orient)))

        def place():
            ttsim.sharding.check_placement("place", shape, getattr(ttsim.Layout, layout), mc)
            return "OK"

        got = _outcome(place).strip("'")
        if not _same(case["result"], got):
            bad.append(f"{case['args']}: ttnn {case['result']}, ttsim {got}")
    assert not bad, "\n".join(bad)


def test_shard_spec_and_core_range_set_print_and_compare_as_real(real):
    sh = real["sharding"]
    spec = ttsim.ShardSpec(_crs([(5, 0, 6, 9), (1, 0, 3, 9)]), [32, 128], ttsim.ShardOrientation.COL_MAJOR)
    want = sh["shard_spec"]
    assert repr(spec) == want["repr"] and repr(spec.shape) == want["shape"] and repr(spec.grid) == want["grid"]
    assert repr(spec.orientation) == want["orientation"] and spec.num_cores() == want["num_cores"]
    assert repr(ttsim.MemoryConfig(ttsim.TensorMemoryLayout.HEIGHT_SHARDED, ttsim.BufferType.L1, spec)) == \
        want["memory_config"]
    order = sh["core_range_set_order"]
    assert repr(_crs([(5, 0, 6, 9), (1, 0, 3, 9)])) == order["list"]  # a list keeps its order
    assert repr(CRS({CR(CC(a, b), CC(a, b)) for a, b in ((2, 0), (0, 1), (1, 0), (0, 3))})) == order["set"]
    assert (_crs([(0, 1, 0, 1), (1, 0, 1, 0)]) == _crs([(1, 0, 1, 0), (0, 1, 0, 1)])) == \
        order["list_order_matters_for_eq"]
    assert _same(order["overlap"], _outcome(lambda: _crs([(0, 0, 1, 1), (1, 1, 2, 2)])))


# -- ttsim's own checks ---------------------------------------------------------------------------

def _sharded_cfg(shard=(32, 64), layout=ttsim.TensorMemoryLayout.HEIGHT_SHARDED, ranges=((0, 0, 7, 0),)):
    return ttsim.MemoryConfig(layout, ttsim.BufferType.L1,
                              ttsim.ShardSpec(_crs(ranges), list(shard), ttsim.ShardOrientation.ROW_MAJOR))


def test_sharded_placement_keeps_every_byte(device):
    x = torch.randn(1, 8, 32, 64).to(torch.bfloat16)
    t = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device, memory_config=_sharded_cfg())
    assert t.memory_config().is_sharded() and t.memory_config().shard_spec.shape == [32, 64]
    assert torch.equal(ttsim.to_torch(t), x)
    y = ttsim.add(t, t)  # an op on sharded inputs keeps their placement and computes the same values
    assert y.memory_config() == t.memory_config() and torch.equal(ttsim.to_torch(y), (x.float() * 2).bfloat16())


def test_a_card_refused_placement_is_refused_at_the_call(device):
    x = torch.randn(1, 1, 256, 64)
    with pytest.raises(ttsim.TTFatal, match=r"to_device: Number of shards along height 8 must not exceed "
                                            r"number of cores 4"):
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device,
                         memory_config=_sharded_cfg(ranges=((0, 0, 3, 0),)))
    t = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"neg: Physical shard shape \(16, 64\) must be tile \{32, 32\} sized!"):
        ttsim.neg(t, memory_config=_sharded_cfg(shard=(16, 64)))
    with pytest.raises(ttsim.TTFatal, match=r"allocate_tensor_on_device: Shard width 32 must match physical width 64"):
        ttsim.allocate_tensor_on_device(ttsim.Shape([1, 1, 256, 64]), ttsim.bfloat16, T, device,
                                        _sharded_cfg(shard=(32, 32)))


def test_interleaved_to_sharded_and_back_move_no_value(device):
    x = torch.randn(1, 8, 32, 64)
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=T, device=device)
    cfg = _sharded_cfg()
    s = ttsim.interleaved_to_sharded(t, cfg)
    assert s.memory_config() == cfg and torch.equal(ttsim.to_torch(s), x)
    back = ttsim.sharded_to_interleaved(s, ttsim.L1_MEMORY_CONFIG)
    assert back.memory_config() == ttsim.L1_MEMORY_CONFIG and torch.equal(ttsim.to_torch(back), x)
    assert ttsim.sharded_to_interleaved(s).memory_config() == ttsim.DRAM_MEMORY_CONFIG
    # output_dtype converts as a typecast would; the goldens say the same
    half = ttsim.sharded_to_interleaved(s, output_dtype=ttsim.bfloat16)
    assert half.dtype == ttsim.bfloat16 and torch.equal(ttsim.to_torch(half), x.bfloat16())
    assert torch.equal(ttsim.sharded_to_interleaved.golden_function(x, None, ttsim.bfloat16), x.bfloat16())
    into = ttsim.allocate_tensor_on_device(ttsim.Shape([1, 8, 32, 64]), ttsim.bfloat16, T, device, cfg)
    got = ttsim.interleaved_to_sharded(t, cfg, ttsim.bfloat16, preallocated_output=into)
    assert got is into and torch.equal(ttsim.to_torch(into), x.bfloat16())
    with pytest.raises(ttsim.TTFatal, match=r"dtype=DataType.FLOAT32 and preallocated_output dtype"):
        ttsim.interleaved_to_sharded(t, cfg, output_dtype=ttsim.float32, preallocated_output=into)
    assert torch.equal(ttsim.interleaved_to_sharded.golden_function(x, cfg), x)


def test_sharding_conversions_refuse_the_wrong_direction(device):
    t = ttsim.from_torch(torch.randn(1, 8, 32, 64), dtype=ttsim.bfloat16, layout=T, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"sharded_to_interleaved: Input tensor must be sharded"):
        ttsim.sharded_to_interleaved(t)
    with pytest.raises(ttsim.TTFatal, match=r"interleaved_to_sharded: Output memory config must be sharded"):
        ttsim.interleaved_to_sharded(t, ttsim.L1_MEMORY_CONFIG)
    with pytest.raises(ttsim.TTFatal, match=r"must have a shard spec"):
        ttsim.interleaved_to_sharded(t, ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    s = ttsim.interleaved_to_sharded(t, _sharded_cfg())
    with pytest.raises(ttsim.TTFatal, match=r"interleaved_to_sharded: Input tensor must be Interleaved"):
        ttsim.interleaved_to_sharded(s, _sharded_cfg())
    with pytest.raises(ttsim.TTFatal, match=r"sharded_to_interleaved: Output memory config must be Interleaved"):
        ttsim.sharded_to_interleaved(s, _sharded_cfg())


def test_shard_grid_helpers_feed_a_decode_shard_config():
    """tt-metal's decode idiom: a shard grid of b cores, one [padded heads, head_dim] shard each."""
    grid = ttsim.num_cores_to_corerangeset(8, CC(8, 8), row_wise=True)
    assert grid.num_cores() == 8 and grid.ranges() == [CR(CC(0, 0), CC(7, 0))]
    cfg = ttsim.create_sharded_memory_config((32, 128), grid, ttsim.ShardStrategy.HEIGHT,
                                             use_height_and_width_as_shard_shape=True)
    assert cfg.shard_spec == ttsim.ShardSpec(grid, (32, 128), ttsim.ShardOrientation.ROW_MAJOR)
    assert cfg.buffer_type == ttsim.BufferType.L1 and cfg.memory_layout == ttsim.TensorMemoryLayout.HEIGHT_SHARDED
    with pytest.raises(ttsim.TTFatal, match=r"Target number of cores 65 is greater than total number of available"):
        ttsim.num_cores_to_corerangeset(65, CC(8, 8), True)
    with pytest.raises(RuntimeError, match=r"Invalid sharding core_grid"):
        ttsim.create_sharded_memory_config((1, 1, 250, 64), ttsim.CoreGrid(y=2, x=4), ttsim.ShardStrategy.HEIGHT)
    with pytest.raises(TypeError, match=r"shard_spec must be a ttnn.ShardSpec"):
        ttsim.MemoryConfig(ttsim.TensorMemoryLayout.HEIGHT_SHARDED, ttsim.BufferType.L1, object())


def test_sdpa_decode_on_subcoregrids_compiles_once(device):
    """tt-metal's test_sdpa_decode_sharded_on_subcoregrids: the same decode twice, sharded in and out,
    with shard grids from num_cores_to_corerangeset_in_subcoregrids, is one program."""
    device.clear_program_cache()
    sub = _crs([(1, 0, 3, 9), (5, 0, 6, 9)])
    b, nh, nkv, s, d = 8, 8, 1, 256, 128
    for _ in range(2):  # fresh config objects each time, as the test builds them
        shard_grid = ttsim.num_cores_to_corerangeset_in_subcoregrids(CC(1, 0), b, sub, row_wise=True)
        compute = ttsim.num_cores_to_corerangeset_in_subcoregrids(CC(1, 0), 32, sub, row_wise=True)
        cfg = ttsim.MemoryConfig(ttsim.TensorMemoryLayout.HEIGHT_SHARDED, ttsim.BufferType.L1,
                                 ttsim.ShardSpec(shard_grid, (32, d), ttsim.ShardOrientation.ROW_MAJOR))
        pc = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=(8, 4), sub_core_grids=compute,
                                     q_chunk_size=32, k_chunk_size=128, exp_approx_mode=False)
        g = torch.Generator().manual_seed(0)
        k, v = (ttsim.as_tensor(torch.randn(b, nkv, s, d, generator=g), dtype=ttsim.bfloat8_b, layout=T,
                                device=device, memory_config=ttsim.DRAM_MEMORY_CONFIG) for _ in range(2))
        q = ttsim.as_tensor(torch.randn(1, b, nh, d, generator=g), dtype=ttsim.bfloat16, layout=T, device=device,
                            memory_config=cfg)
        out = ttsim.transformer.scaled_dot_product_attention_decode(q, k, v, cur_pos=[s // 2] * b, scale=d ** -0.5,
                                                                    program_config=pc, memory_config=cfg)
        assert out.memory_config() == cfg
        ttsim.to_torch(out)
    assert device.num_program_cache_entries() == 1


# -- each rule once more, by hand (values from tt-metal's work split and tensor_spec rules) ----------

def test_core_counts_fill_rows_or_columns_up_to_the_grid():
    assert ttsim.num_cores_to_corerangeset(64, CC(8, 8), True).ranges() == [CR(CC(0, 0), CC(7, 7))]
    assert ttsim.num_cores_to_corerangeset(10, CC(4, 4)).ranges() == [CR(CC(0, 0), CC(1, 3)), CR(CC(2, 0), CC(2, 1))]
    assert ttsim.num_cores_to_corerangeset(0, CC(4, 4)).empty()
    with pytest.raises(ttsim.TTFatal, match=r"Target number of cores 17 is greater than total number of available "
                                            r"cores 16"):
        ttsim.num_cores_to_corerangeset(17, CC(4, 4))


def test_sub_core_grid_walk_starts_mid_line_and_spills_into_the_next_range():
    sub = _crs([(1, 0, 3, 9), (5, 0, 6, 9)])
    got = ttsim.num_cores_to_corerangeset_in_subcoregrids(CC(2, 9), 4, sub, row_wise=True)
    assert got.ranges() == [CR(CC(2, 9), CC(3, 9)), CR(CC(5, 0), CC(6, 0))]  # rest of the last row, then range 2
    got = ttsim.num_cores_to_corerangeset_in_subcoregrids(CC(2, 3), 4, sub, row_wise=True)
    assert got.ranges() == [CR(CC(2, 3), CC(3, 3)), CR(CC(1, 4), CC(2, 4))]  # rest of row 3, then part of row 4
    got = ttsim.num_cores_to_corerangeset_in_subcoregrids(CC(3, 8), 3, sub, row_wise=False)
    assert got.ranges() == [CR(CC(3, 8), CC(3, 9)), CR(CC(5, 0), CC(5, 0))]
    with pytest.raises(ttsim.TTFatal, match=r"Start core must be inside sub_core_grids"):
        ttsim.num_cores_to_corerangeset_in_subcoregrids(CC(0, 0), 4, sub)


def test_row_major_shards_round_the_width_up_to_the_shard_width(device):
    x = torch.randn(1, 1, 32, 64)
    cfg = _sharded_cfg(shard=(32, 96), ranges=((0, 0, 0, 0),))  # 64 wide -> one 96-wide shard
    t = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=RM, device=device, memory_config=cfg)
    assert torch.equal(ttsim.to_torch(t), x.bfloat16())
    with pytest.raises(ttsim.TTFatal, match=r"Shard width 96 must match physical width 64 for height sharded"):
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device, memory_config=cfg)  # TILE: no rounding
    with pytest.raises(ttsim.TTFatal, match=r"Shard width 48 must match physical width 96 for height sharded"):
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=RM, device=device,
                         memory_config=_sharded_cfg(shard=(32, 48), ranges=((0, 0, 0, 0),)))


def test_tile_shards_count_the_tile_padding_of_every_batch(device):
    x = torch.randn(8, 1, 1, 64)  # eight one-row heads: eight 32-row tiles in TILE, 8 rows in ROW_MAJOR
    four = ((0, 0, 3, 0),)
    with pytest.raises(ttsim.TTFatal, match=r"Number of shards along height 8 must not exceed number of cores 4"):
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device, memory_config=_sharded_cfg(ranges=four))
    t = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=RM, device=device,
                         memory_config=_sharded_cfg(shard=(2, 64), ranges=four))
    assert torch.equal(ttsim.to_torch(t), x.bfloat16())


def test_block_shards_fit_rows_and_columns_by_orientation(device):
    x = torch.randn(1, 1, 256, 128)
    tall = ((0, 0, 1, 3),)  # 2 columns x 4 rows
    block = ttsim.TensorMemoryLayout.BLOCK_SHARDED

    def cfg(orientation, ranges=tall, shard=(64, 64)):
        return ttsim.MemoryConfig(block, ttsim.BufferType.L1, ttsim.ShardSpec(_crs(ranges), list(shard), orientation))

    t = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device, memory_config=cfg(ttsim.ShardOrientation.ROW_MAJOR))
    assert torch.equal(ttsim.to_torch(t), x.bfloat16())
    with pytest.raises(ttsim.TTFatal, match=r"Number of shards along height 4 must not exceed number of columns 2 "
                                            r"for column major orientation!"):
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device,
                         memory_config=cfg(ttsim.ShardOrientation.COL_MAJOR))
    with pytest.raises(ttsim.TTFatal, match=r"Shard grid must be one full rectangular grid for block sharded!"):
        ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=T, device=device,
                         memory_config=cfg(ttsim.ShardOrientation.ROW_MAJOR, ((0, 0, 0, 3), (1, 0, 1, 3))))


def test_shard_spec_prints_its_grid_in_order_as_0_81_1():
    spec = ttsim.ShardSpec(CRS([CR(CC(4, 0), CC(4, 1)), CR(CC(0, 0), CC(1, 0))]), (64, 32),
                           ttsim.ShardOrientation.ROW_MAJOR)
    assert repr(spec) == ('ShardSpec{grid=[{"start":{"x":4,"y":0},"end":{"x":4,"y":1}, {"start":{"x":0,"y":0},'
                          '"end":{"x":1,"y":0}], shape=[64, 32], orientation=ShardOrientation::ROW_MAJOR}')
    assert repr(CRS({CR(CC(1, 0), CC(1, 0)), CR(CC(0, 5), CC(0, 5))})) == "{[0-5 - 0-5], [1-0 - 1-0]}"  # x first
    assert spec != ttsim.ShardSpec(CRS([CR(CC(0, 0), CC(1, 0)), CR(CC(4, 0), CC(4, 1))]), (64, 32),
                                   ttsim.ShardOrientation.ROW_MAJOR)  # a list's order counts


def test_create_sharded_memory_config_splits_by_orientation():
    grid = ttsim.CoreGrid(y=2, x=4)
    row = ttsim.create_sharded_memory_config((1, 2, 64, 128), grid, ttsim.ShardStrategy.BLOCK)
    col = ttsim.create_sharded_memory_config((1, 2, 64, 128), grid, ttsim.ShardStrategy.BLOCK,
                                             ttsim.ShardOrientation.COL_MAJOR)
    assert row.shard_spec.shape == [64, 32] and col.shard_spec.shape == [32, 64]  # 128 rows x 128 wide
    assert ttsim.create_sharded_memory_config((1, 2, 64, 128), grid, ttsim.ShardStrategy.WIDTH).shard_spec.shape == \
        [128, 16]
    with pytest.raises(RuntimeError, match=r"Invalid sharding strategy"):
        ttsim.create_sharded_memory_config((64, 128), grid, ttsim.TensorMemoryLayout.BLOCK_SHARDED)


def test_sharding_conversions_convert_to_output_dtype(device):
    x = torch.randn(1, 8, 32, 64)
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=T, device=device)
    s = ttsim.interleaved_to_sharded(t, _sharded_cfg(), ttsim.bfloat8_b)
    assert s.dtype == ttsim.bfloat8_b
    assert torch.equal(ttsim.to_torch(s), ttsim.to_torch(ttsim.from_torch(x, dtype=ttsim.bfloat8_b, layout=T)))


def test_equal_shard_configs_built_apart_share_one_program(device):
    """The program key holds the shard spec by value: tt-metal's tests rebuild their configs per call."""
    device.clear_program_cache()
    x = ttsim.from_torch(torch.randn(1, 8, 32, 64), dtype=ttsim.bfloat16, layout=T, device=device)
    for _ in range(2):
        ttsim.neg(x, memory_config=_sharded_cfg())
    assert device.num_program_cache_entries() == 1 and device.program_cache.hits == 1
    ttsim.neg(x, memory_config=_sharded_cfg(ranges=((0, 0, 3, 1),)))  # the same shards on other cores
    assert device.num_program_cache_entries() == 2


# -- CoreRange / CoreRangeSet, the sharded presets ---------------------------------------------

def test_core_range_as_ttnn_prints_and_counts_it():
    r = ttsim.CoreRange(CC(0, 0), CC(1, 2))
    assert repr(r) == "[0-0 - 1-2]" and repr(r.grid_size()) == "2-3"
    assert (r.start, r.end) == (CC(0, 0), CC(1, 2))
    assert r.contains(CC(1, 2)) and not r.contains(CC(2, 0)) and r.contains(ttsim.CoreRange(CC(0, 1), CC(1, 1)))
    with pytest.raises(ttsim.TTFatal, match=r"invalid core range"):
        ttsim.CoreRange(CC(2, 0), CC(1, 0))


def test_core_range_set_as_ttnn():
    a = ttsim.CoreRange(CC(0, 0), CC(1, 2))
    s = ttsim.CoreRangeSet({a})
    assert repr(s) == "{[0-0 - 1-2]}" and s.num_cores() == 6 and s.size() == 1 and not s.empty()
    assert repr(s.bounding_box()) == "[0-0 - 1-2]" and s.ranges() == [a]
    empty = ttsim.CoreRangeSet([])
    assert repr(empty) == "{}" and empty.empty() and empty.num_cores() == 0
    two = ttsim.CoreRangeSet([ttsim.CoreRange(CC(1, 0), CC(3, 9)), ttsim.CoreRange(CC(5, 0), CC(6, 9))])
    assert two.num_cores() == 30 + 20 and repr(two.bounding_box()) == "[1-0 - 6-9]"
    assert two.contains(CC(5, 3)) and not two.contains(CC(4, 3))
    with pytest.raises(ttsim.TTFatal, match=r"core ranges \[0-0 - 1-2\] and \[1-2 - 2-2\] overlap!"):
        ttsim.CoreRangeSet([a, ttsim.CoreRange(CC(1, 2), CC(2, 2))])


def test_sharded_presets_and_enums():
    mc = ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG
    assert mc.is_sharded() and mc.buffer_type == ttsim.BufferType.L1
    assert mc.memory_layout == ttsim.TensorMemoryLayout.HEIGHT_SHARDED and mc.shard_spec is None
    assert ttsim.L1_WIDTH_SHARDED_MEMORY_CONFIG.memory_layout == ttsim.TensorMemoryLayout.WIDTH_SHARDED
    assert repr(ttsim.ShardStrategy.HEIGHT) == "<ShardStrategy.HEIGHT: 1>"  # a Python enum in ttnn.types
    assert repr(ttsim.ShardOrientation.COL_MAJOR) == "ShardOrientation.COL_MAJOR"


def test_a_tensor_moved_to_a_sharded_preset_keeps_its_values(device):
    x = torch.randn(1, 1, 64, 32, generator=torch.Generator().manual_seed(2))
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    moved = ttsim.to_memory_config(t, ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    assert moved.memory_config() == ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG and torch.equal(ttsim.to_torch(moved), x)
