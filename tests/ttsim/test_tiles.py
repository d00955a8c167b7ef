"""Tiles other than 32x32 (ttsim/tiles.py) against the REAL ttnn 0.81.1 host path (the dump's
``tiles`` section: Tile properties and refusals, the padded shape and float32 bits read back of
seeded tensors in 16x32, 32x16, 8x32 and transposed tiles for bf16/bf8/bf4/f32, the host ROW_MAJOR
conversion), then on the device: the round trip, the placement and dtype ops that keep the tile,
and the refusals of the ops ttsim does not model on them."""

import struct

import numpy as np
import pytest
import torch

import ttsim

_TILES = {"16x32": ([16, 32], False), "32x16": ([32, 16], False), "32x32T": ([32, 32], True),
          "16x32T": ([16, 32], True), "8x32": ([8, 32], False)}


def _from_bits(bits, shape):
    return torch.from_numpy(np.array(bits, dtype=np.uint32).view(np.float32).reshape(shape).copy())


def _key_shape(key):
    return [int(d) for d in key.split("x")]


def test_tile_properties_and_refusals_match_0_81_1(real):
    for key, want in real["tiles"]["tiles"].items():
        shape = [int(d) for d in key.rstrip("T").split("x")]
        tr = key.endswith("T")
        if isinstance(want, str):
            with pytest.raises(ttsim.TTFatal) as e:
                ttsim.Tile(shape, transpose_tile=tr)
            assert want.endswith(str(e.value).replace("TT_FATAL: ", "")), (key, want, str(e.value))
            continue
        t = ttsim.Tile(shape, transpose_tile=tr)
        got = {"repr": repr(t), "face_shape": t.face_shape, "num_faces": t.num_faces, "partial_face": t.partial_face,
               "narrow_tile": t.narrow_tile, "transpose_within_face": t.transpose_within_face,
               "transpose_of_faces": t.transpose_of_faces,
               "tile_size": {d: t.get_tile_size(getattr(ttsim, d)) for d in ("bfloat16", "bfloat8_b", "bfloat4_b",
                                                                             "float32")}}
        assert got == want, key
    assert (ttsim.Tile([32, 32]) == ttsim.Tile([32, 32], transpose_tile=True)) == real["tiles"]["equal_ignores_transpose"]


def test_host_conversion_in_other_tiles_is_bit_exact_with_0_81_1(real):
    """Padding per the tile; bf16/f32 values independent of it; block floats sharing exponents along
    face rows (down columns in a transposed tile)."""
    checked = 0
    for key, rec in real["tiles"]["tensors"].items():
        shape = _key_shape(key)
        x = _from_bits(rec["input_bits"], shape)
        for name_dt, want in rec["by_tile"].items():
            name, dt = name_dt.split("/")
            tshape, tr = _TILES[name]
            t = ttsim.from_torch(x, dtype=getattr(ttsim, dt), layout=ttsim.TILE_LAYOUT,
                                 tile=ttsim.Tile(tshape, transpose_tile=tr))
            assert list(t.padded_shape) == want["padded_shape"], name_dt
            assert repr(t.tile) == want["tile"], name_dt
            got = ttsim.to_torch(t).float().contiguous().view(torch.int32).reshape(-1)
            diff = int((got != torch.tensor(np.array(want["bits"], dtype=np.uint32).view(np.int32))).sum())
            assert diff == 0, (key, name_dt, diff)
            checked += 1
    assert checked == 3 * 5 * 4


def test_a_transposed_tile_changes_block_float_values(real):
    """Negative control of the comparison above: bf8 in transposed tiles is not bf8 in plain ones."""
    rec = real["tiles"]["tensors"]["2x40x20"]["by_tile"]
    assert rec["32x32T/bfloat8_b"]["bits"] != rec["32x16/bfloat8_b"]["bits"]
    x = _from_bits(real["tiles"]["tensors"]["2x40x20"]["input_bits"], [2, 40, 20])
    plain = ttsim.to_torch(ttsim.from_torch(x, dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT))
    transposed = ttsim.to_torch(ttsim.from_torch(x, dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT,
                                                 tile=ttsim.Tile([32, 32], transpose_tile=True)))
    assert not torch.equal(plain, transposed)


def test_host_row_major_conversion_as_0_81_1(real):
    for key_name, want in real["tiles"]["to_row_major"].items():
        key, name = key_name.split("/")
        shape = _key_shape(key)
        x = _from_bits(real["tiles"]["tensors"][key]["input_bits"], shape)
        tshape, tr = _TILES[name]
        t = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, tile=ttsim.Tile(tshape, transpose_tile=tr))
        try:
            r = t.to(ttsim.ROW_MAJOR_LAYOUT)
            got = str([repr(r.layout), list(r.shape), repr(r.tile)])
            assert torch.equal(ttsim.to_torch(r), x.to(torch.bfloat16))
        except ttsim.TTFatal as e:
            got = "ERR RuntimeError: " + str(e).replace("TT_FATAL: ", "")
        assert got == want, key_name


