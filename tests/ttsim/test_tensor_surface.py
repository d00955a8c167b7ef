"""Tensor construction and movement as tt-metal's tests write it: the real ttnn.Tensor
constructors (a block float defaults to TILE), from_torch(tile=), as_tensor with a cache file,
tilize / untilize and their padding forms, to_memory_config, experimental.view,
is_tensor_storage_on_device, Tensor.to(target_layout) (ROW_MAJOR of a host block float as 0.81.1),
Tensor.to_numpy."""

import numpy as np
import pytest
import torch

import ttsim


def _rm(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.ROW_MAJOR_LAYOUT, device=device)


def _tile(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device)


# -- ttnn.Tensor(...) ------------------------------------------------------------------

def test_tensor_from_a_torch_tensor_and_dtype_then_to_device(device):
    pos = torch.tensor([3, -1, 7], dtype=torch.int32)
    t = ttsim.Tensor(pos, ttsim.int32)
    assert t.storage_type() == "StorageType.HOST" and t.dtype == ttsim.int32 and t.layout == ttsim.ROW_MAJOR_LAYOUT
    d = t.to(device)
    assert ttsim.is_tensor_storage_on_device(d) and not ttsim.is_tensor_storage_on_device(t)
    assert torch.equal(ttsim.to_torch(d), pos)


def test_tensor_keyword_form_matches_from_torch(device):
    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(1))
    a = ttsim.Tensor(tensor=x, data_type=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT, device=device,
                     mem_config=ttsim.L1_MEMORY_CONFIG)
    b = ttsim.from_torch(x, dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT, device=device)
    assert a.memory_config() == ttsim.L1_MEMORY_CONFIG
    assert torch.equal(ttsim.to_torch(a), ttsim.to_torch(b))


