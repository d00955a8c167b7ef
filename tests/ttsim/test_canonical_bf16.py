"""The bf16 NaN-check shortcut (ttsim/ops/base.py: canonical_bf16): a value-moving op skips the
NaN canonicalisation of its bf16 result only when every bf16 value it moved comes from a buffer
known to hold no NaN but 0x7FC0. Every byte must be what the plain path stores: a moved
non-canonical NaN (from residue, junk or an in-place write) still comes out 0x7FC0, and every
other value (infinities, -0.0, subnormals) exactly as it was."""

import pytest
import torch

import ttsim
from ttsim import numerics
from ttsim.ops import base

RM = ttsim.ROW_MAJOR_LAYOUT
TILE = ttsim.TILE_LAYOUT
CANONICAL_NAN = 0x7FC0
# bf16 bit patterns: non-canonical NaNs (negative, signalling, payloads), the infinities, both
# zeros, a subnormal, ordinary values
PATTERNS = [0xFFC0, 0x7F81, 0xFFFF, 0x7FC1, 0x7F80, 0xFF80, 0x0000, 0x8000, 0x0001, 0x3F80, 0xC2F7, 0x7FC0]


def _bits_as_bf16(bits: list[int]) -> torch.Tensor:
    return torch.tensor(bits, dtype=torch.int32).to(torch.int16).view(torch.bfloat16)


def _bits(x: torch.Tensor) -> list[int]:
    return [b & 0xFFFF for b in x.contiguous().view(torch.int16).reshape(-1).tolist()]


def _expected(bits: list[int]) -> list[int]:
    """The plain path's bytes: any NaN -> 0x7FC0, every other pattern unchanged."""
    return [CANONICAL_NAN if (b & 0x7F80) == 0x7F80 and b & 0x7F else b for b in bits]


def _bf16_buffer_with_raw_bits(device, bits: list[int]):
    """A [1, 1, 32, 32] bf16 ROW_MAJOR device tensor whose memory holds exactly ``bits`` (then zeros),
    written the way a card would leave them: as an int32 buffer's residue (no bf16 conversion)."""
    words = bits + [0] * (1024 - len(bits))
    packed = [words[i] | (words[i + 1] << 16) for i in range(0, 1024, 2)]
    packed = [w - 2**32 if w >= 2**31 else w for w in packed]
    ints = ttsim.from_torch(torch.tensor(packed, dtype=torch.int32).reshape(1, 1, 16, 32), dtype=ttsim.int32,
                            layout=RM, device=device)
    address = ints.buffer_address()
    ttsim.synchronize_device(device)
    ttsim.deallocate(ints)
    out = ttsim.allocate_tensor_on_device(ttsim.Shape([1, 1, 32, 32]), ttsim.bfloat16, RM, device)
    assert out.buffer_address() == address  # first fit: the freed int buffer's bytes
    return out


@pytest.mark.parametrize("op", ["reshape", "to_layout", "embedding"])
def test_moved_residue_nans_come_out_canonical_and_all_else_exact(device, op):
    src = _bf16_buffer_with_raw_bits(device, PATTERNS)
    stored = _bits(ttsim.to_torch(src))
    assert stored[:len(PATTERNS)] == PATTERNS  # the residue really holds the raw patterns
    if op == "reshape":
        moved = ttsim.reshape(src, [1, 32, 32])
    elif op == "to_layout":
        moved = ttsim.to_layout(src, TILE)
    else:
        table = ttsim.reshape(src, [32, 32])  # row 0 holds the patterns
        ids = ttsim.from_torch(torch.tensor([[0, 0]], dtype=torch.int32), dtype=ttsim.uint32, layout=RM,
                               device=device)
        moved = ttsim.embedding(ids, table)
    got = _bits(ttsim.to_torch(moved))[:len(PATTERNS)]
    assert got == _expected(PATTERNS)


def test_a_buffer_holding_a_nan_is_never_marked_canonical(device):
    src = _bf16_buffer_with_raw_bits(device, [0x3F80, 0x7FC0])  # only the canonical NaN
    buf = src._buffers[0]
    ttsim.synchronize_device(device)
    assert not base.canonical_bf16(buf) and buf.canon is None  # conservative: any NaN at all
    clean = ttsim.from_torch(torch.ones(1, 32, dtype=torch.bfloat16), dtype=ttsim.bfloat16, layout=RM,
                             device=device)
    ttsim.synchronize_device(device)
    assert base.canonical_bf16(clean._buffers[0]) and clean._buffers[0].canon is clean._buffers[0].data


def test_an_in_place_write_clears_the_mark_so_its_nans_are_canonicalised(device):
    """A table first read as canonical, then written IN PLACE (same data object) with raw NaN
    patterns: the next value-moving op must see the write and canonicalise again."""
    table = ttsim.from_torch(torch.ones(4, 16, dtype=torch.bfloat16), dtype=ttsim.bfloat16, layout=RM,
                             device=device)
    ids = ttsim.from_torch(torch.tensor([[1]], dtype=torch.int32), dtype=ttsim.uint32, layout=RM, device=device)
    assert _bits(ttsim.to_torch(ttsim.embedding(ids, table))) == [0x3F80] * 16
    buf = table._buffers[0]
    assert buf.canon is buf.data  # marked by the first lookup
    data_before = buf.data

    def poke(target, _chip):  # a card-like in-place write of raw bits (no bf16 rounding)
        target.view(torch.int16)[1, :len(PATTERNS)] = _bits_as_bf16(PATTERNS).view(torch.int16)

    base.run_inplace("poke", table, [], poke)
    ttsim.synchronize_device(device)
    assert buf.data is data_before and buf.canon is None
    got = _bits(ttsim.to_torch(ttsim.embedding(ids, table)))
    assert got == _expected(PATTERNS) + [0x3F80] * (16 - len(PATTERNS))


def test_the_shortcut_stores_the_bytes_the_nan_check_stores():
    """storage(canonical=True) on canonical bf16 values equals the checked path byte for byte,
    padding included (TILE and ROW_MAJOR, with and without a canonical NaN)."""
    x = _bits_as_bf16(_expected(PATTERNS)).reshape(1, 12)
    for layout in (RM, TILE):
        plain = base.storage(x, ttsim.bfloat16, layout, (x,))
        fast = base.storage(x, ttsim.bfloat16, layout, (x,), canonical=True)
        assert plain.dtype == fast.dtype == torch.bfloat16 and plain.shape == fast.shape
        assert _bits(plain) == _bits(fast)
        assert fast is not x  # a buffer still owns its data
    assert _bits(numerics.to_bfloat16(_bits_as_bf16(PATTERNS))) == _expected(PATTERNS)


def test_has_nan_sees_a_nan_even_when_infinities_cancel_in_the_sum():
    assert not numerics.has_nan(torch.tensor([float("inf"), float("-inf"), 1.0]))
    assert numerics.has_nan(torch.tensor([float("inf"), float("nan")]))
    assert numerics.has_nan(_bits_as_bf16([0xFFC1, 0x3F80]))
    assert not numerics.has_nan(torch.zeros(0))
