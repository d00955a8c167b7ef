"""from_torch's dtype inference and small unsigned types, as real ttnn 0.81.1 does them
(measured on its host constructor with numpy inputs: see ttsim/tensor.py)."""

import pytest
import torch

import ttsim


@pytest.mark.parametrize("torch_dtype, want", [
    (torch.uint8, ttsim.uint8), (torch.bool, ttsim.uint8), (torch.uint16, ttsim.uint16), (torch.int16, ttsim.uint16),
    (torch.int32, ttsim.int32), (torch.uint32, ttsim.uint32), (torch.int64, ttsim.uint32),
    (torch.float32, ttsim.float32), (torch.bfloat16, ttsim.bfloat16),
])
def test_inferred_dtypes(torch_dtype, want):
    src = torch.tensor([[1, 0, 3]]).to(torch_dtype)
    t = ttsim.from_torch(src)
    assert t.dtype == want and ttsim.to_torch(t).flatten().tolist() == src.to(torch.int64).flatten().tolist()


def test_float64_is_refused_with_the_choices():
    with pytest.raises(ttsim.TTFatal, match=r"cannot infer a ttnn dtype from torch.float64; pass dtype="):
        ttsim.from_torch(torch.zeros(2, dtype=torch.float64))


def test_integers_wrap_into_small_unsigned_types_as_ttnn_does():
    x = torch.tensor([[1, 70000, -3, 300]])
    assert ttsim.to_torch(ttsim.from_torch(x, dtype=ttsim.uint8)).tolist() == [[1, 112, 253, 44]]
    assert ttsim.to_torch(ttsim.from_torch(x, dtype=ttsim.uint16)).tolist() == [[1, 4464, 65533, 300]]


def test_floats_truncate_and_clamp_into_uint16():
    x = torch.tensor([-2.5, 1.9, 70000.0])
    assert ttsim.to_torch(ttsim.from_torch(x, dtype=ttsim.uint16)).tolist() == [0, 1, 65535]


@pytest.mark.parametrize("layout", [ttsim.ROW_MAJOR_LAYOUT, ttsim.TILE_LAYOUT])
@pytest.mark.parametrize("dtype, torch_dtype, top", [(ttsim.uint8, torch.uint8, 255), (ttsim.uint16, torch.uint16, 65535)])
def test_small_unsigned_round_trip_through_the_device(device, layout, dtype, torch_dtype, top):
    x = (torch.arange(3 * 40) * 97 % (top + 1)).reshape(3, 40)
    t = ttsim.from_torch(x, dtype=dtype, layout=layout, device=device)
    back = ttsim.to_torch(t)
    assert back.dtype == torch_dtype and torch.equal(back.to(torch.int64), x)
    assert torch.equal(ttsim.to_torch(ttsim.typecast(t, ttsim.float32)) if layout == ttsim.TILE_LAYOUT
                       else ttsim.to_torch(ttsim.typecast(ttsim.to_layout(t, ttsim.TILE_LAYOUT), ttsim.float32)),
                       x.float())


# -- int16 read back (settled against 0.81.1's to_torch) ---------------------------------------

def test_int16_reads_back_as_uint16_with_negatives_wrapped_as_real(real):
    """0.81.1 stores int16 as UINT16 and hands torch a uint16 DLPack array: -15884 -> 49652
    (tt-metal tests expecting torch.int16 target another version)."""
    want = real["sharding"]["host_readbacks"]["int16"]
    assert want["dtype"] == "DataType.UINT16" and want["to_torch_dlpack_dtype"] == "uint16"
    x = torch.tensor([[-15884, 3, -1, 32767, -32768]], dtype=torch.int16)
    t = ttsim.Tensor(x)
    out = ttsim.to_torch(t)
    assert repr(t.dtype) == want["dtype"] and out.dtype == torch.uint16
    assert out.to(torch.int64).tolist() == want["to_torch_dlpack"] == want["to_numpy"]
    assert str(t.to_numpy().dtype) == want["to_numpy_dtype"]