def test_tensor_from_numpy():
    t = ttsim.Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), ttsim.float32)
    assert torch.equal(ttsim.to_torch(t), torch.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("layout", [ttsim.ROW_MAJOR_LAYOUT, ttsim.TILE_LAYOUT])
def test_tensor_from_flat_data_and_shape(device, layout):
    data = [float(i) / 4 for i in range(2 * 3 * 5)]
    t = ttsim.Tensor(data, [2, 3, 5], ttsim.bfloat16, layout)
    assert list(t.shape) == [2, 3, 5] and t.layout == layout
    assert torch.equal(ttsim.to_torch(t).float(), torch.tensor(data).reshape(2, 3, 5))
    on = ttsim.Tensor(data, [2, 3, 5], ttsim.float32, layout, device, ttsim.DRAM_MEMORY_CONFIG)
    assert ttsim.is_tensor_storage_on_device(on) and torch.equal(ttsim.to_torch(on), torch.tensor(data).reshape(2, 3, 5))
    ints = ttsim.Tensor([1, 2, 3, 4], [4], ttsim.uint32, ttsim.ROW_MAJOR_LAYOUT)
    assert ttsim.to_torch(ints).tolist() == [1, 2, 3, 4]


def test_tensor_data_that_does_not_fill_the_shape_is_refused():
    with pytest.raises(ttsim.TTFatal, match=r"data holds 5 values but shape \[2, 3\] needs 6"):
        ttsim.Tensor([1.0] * 5, [2, 3], ttsim.bfloat16, ttsim.ROW_MAJOR_LAYOUT)


def test_tensor_copy_constructor_is_independent_on_host():
    a = ttsim.from_torch(torch.ones(2, 2), dtype=ttsim.float32)
    b = ttsim.Tensor(a)
    b._host[0].fill_(5.0)
    assert torch.equal(ttsim.to_torch(a), torch.ones(2, 2))


# -- as_tensor --------------------------------------------------------------------------

def test_as_tensor_caches_the_converted_tensor(device, tmp_path):
    x = torch.randn(64, 64, generator=torch.Generator().manual_seed(2))
    calls = []

    def prep(t):
        calls.append(1)
        return t * 2

    name = tmp_path / "w" / "layer0.wq"
    a = ttsim.as_tensor(x, ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT, device=device,
                        memory_config=ttsim.DRAM_MEMORY_CONFIG, cache_file_name=name, preprocess=prep)
    path = tmp_path / "w" / "layer0.wq_dtype_BFLOAT8_B_layout_TILE.tensorbin"
    assert path.is_file() and calls == [1]
    b = ttsim.as_tensor(torch.zeros(64, 64), ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT, device=device,
                        memory_config=ttsim.DRAM_MEMORY_CONFIG, cache_file_name=name, preprocess=prep)
    assert calls == [1]  # a hit: the stored tensor, never the new input
    assert torch.equal(ttsim.to_torch(a), ttsim.to_torch(b))
    assert torch.equal(ttsim.to_torch(b), ttsim.to_torch(ttsim.from_torch(x * 2, dtype=ttsim.bfloat8_b,
                                                                          layout=ttsim.TILE_LAYOUT)))


def test_as_tensor_regenerates_an_unreadable_cache(tmp_path, caplog):
    name = tmp_path / "bad"
    path = tmp_path / "bad_dtype_FLOAT32_layout_ROW_MAJOR.tensorbin"
    path.write_bytes(b"not a tensor")
    t = ttsim.as_tensor(torch.ones(3), ttsim.float32, cache_file_name=name,
                        cache_dump_mode=ttsim.DumpTensorMode.LOCAL)
    assert torch.equal(ttsim.to_torch(t), torch.ones(3)) and "Failed to load cache" in caplog.text
    assert torch.equal(ttsim.to_torch(ttsim.as_tensor(torch.zeros(3), ttsim.float32, cache_file_name=name)),
                       torch.ones(3))


def test_as_tensor_needs_a_memory_config_with_a_device(device):
    with pytest.raises(ttsim.TTFatal, match=r"memory_config must be specified when device is specified"):
        ttsim.as_tensor(torch.ones(3), ttsim.float32, device=device)


def test_as_tensor_without_a_cache_is_from_torch(mesh_device):
    x = torch.arange(8.0).reshape(2, 4)
    t = ttsim.as_tensor(x, ttsim.float32, layout=ttsim.ROW_MAJOR_LAYOUT, device=mesh_device,
                        memory_config=ttsim.DRAM_MEMORY_CONFIG,
                        mesh_mapper=ttsim.ShardTensorToMesh(mesh_device, dim=1))
    back = ttsim.to_torch(t, mesh_composer=ttsim.ConcatMeshToTensor(mesh_device, dim=1))
    assert torch.equal(back, x) and list(t.shape) == [2, 2]


# -- tilize / untilize -------------------------------------------------------------------

def test_tilize_and_untilize_round_trip(device):
    x = torch.randn(1, 2, 64, 32, generator=torch.Generator().manual_seed(3))
    t = ttsim.tilize(_rm(x, device), dtype=ttsim.bfloat8_b, use_low_perf=True, tile=ttsim.Tile([32, 32]))
    assert t.layout == ttsim.TILE_LAYOUT and t.dtype == ttsim.bfloat8_b
    back = ttsim.untilize(t)
    assert back.layout == ttsim.ROW_MAJOR_LAYOUT and back.dtype == ttsim.bfloat16
    want = ttsim.to_torch(ttsim.from_torch(x.bfloat16(), dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT)).bfloat16()
    assert torch.equal(ttsim.to_torch(back), want)


def test_tilize_refuses_unaligned_shapes_and_other_tiles(device):
    with pytest.raises(ttsim.TTFatal, match=r"tilize: input_tensor's last two dims must be multiples of 32"):
        ttsim.tilize(_rm(torch.zeros(5, 7), device))
    with pytest.raises(ttsim.TTFatal, match=r"tile=Tile with shape: \[16, 32\] is not modelled"):
        ttsim.tilize(_rm(torch.zeros(32, 32), device), tile=ttsim.Tile([16, 32]))


def test_tilize_with_padding_forms(device):
    x = torch.arange(35.0).reshape(5, 7)
    z = ttsim.tilize_with_zero_padding(_rm(x, device), output_dtype=ttsim.float32)
    assert z.layout == ttsim.TILE_LAYOUT and z.dtype == ttsim.float32 and torch.equal(ttsim.to_torch(z), x)
    v = ttsim.tilize_with_val_padding(_rm(x, device), [32, 64], -3.0, dtype=ttsim.float32)
    assert list(v.shape) == [5, 7] and list(v.padded_shape) == [32, 64]  # the padding is storage only
    assert v.dtype == ttsim.float32 and torch.equal(ttsim.to_torch(v), x)


def test_untilize_with_unpadding_keeps_the_leading_block(device):
    x = torch.randn(1, 1, 64, 64, generator=torch.Generator().manual_seed(4))
    out = ttsim.untilize_with_unpadding(_tile(x, device, ttsim.float32), [0, 0, 40, 19])
    assert list(out.shape) == [1, 1, 41, 20] and torch.equal(ttsim.to_torch(out), x[:, :, :41, :20])
    with pytest.raises(ttsim.TTFatal, match=r"output_tensor_end \[0, 0, 64, 19\] must hold one index per dim"):
        ttsim.untilize_with_unpadding(_tile(x, device), [0, 0, 64, 19])


# -- to_memory_config, view ------------------------------------------------------------

def test_to_memory_config_moves_and_converts(device):
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(5))
    t = _tile(x, device, ttsim.float32)
    assert ttsim.to_memory_config(t, t.memory_config()) is t
    l1 = ttsim.to_memory_config(t, ttsim.L1_MEMORY_CONFIG, dtype=ttsim.bfloat16)
    assert l1.memory_config() == ttsim.L1_MEMORY_CONFIG and l1.dtype == ttsim.bfloat16
    assert torch.equal(ttsim.to_torch(l1), x.bfloat16())
    out = _tile(torch.zeros(32, 64), device, ttsim.float32)
    assert ttsim.to_memory_config(t, ttsim.L1_MEMORY_CONFIG, output_tensor=out) is out
    assert torch.equal(ttsim.to_torch(out), x)


