"""Storage formats: bf16 rounding, block floats, tile padding, byte images."""

import struct

import pytest
import torch

import ttsim
from ttsim import numerics


def bf16(values):
    t = ttsim.from_torch(torch.tensor(values, dtype=torch.float32), dtype=ttsim.bfloat16)
    return ttsim.to_torch(t).float().tolist()


def test_bf16_known_production_conversions():
    assert bf16([1.0009765625, 3.14159265, 65504.0]) == [1.0, 3.140625, 65536.0]


def test_bf16_rounds_ties_to_even_and_keeps_subnormals():
    # 1 + 2^-8 is exactly halfway between 1.0 and 1 + 2^-7: ties go to the even mantissa (1.0)
    # 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6 (even): rounds up
    assert bf16([1.00390625, 1.01171875]) == [1.0, 1.015625]
    tiny = struct.unpack("<f", struct.pack("<I", 0x00010000))[0]  # a bf16-representable subnormal
    assert bf16([tiny]) == [tiny] and tiny > 0


def test_bfp8_shares_one_exponent_per_16_values_of_a_face_row():
    row = torch.full((1, 32, 32), 0.01)
    row[0, 0, 0] = 100.0  # an outlier in the first 16 values of row 0
    t = ttsim.from_torch(row, dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT)
    back = ttsim.to_torch(t)
    assert back[0, 0, 0] == 100.0
    # its 15 neighbours share the outlier's exponent: 0.01 is below half a step and flushes
    assert torch.all(back[0, 0, 1:16] == 0)
    # the next group (columns 16..31) and other rows keep their own exponent
    assert torch.allclose(back[0, 0, 16:], torch.full((16,), 0.01), rtol=1 / 64)
    assert torch.allclose(back[0, 1:, :], torch.full((31, 32), 0.01), rtol=1 / 64)


def test_bfp4_is_coarser_than_bfp8():
    x = torch.linspace(-1, 1, 32 * 32).reshape(32, 32)
    err = {}
    for dt in (ttsim.bfloat8_b, ttsim.bfloat4_b):
        back = ttsim.to_torch(ttsim.from_torch(x, dtype=dt, layout=ttsim.TILE_LAYOUT))
        err[dt] = (back - x).abs().max().item()
    assert 0 < err[ttsim.bfloat8_b] < err[ttsim.bfloat4_b] < 0.25


def test_block_floats_require_tile_layout():
    with pytest.raises(ttsim.TTFatal, match="requires layout=TILE_LAYOUT"):
        ttsim.from_torch(torch.ones(32, 32), dtype=ttsim.bfloat8_b, layout=ttsim.ROW_MAJOR_LAYOUT)


@pytest.mark.parametrize(
    "shape, padded",
    [([1, 1, 1, 1], [1, 1, 32, 32]), ([1, 1, 31, 33], [1, 1, 32, 64]), ([2, 3, 32, 64], [2, 3, 32, 64])],
)
def test_tile_padded_shapes(shape, padded):
    t = ttsim.from_torch(torch.zeros(shape), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT)
    assert list(t.shape) == shape and list(t.padded_shape) == padded
    assert list(ttsim.to_torch(t).shape) == shape


@pytest.mark.parametrize("dtype", [ttsim.bfloat16, ttsim.float32, ttsim.bfloat8_b, ttsim.bfloat4_b, ttsim.int32])
@pytest.mark.parametrize("layout", [ttsim.ROW_MAJOR_LAYOUT, ttsim.TILE_LAYOUT])
def test_byte_image_round_trips(dtype, layout):
    if dtype in (ttsim.bfloat8_b, ttsim.bfloat4_b) and layout == ttsim.ROW_MAJOR_LAYOUT:
        pytest.skip("block floats exist only in tiles")
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 64, 96, generator=g) * 10
    data = numerics.quantize(x, dtype)
    raw = numerics.encode(data, dtype, layout)
    assert raw.size == numerics.nbytes(dtype, layout, tuple(data.shape))
    assert torch.equal(numerics.decode(raw, dtype, layout, tuple(data.shape)), data)


def test_tile_byte_order_is_faces_of_16x16():
    x = torch.arange(32 * 32, dtype=torch.float32).reshape(32, 32)
    raw = numerics.encode(x, ttsim.float32, ttsim.TILE_LAYOUT)
    values = torch.from_numpy(raw.view("<f4").copy())
    # face 0 is rows 0-15 x cols 0-15, face 1 rows 0-15 x cols 16-31, then the lower faces
    assert values[:16].tolist() == list(range(16))
    assert values[16] == 32  # second row of face 0
    assert values[256] == 16  # face 1 starts at column 16
    assert values[512] == 16 * 32  # face 2 starts at row 16