# -- on the device ------------------------------------------------------------------------------------

@pytest.mark.parametrize("tile_h", [1, 4, 8, 16, 32])
@pytest.mark.parametrize("tile_w", [16, 32])
@pytest.mark.parametrize("dtype", [ttsim.bfloat8_b, ttsim.bfloat4_b])
@pytest.mark.parametrize("transpose_tile", [True, False])
def test_tiny_tiles_bfloat_idiom(device, tile_h, tile_w, dtype, transpose_tile):
    """tt-metal's test_tiny_tiles_bfloat (test_matmul.py): from_torch in the tile onto L1, to_torch."""
    if tile_h < 16 and transpose_tile:
        with pytest.raises(ttsim.TTFatal, match="Tile height must equal 16 or 32 in transpose mode"):
            ttsim.Tile((tile_h, tile_w), transpose_tile=True)
        return
    x = torch.randn((2, 5, 96, 64), dtype=torch.bfloat16, generator=torch.Generator().manual_seed(tile_h))
    t = ttsim.from_torch(x, tile=ttsim.Tile((tile_h, tile_w), transpose_tile=transpose_tile),
                         layout=ttsim.TILE_LAYOUT, dtype=dtype, device=device, memory_config=ttsim.L1_MEMORY_CONFIG)
    assert t.tile == ttsim.Tile((tile_h, tile_w))
    out = ttsim.to_torch(t)
    want = 0.9999 if dtype == ttsim.bfloat8_b else 0.989
    assert ttsim.pearson_correlation_coefficient(x.float(), out.float()) >= want


@pytest.mark.parametrize("name", list(_TILES))
def test_device_round_trip_and_the_ops_that_keep_the_tile(device, name):
    tshape, tr = _TILES[name]
    tile = ttsim.Tile(tshape, transpose_tile=tr)
    x = torch.randn(2, 40, 20, generator=torch.Generator().manual_seed(7))
    host = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, tile=tile)
    t = ttsim.to_device(host, device)
    assert t.tile == tile and list(t.padded_shape) == list(host.padded_shape)
    assert torch.equal(ttsim.to_torch(t), x.to(torch.bfloat16))
    back = ttsim.from_device(t)
    assert back.tile == tile and torch.equal(ttsim.to_torch(back), x.to(torch.bfloat16))
    # storage matches the geometry buffers are allocated for (the padded shape of the tile)
    assert tuple(host._host[0].shape) == tuple(host.padded_shape)
    l1 = ttsim.to_memory_config(t, ttsim.L1_MEMORY_CONFIG)
    assert l1.tile == tile and l1.padded_shape == t.padded_shape
    assert torch.equal(ttsim.to_torch(l1), x.to(torch.bfloat16))
    f32 = ttsim.typecast(t, ttsim.float32)
    assert f32.tile == tile and torch.equal(ttsim.to_torch(f32), x.to(torch.bfloat16).float())
    bf8 = ttsim.typecast(f32, ttsim.bfloat8_b)  # stored in the tile: its blocks as from_torch's
    direct = ttsim.from_torch(x.to(torch.bfloat16).float(), dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT,
                              tile=tile)
    assert torch.equal(ttsim.to_torch(bf8), ttsim.to_torch(direct))
    rm = ttsim.to_layout(t, ttsim.ROW_MAJOR_LAYOUT)
    assert rm.tile == ttsim.Tile([32, 32]) and torch.equal(ttsim.to_torch(rm), x.to(torch.bfloat16))


def test_ops_ttsim_does_not_model_on_other_tiles_refuse(device):
    t = ttsim.from_torch(torch.randn(32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT,
                         tile=ttsim.Tile([16, 32]), device=device)
    plain = ttsim.from_torch(torch.randn(32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"add: an input is stored in Tile with shape: \[16, 32\] tiles"):
        ttsim.add(t, plain)
    with pytest.raises(ttsim.TTFatal, match="matmul: an input is stored in"):
        ttsim.matmul(t, plain)
    with pytest.raises(ttsim.TTFatal, match="tiny-tile matmul is broken on Blackhole"):
        ttsim.matmul(plain, plain, output_tile=ttsim.Tile([16, 32]))
    with pytest.raises(ttsim.TTFatal, match="tiny-tile matmul is broken on Blackhole"):
        ttsim.linear(plain, plain, output_tile=ttsim.Tile([32, 16]))
    assert list(ttsim.matmul(plain, plain, output_tile=ttsim.Tile([32, 32])).shape) == [32, 32]
    with pytest.raises(TypeError, match="tile must be a ttnn.Tile"):
        ttsim.from_torch(torch.zeros(2), tile=(16, 32))
    with pytest.raises(ttsim.TTFatal, match="Tile size is not valid for our hardware"):
        ttsim.Tile([64, 32])