def test_view_reshapes_without_moving_data(device):
    x = torch.arange(2 * 64 * 32.0).reshape(2, 64, 32)
    v = ttsim.experimental.view(_tile(x, device, ttsim.float32), [1, 128, 32])
    assert torch.equal(ttsim.to_torch(v), x.reshape(1, 128, 32))
    r = ttsim.experimental.view(_rm(x, device, ttsim.float32), (4, 32, 32))
    assert torch.equal(ttsim.to_torch(r), x.reshape(4, 32, 32))
    with pytest.raises(ttsim.TTFatal, match=r"would move data"):
        ttsim.experimental.view(_rm(x, device), [2, 32, 64])


# -- host tensors and bounds ---------------------------------------------------------------

def test_reshape_and_cpu_on_host_tensors():
    h = ttsim.from_torch(torch.arange(12.0).reshape(3, 4), dtype=ttsim.float32)
    r = ttsim.reshape(h, [2, -1])
    assert r.storage_type() == "StorageType.HOST" and torch.equal(ttsim.to_torch(r), torch.arange(12.0).reshape(2, 6))
    assert h.cpu() is h
    t = ttsim.from_torch(torch.arange(64.0).reshape(2, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT)
    assert torch.equal(ttsim.to_torch(ttsim.reshape(t, [1, 64])).float(), torch.arange(64.0).reshape(1, 64))


@pytest.mark.parametrize("on_device", [False, True])
def test_slice_takes_python_bounds(device, on_device):
    x = torch.arange(48.0).reshape(4, 12)
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device if on_device else None)
    for start, end, step in (([-3, 0], [4, -1], None), ([0, -20], [-1, 100], [2, 3]), ([2, 5], [2, 9], None),
                             ([3, 0], [1, 12], None)):
        got = ttsim.to_torch(ttsim.slice(t, start, end, step))
        idx = tuple(slice(s, e, st) for s, e, st in zip(start, end, step or [1, 1]))
        assert torch.equal(got, x[idx]), (start, end, step)


def test_rank_zero_tensors_keep_rank_zero(device):
    t = ttsim.from_torch(torch.tensor(2.5), dtype=ttsim.float32)
    assert list(t.shape) == [] and ttsim.to_torch(t).shape == torch.Size([])
    d = ttsim.from_torch(torch.tensor(7, dtype=torch.int32), device=device)
    assert list(d.shape) == [] and ttsim.to_torch(d).item() == 7
    tiled = ttsim.from_torch(torch.tensor(1.5), layout=ttsim.TILE_LAYOUT)  # one tile, element [0, 0]
    assert list(tiled.shape) == [] and list(tiled.padded_shape) == [32, 32]
    assert ttsim.to_torch(tiled).shape == torch.Size([]) and ttsim.to_torch(tiled).item() == 1.5


