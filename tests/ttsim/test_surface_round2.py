"""Issue 25, valid inputs that used to be refused: Tensor.to(target_layout), the Tensor
constructor's block-float default layout, from_torch(tile=Tile([32, 32])), paged_fill_cache
with unmapped (-1) pages. Semantics from tt-metal's source (cited per test)."""

import pytest
import torch

import ttsim

X = torch.arange(1.0, 7.0).reshape(2, 3)


# -- Tensor.to(target_layout) --------------------------------------------------------------

def test_tensor_to_layout_converts_a_host_tensor_both_ways():
    h = ttsim.Tensor(X, ttsim.bfloat16)
    t = h.to(ttsim.TILE_LAYOUT)
    assert t.layout == ttsim.TILE_LAYOUT and t.storage_type() == "StorageType.HOST"
    assert list(t.shape) == [2, 3] and list(t.padded_shape) == [32, 32]
    assert torch.equal(ttsim.to_torch(t), X.bfloat16())
    back = t.to(ttsim.ROW_MAJOR_LAYOUT)
    assert back.layout == ttsim.ROW_MAJOR_LAYOUT and torch.equal(ttsim.to_torch(back), X.bfloat16())
    assert h.layout == ttsim.ROW_MAJOR_LAYOUT  # a new tensor; the source keeps its layout


def test_tensor_to_layout_then_device_is_the_unit_test_idiom(device):
    """tt-metal's tests: ``ttnn.Tensor(x, dtype).to(ttnn.TILE_LAYOUT).to(device)``."""
    d = ttsim.Tensor(X, ttsim.bfloat16).to(ttsim.TILE_LAYOUT).to(device)
    assert d.layout == ttsim.TILE_LAYOUT and ttsim.is_tensor_storage_on_device(d)
    assert torch.equal(ttsim.to_torch(d), X.bfloat16())


def test_tensor_to_layout_refuses_a_device_tensor_as_tt_metal(device):
    """tensor_to_layout: TT_FATAL(storage_type() != DEVICE, "Bring tensor to host ...")."""
    d = ttsim.from_torch(X, dtype=ttsim.bfloat16, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"Bring tensor to host before converting to target layout"):
        d.to(ttsim.TILE_LAYOUT)
    with pytest.raises(ttsim.TTFatal, match=r"takes only the layout"):
        ttsim.Tensor(X, ttsim.bfloat16).to(ttsim.TILE_LAYOUT, ttsim.DRAM_MEMORY_CONFIG)


# -- Tensor(torch, bfloat8_b) -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [ttsim.bfloat8_b, ttsim.bfloat4_b])
def test_block_float_constructor_defaults_to_tile(dtype):
    """Measured on ttnn 0.81.1: Tensor(np_array, bfloat8_b).layout == TILE, padded [32, 32]."""
    t = ttsim.Tensor(X, dtype)
    assert t.layout == ttsim.TILE_LAYOUT and t.dtype == dtype and list(t.padded_shape) == [32, 32]
    want = ttsim.to_torch(ttsim.from_torch(X, dtype=dtype, layout=ttsim.TILE_LAYOUT))
    assert torch.equal(ttsim.to_torch(t), want)


def test_block_float_constructor_refuses_an_explicit_row_major():
    with pytest.raises(ttsim.TTFatal, match=r"block float and requires layout=TILE_LAYOUT"):
        ttsim.Tensor(X, ttsim.bfloat8_b, layout=ttsim.ROW_MAJOR_LAYOUT)
    assert ttsim.Tensor(X, ttsim.bfloat16).layout == ttsim.ROW_MAJOR_LAYOUT  # other dtypes keep ROW_MAJOR
    with pytest.raises(ttsim.TTFatal, match=r"block float and requires layout=TILE_LAYOUT"):
        ttsim.from_torch(X, dtype=ttsim.bfloat8_b)  # from_torch has no such default


# -- from_torch(tile=) ------------------------------------------------------------------------

def test_from_torch_takes_the_standard_tile(device):
    t = ttsim.from_torch(X, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, tile=ttsim.Tile([32, 32]), device=device)
    assert t.layout == ttsim.TILE_LAYOUT and torch.equal(ttsim.to_torch(t), X.bfloat16())
    c = ttsim.Tensor(X, ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, tile=ttsim.Tile([32, 32]))
    assert torch.equal(ttsim.to_torch(c), X.bfloat16())


@pytest.mark.parametrize("tile", [ttsim.Tile([16, 32]), ttsim.Tile([32, 16]), ttsim.Tile([32, 32], True)],
                         ids=["16x32", "32x16", "transposed"])
def test_from_torch_refuses_other_tiles_by_name(tile):
    with pytest.raises(ttsim.TTFatal, match=r"from_torch: tile=Tile with shape: .* is not modelled by ttsim"):
        ttsim.from_torch(X, layout=ttsim.TILE_LAYOUT, tile=tile)


# -- paged_fill_cache with unmapped pages -----------------------------------------------------

def _ints(rows, device, dtype=ttsim.int32):
    return ttsim.from_torch(torch.tensor(rows, dtype=torch.int32), dtype=dtype, device=device)


@pytest.mark.parametrize("table_dtype", [ttsim.int32, ttsim.uint32])
def test_paged_fill_cache_skips_pages_mapped_to_minus_one(device, table_dtype):
    """tt-metal's writer_fill_cache_interleaved: an entry of SKIP_PAGE_TABLE_ENTRY ((uint32)-1)
    consumes that block's input tiles and writes nothing; the other pages keep their place."""
    nb, nkv, bs, d = 6, 1, 32, 32
    cache = ttsim.from_torch(torch.zeros(nb, nkv, bs, d), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT,
                             device=device)
    x = (torch.arange(1, 1 + 3 * bs * d, dtype=torch.float32).reshape(1, nkv, 3 * bs, d) % 97) + 1
    table = _ints([[4, -1, 2, -1]], device, table_dtype)  # page 1 unmapped (and page 3, past S)
    ttsim.experimental.paged_fill_cache(cache, ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT,
                                                                device=device), table, batch_idx=0)
    got = ttsim.to_torch(cache).float()
    want = x.bfloat16().float()[0, 0]
    assert torch.equal(got[4, 0], want[:bs]) and torch.equal(got[2, 0], want[2 * bs:])  # page 2 is not shifted
    for blk in (0, 1, 3, 5):
        assert not got[blk].any(), blk  # page 1's tokens went nowhere


def test_paged_fill_cache_still_refuses_other_bad_entries(device):
    cache = ttsim.from_torch(torch.zeros(4, 1, 32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    x = ttsim.from_torch(torch.ones(1, 1, 64, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    for bad in (-2, 4):
        with pytest.raises((ttsim.TTFatal, IndexError), match=rf"maps to block {bad}"):
            ttsim.experimental.paged_fill_cache(cache, x, _ints([[0, bad]], device), batch_idx=0)
            ttsim.synchronize_device(device)


def test_fill_kernel_drops_the_unmapped_pages_input_in_place():
    """The kernel alone (ttsim/kernels): a one-row table with -1 in the middle and at the start."""
    from ttsim.kernels import attention as K

    cache = torch.zeros(3, 1, 4, 2)
    x = torch.arange(1.0, 25.0).reshape(1, 1, 12, 2)  # three pages of block_size 4
    K.paged_fill_cache(cache, x, torch.tensor([-1, 2, -1]), 0)
    assert torch.equal(cache[2, 0], x[0, 0, 4:8]) and not cache[0].any() and not cache[1].any()