def test_embedding_takes_tile_layout_indices(device):
    table = torch.randn(64, 32, generator=torch.Generator().manual_seed(6))
    ids = torch.tensor([[5, 0, 63, 17]], dtype=torch.int32)
    w = ttsim.from_torch(table, dtype=ttsim.bfloat16, device=device)
    rm = ttsim.embedding(ttsim.from_torch(ids, dtype=ttsim.uint32, device=device), w)
    tl = ttsim.embedding(ttsim.from_torch(ids, dtype=ttsim.uint32, layout=ttsim.TILE_LAYOUT, device=device), w)
    assert torch.equal(ttsim.to_torch(tl), ttsim.to_torch(rm))
    assert torch.equal(ttsim.to_torch(tl)[0], table[ids[0].long()].bfloat16())


def test_linear_reads_the_first_row_of_a_tile_padded_bias(device):
    a, w = torch.randn(32, 64, generator=torch.Generator().manual_seed(7)), torch.randn(64, 96)
    bias = torch.randn(1, 96, generator=torch.Generator().manual_seed(8))
    padded = torch.cat([bias, torch.full((31, 96), 100.0)])  # rows 1..31 are padding a card never reads
    ta, tw = (ttsim.from_torch(v, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device) for v in (a, w))
    got = ttsim.to_torch(ttsim.linear(ta, tw, bias=ttsim.from_torch(padded, dtype=ttsim.float32,
                                                                     layout=ttsim.TILE_LAYOUT, device=device)))
    assert torch.allclose(got, a @ w + bias, atol=1e-3)
    with pytest.raises(ttsim.TTFatal, match=r"linear: bias must be \[1, 96\] \(or tile-padded \[32, 96\]"):
        ttsim.linear(ta, tw, bias=ttsim.from_torch(torch.zeros(8, 96), dtype=ttsim.float32,
                                                   layout=ttsim.TILE_LAYOUT, device=device))


# -- Python operators ttnn attaches to Tensor ------------------------------------------------

def test_tensor_operators_route_to_the_ops(device):
    a, b = torch.randn(32, 32) + 3, torch.randn(32, 32) + 3
    ta, tb = (ttsim.from_torch(v, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device) for v in (a, b))
    cases = [(ta + tb, a + b), (ta + 1.5, a + 1.5), (2.0 + ta, a + 2.0), (ta - tb, a - b), (5.0 - ta, 5.0 - a),
             (ta * tb, a * b), (3.0 * ta, a * 3.0), (ta / tb, a / b), (1.0 / ta, 1.0 / a), (ta @ tb, a @ b),
             (ta == tb, (a == b).float()), (ta != 1.0, (a != 1.0).float()), (ta > tb, (a > b).float()),
             (ta >= tb, (a >= b).float()), (ta < tb, (a < b).float()), (ta <= tb, (a <= b).float())]
    for got, want in cases:
        assert torch.allclose(ttsim.to_torch(got), want, rtol=1e-5, atol=1e-4)
    assert len({ta, tb}) == 2  # still hashable


def test_tensor_indexing_slices_and_drops_int_dims(device):
    x = torch.arange(2 * 3 * 64.0).reshape(2, 3, 64)
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    for index in ((1,), (slice(None), -1), (Ellipsis, slice(0, 64, 2)), (0, slice(1, 3), 5), (slice(None), 1, ...)):
        assert torch.equal(ttsim.to_torch(t[index if len(index) > 1 else index[0]]),
                           x[index if len(index) > 1 else index[0]]), index
    host = ttsim.from_torch(x, dtype=ttsim.float32)
    assert torch.equal(ttsim.to_torch(host[:, 1]), x[:, 1])
    with pytest.raises(ttsim.TTFatal, match=r"host tensors cannot be accessed with non-unit stride"):
        host[..., ::2]
    with pytest.raises(ttsim.TTFatal, match=r"index 3 is out of bounds for dim 1 of size 3"):
        t[0, 3]


# -- Tensor.to_numpy ---------------------------------------------------------------------------

def test_to_numpy(device):
    x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    n = ttsim.from_torch(x, device=device).to_numpy()
    assert isinstance(n, np.ndarray) and n.dtype == np.int32 and (n == x.numpy()).all()
    f = ttsim.from_torch(torch.tensor([1.5, -2.0]), dtype=ttsim.bfloat16).to_numpy()
    assert f.dtype == np.float32 and f.tolist() == [1.5, -2.0]


# -- Tensor.to(target_layout), Tensor(torch, bfloat8_b), from_torch(tile=) ---------------------

HOST_2X3 = torch.arange(1.0, 7.0).reshape(2, 3)  # tile padding on both dims


def test_tensor_to_layout_converts_a_host_tensor_both_ways():
    h = ttsim.Tensor(HOST_2X3, ttsim.bfloat16)
    t = h.to(ttsim.TILE_LAYOUT)
    assert t.layout == ttsim.TILE_LAYOUT and t.storage_type() == "StorageType.HOST"
    assert list(t.shape) == [2, 3] and list(t.padded_shape) == [32, 32]
    assert torch.equal(ttsim.to_torch(t), HOST_2X3.bfloat16())
    back = t.to(ttsim.ROW_MAJOR_LAYOUT)
    assert back.layout == ttsim.ROW_MAJOR_LAYOUT and torch.equal(ttsim.to_torch(back), HOST_2X3.bfloat16())
    assert h.layout == ttsim.ROW_MAJOR_LAYOUT  # a new tensor; the source keeps its layout


def test_tensor_to_layout_then_device_is_the_unit_test_idiom(device):
    """tt-metal's tests: ``ttnn.Tensor(x, dtype).to(ttnn.TILE_LAYOUT).to(device)``."""
    d = ttsim.Tensor(HOST_2X3, ttsim.bfloat16).to(ttsim.TILE_LAYOUT).to(device)
    assert d.layout == ttsim.TILE_LAYOUT and ttsim.is_tensor_storage_on_device(d)
    assert torch.equal(ttsim.to_torch(d), HOST_2X3.bfloat16())


def test_tensor_to_layout_refuses_a_device_tensor_as_tt_metal(device):
    """tensor_to_layout: TT_FATAL(storage_type() != DEVICE, "Bring tensor to host ...")."""
    d = ttsim.from_torch(HOST_2X3, dtype=ttsim.bfloat16, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"Bring tensor to host before converting to target layout"):
        d.to(ttsim.TILE_LAYOUT)
    with pytest.raises(ttsim.TTFatal, match=r"takes only the layout"):
        ttsim.Tensor(HOST_2X3, ttsim.bfloat16).to(ttsim.TILE_LAYOUT, ttsim.DRAM_MEMORY_CONFIG)


@pytest.mark.parametrize("dtype", [ttsim.bfloat8_b, ttsim.bfloat4_b])
def test_block_float_constructor_defaults_to_tile(dtype):
    """Measured on ttnn 0.81.1: Tensor(np_array, bfloat8_b).layout == TILE, padded [32, 32]."""
    t = ttsim.Tensor(HOST_2X3, dtype)
    assert t.layout == ttsim.TILE_LAYOUT and t.dtype == dtype and list(t.padded_shape) == [32, 32]
    want = ttsim.to_torch(ttsim.from_torch(HOST_2X3, dtype=dtype, layout=ttsim.TILE_LAYOUT))
    assert torch.equal(ttsim.to_torch(t), want)


def test_block_float_constructor_refuses_an_explicit_row_major():
    with pytest.raises(ttsim.TTFatal, match=r"block float and requires layout=TILE_LAYOUT"):
        ttsim.Tensor(HOST_2X3, ttsim.bfloat8_b, layout=ttsim.ROW_MAJOR_LAYOUT)
    assert ttsim.Tensor(HOST_2X3, ttsim.bfloat16).layout == ttsim.ROW_MAJOR_LAYOUT  # other dtypes keep ROW_MAJOR
    with pytest.raises(ttsim.TTFatal, match=r"block float and requires layout=TILE_LAYOUT"):
        ttsim.from_torch(HOST_2X3, dtype=ttsim.bfloat8_b)  # from_torch has no such default


def test_from_torch_takes_the_standard_tile(device):
    t = ttsim.from_torch(HOST_2X3, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, tile=ttsim.Tile([32, 32]), device=device)
    assert t.layout == ttsim.TILE_LAYOUT and torch.equal(ttsim.to_torch(t), HOST_2X3.bfloat16())
    c = ttsim.Tensor(HOST_2X3, ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, tile=ttsim.Tile([32, 32]))
    assert torch.equal(ttsim.to_torch(c), HOST_2X3.bfloat16())


@pytest.mark.parametrize("tile", [ttsim.Tile([16, 32]), ttsim.Tile([32, 16]), ttsim.Tile([32, 32], True)],
                         ids=["16x32", "32x16", "transposed"])
def test_from_torch_stores_other_tiles(tile):
    """Measured against 0.81.1 in tests/ttsim/test_tiles.py; here: the tile is kept and the values come back."""
    t = ttsim.from_torch(HOST_2X3, layout=ttsim.TILE_LAYOUT, tile=tile)
    c = ttsim.Tensor(HOST_2X3, ttsim.float32, layout=ttsim.TILE_LAYOUT, tile=tile)
    assert t.tile == tile and c.tile == tile and torch.equal(ttsim.to_torch(c), HOST_2X3)
    h, w = tile.tile_shape
    assert list(t.padded_shape) == [h * -(-2 // h), w * -(-3 // w)]


# -- ROW_MAJOR of a host block-float tensor (0.81.1's host to_layout) --------------------------

def test_block_float_host_row_major_matches_real(real):
    """ROW_MAJOR of a host bfloat8_b/bfloat4_b tensor: unchanged (still TILE) when it fills its
    tiles, refused where the host would have to unpad; by Tensor.to and by to_layout alike."""
    cases = real["sharding"]["host_readbacks"]["block_float_to_row_major"]
    assert len(cases) == 20
    bad = []
    for key, want in cases.items():
        dt, rest = key.split(" ", 1)
        shape_text, route = rest.rsplit(" ", 1)
        shape = [int(d) for d in shape_text.strip("[]").split(",")]
        x = (torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float32).reshape(shape) - 700) * 0.013
        src = ttsim.from_torch(x, dtype=getattr(ttsim, dt), layout=ttsim.TILE_LAYOUT)
        try:
            r = src.to(ttsim.ROW_MAJOR_LAYOUT) if route == "Tensor.to" else ttsim.to_layout(src, ttsim.ROW_MAJOR_LAYOUT)
            got = {"dtype": repr(r.dtype), "layout": repr(r.layout), "shape": list(r.shape),
                   "values_kept": torch.equal(ttsim.to_torch(r), ttsim.to_torch(src))}
        except ttsim.TTFatal as e:
            got = f"ERR {e}"
        if isinstance(want, str):  # a refusal: ttsim's message holds the real info line
            ok = isinstance(got, str) and want.split(": ", 1)[1] in got
        else:
            ok = got == want
        if not ok:
            bad.append(f"{key}: ttnn {want}, ttsim {got}")
    assert not bad, "\n".join(bad)


def test_block_float_host_tensor_goes_row_major_only_when_it_fills_its_tiles():
    x = torch.randn(2, 64, 32)
    t = ttsim.from_torch(x, dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT)
    r = t.cpu().to(ttsim.ROW_MAJOR_LAYOUT)  # tt-metal's cache.cpu().to(ROW_MAJOR_LAYOUT).to_torch()
    assert r.dtype == ttsim.bfloat8_b and r.layout == ttsim.TILE_LAYOUT and torch.equal(r.to_torch(), t.to_torch())
    with pytest.raises(ttsim.TTFatal, match=r"Tensor layout must be ROW_MAJOR for unpadding"):
        ttsim.from_torch(torch.randn(2, 33), dtype=ttsim.bfloat4_b, layout=ttsim.TILE_LAYOUT).to(ttsim.ROW_MAJOR_LAYOUT)
