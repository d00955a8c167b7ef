"""The op hot path's shortcuts keep every semantic: memoised conversions see every write,
buffers never share storage, fast numeric paths equal the explicit rules, and the junk of
a non-blocking read is fixed when the read is issued."""

import pytest
import torch

import ttsim
from ttsim.seed import junk_bytes
from ttsim import numerics

RM = ttsim.ROW_MAJOR_LAYOUT


def rm(x, device, dtype):
    return ttsim.from_torch(x, dtype=dtype, layout=RM, device=device)


def table(device, fill):
    return rm(torch.arange(4 * 32, dtype=torch.float32).reshape(4, 32) + fill, device, ttsim.bfloat16)


def lookup(ids, tbl):
    return ttsim.to_torch(ttsim.embedding(ids, tbl)).float()


def test_a_table_read_again_after_an_in_place_copy_shows_the_new_rows(device):
    ids = rm(torch.tensor([[2, 0]], dtype=torch.int32), device, ttsim.uint32)
    tbl = table(device, 0.0)
    first = lookup(ids, tbl)  # converts (and memoises) the table's logical values
    ttsim.copy(table(device, 100.0), tbl)  # in place: same buffer, same storage object
    again = lookup(ids, tbl)
    assert torch.equal(again, first + 100.0)


def test_an_int_buffer_read_after_plus_one_shows_the_increment(device):
    pos = rm(torch.tensor([3, -1, 7, 0], dtype=torch.int32), device, ttsim.int32)
    before = ttsim.to_torch(ttsim.typecast(pos, ttsim.float32)).tolist()
    ttsim.plus_one(pos, skip_negative_entries=True)
    after = ttsim.to_torch(ttsim.typecast(pos, ttsim.float32)).tolist()
    assert before == [3.0, -1.0, 7.0, 0.0] and after == [4.0, -1.0, 8.0, 1.0]


def test_outputs_never_share_storage_with_inputs_or_each_other(device):
    x = rm(torch.tensor([1.0, 2.0, 3.0]), device, ttsim.bfloat16)
    a = ttsim.typecast(x, ttsim.float32)  # bf16 -> f32: the memoised conversion must not leak
    b = ttsim.typecast(x, ttsim.float32)
    c = ttsim.clone(a)  # f32 -> f32: the math returns its input as is
    ttsim.copy(rm(torch.tensor([9.0, 9.0, 9.0]), device, ttsim.float32), a)
    assert ttsim.to_torch(a).tolist() == [9.0, 9.0, 9.0]
    for t in (b, c):
        assert ttsim.to_torch(t).tolist() == [1.0, 2.0, 3.0]
    assert ttsim.to_torch(x).float().tolist() == [1.0, 2.0, 3.0]


def test_int_outputs_never_share_storage_with_their_inputs(device):
    """An int32 result that IS an input (typecast to the same type) or a view of one is copied."""
    pos = rm(torch.tensor([3, -1, 7, 0], dtype=torch.int32), device, ttsim.int32)
    same = ttsim.typecast(pos, ttsim.int32)
    view = ttsim.reshape(pos, [2, 2])
    ttsim.plus_one(pos)
    assert ttsim.to_torch(pos).tolist() == [4, 0, 8, 1]
    assert ttsim.to_torch(same).tolist() == [3, -1, 7, 0] and ttsim.to_torch(view).tolist() == [[3, -1], [7, 0]]


@pytest.mark.parametrize("layout", [ttsim.ROW_MAJOR_LAYOUT, ttsim.TILE_LAYOUT])
@pytest.mark.parametrize("dtype", [ttsim.int32, ttsim.float32, ttsim.bfloat16])
def test_to_torch_hands_out_memory_nobody_else_holds(device, layout, dtype):
    """Writing into what to_torch returned changes neither the device nor a host tensor's data."""
    src = torch.arange(6, dtype=torch.int32 if dtype == ttsim.int32 else torch.float32).reshape(2, 3)
    dev_t = ttsim.from_torch(src, dtype=dtype, layout=layout, device=device)
    host_t = ttsim.from_torch(src, dtype=dtype, layout=layout)
    for t in (dev_t, host_t):
        out = ttsim.to_torch(t)
        out += 5
        assert torch.equal(ttsim.to_torch(t), src.to(out.dtype)), t


def test_a_replicated_tensor_is_incremented_once_per_chip(mesh_device):
    t = ttsim.from_torch(torch.tensor([1, 5, -1], dtype=torch.int32), dtype=ttsim.int32, layout=RM,
                         device=mesh_device)
    ttsim.plus_one(t, skip_negative_entries=True)
    assert [ttsim.to_torch(s).tolist() for s in ttsim.get_device_tensors(t)] == [[2, 6, -1]] * 2


@pytest.mark.parametrize("src", [torch.int64, torch.int32])
def test_int_quantize_fast_paths_wrap_like_the_explicit_rule(src):
    values = [0, 1, -1, 2**31 - 1, 2**31, 2**32 - 1, 2**32 + 5, -(2**31), -(2**31) - 1, 2**62 + 3, -(2**63), 2**63 - 1]
    x = torch.tensor(values, dtype=torch.int64)
    if src == torch.int32:
        x = ((x & 0xFFFFFFFF) - ((x & 0x80000000) << 1)).to(torch.int32)
    explicit = [((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000 for v in x.tolist()]
    for dtype in (ttsim.int32, ttsim.uint32):
        out = numerics.quantize(x, dtype)
        assert out.dtype == torch.int32 and out.tolist() == explicit
        assert out.data_ptr() != x.data_ptr()  # a copy, never the caller's tensor


def _float_to_int32_explicit(v: float) -> int:
    """ttnn's float -> int32 conversion: truncate toward zero, keep the low 32 bits."""
    w = int(torch.tensor(v, dtype=torch.float64).trunc().to(torch.int64)) & 0xFFFFFFFF
    return w - 2**32 if w >= 2**31 else w


# float32 values around the int32 range (2**31 - 128 is the largest float32 below 2**31)
FLOAT_TO_INT = [0.0, 0.5, -0.5, -1.7, 3.99, 2.0**31 - 128, 2.0**31, -(2.0**31), -(2.0**31) - 256, 2.0**32 + 512,
                1e20, -1e20]


@pytest.mark.parametrize("src", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("v", FLOAT_TO_INT)
def test_float_to_int32_fast_path_equals_the_explicit_rule_at_each_boundary(src, v):
    """One value per tensor, so each value alone decides whether the in-range cast applies."""
    x = torch.tensor([v], dtype=src)
    for dtype in (ttsim.int32, ttsim.uint32):
        assert numerics.quantize(x, dtype).tolist() == [_float_to_int32_explicit(float(x[0]))], (v, dtype)


def test_one_value_out_of_range_sends_the_whole_tensor_the_explicit_way():
    x = torch.tensor([1.5, -2.5, 2.0**31, 7.0], dtype=torch.float32)
    assert numerics.quantize(x, ttsim.int32).tolist() == [1, -2, -(2**31), 7]
    x = torch.tensor([1.5, float("nan"), 7.9], dtype=torch.float32)
    assert numerics.quantize(x, ttsim.int32).tolist() == [_float_to_int32_explicit(v) for v in x.tolist()]


def bits(t: torch.Tensor) -> list[int]:
    return [v & 0xFFFF for v in t.view(torch.int16).tolist()]


def test_bf16_conversion_canonicalises_nan_but_leaves_infinities_alone():
    inf = float("inf")
    # inf + -inf sums to NaN: the quick check must fall through to the exact one
    assert bits(numerics.to_bfloat16(torch.tensor([inf, -inf, 1.0]))) == [0x7F80, 0xFF80, 0x3F80]
    neg_nan = torch.tensor([0xFFC00001], dtype=torch.int64).to(torch.int32).view(torch.float32)
    x = torch.cat([torch.tensor([2.0]), neg_nan, torch.tensor([float("nan"), -inf])])
    assert bits(numerics.to_bfloat16(x)) == [0x4000, 0x7FC0, 0x7FC0, 0xFF80]


def _early_read(extra_commands: int) -> list[int]:
    ttsim.set_seed(77)
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 1))
    try:
        dev.lag = 1.0  # the device never catches up by itself: the read stays pending
        x = rm(torch.arange(8, dtype=torch.int32), dev, ttsim.int32)
        host = x.cpu(blocking=False)
        for _ in range(extra_commands):
            ttsim.plus_one(x)
        assert host._pending is not None and not host._pending.done
        return ttsim.to_torch(host).tolist()  # consumed before the read landed: junk
    finally:
        ttsim.close_mesh_device(dev)


def test_an_early_consumed_read_shows_junk_fixed_when_the_read_was_issued():
    junk = _early_read(0)
    assert junk != list(range(8))
    assert _early_read(5) == junk  # later commands do not change what that host buffer held


def test_a_tile_tensor_read_after_an_in_place_copy_shows_the_new_values(device):
    tile = ttsim.TILE_LAYOUT
    x = ttsim.from_torch(torch.ones(3, 5), dtype=ttsim.bfloat16, layout=tile, device=device)
    assert ttsim.to_torch(ttsim.add(x, x)).float().unique().tolist() == [2.0]
    ttsim.copy(ttsim.from_torch(torch.full((3, 5), 4.0), dtype=ttsim.bfloat16, layout=tile, device=device), x)
    assert ttsim.to_torch(ttsim.add(x, x)).float().unique().tolist() == [8.0]


def test_the_memo_is_not_served_once_its_values_were_written_into(device):
    from ttsim.ops.base import chip_logical

    x = ttsim.from_torch(torch.tensor([1.0, 2.0]), dtype=ttsim.bfloat16, layout=RM, device=device)
    buf = x._buffers[0]
    ttsim.synchronize_device(device)
    first = chip_logical(buf, x)
    assert chip_logical(buf, x) is first  # converted once
    first.add_(5.0)  # a math that wrongly writes into its input
    assert chip_logical(buf, x).tolist() == [1.0, 2.0]


def test_inference_tensors_are_converted_on_every_read_and_show_in_place_writes(device):
    """Scenarios run in torch's inference mode (harness/scenario.py): a buffer's data then has
    no version counter, so the memo is never made and an in-place write must still show."""
    from ttsim.ops.base import chip_logical

    tile = ttsim.TILE_LAYOUT
    with torch.inference_mode():
        x = ttsim.from_torch(torch.ones(3, 5), dtype=ttsim.bfloat16, layout=tile, device=device)
        assert ttsim.to_torch(ttsim.add(x, x)).float().unique().tolist() == [2.0]
        ttsim.synchronize_device(device)
        assert x._buffers[0].data.is_inference()
        assert chip_logical(x._buffers[0], x) is not chip_logical(x._buffers[0], x)
        ttsim.copy(ttsim.from_torch(torch.full((3, 5), 4.0), dtype=ttsim.bfloat16, layout=tile, device=device), x)
        assert ttsim.to_torch(ttsim.add(x, x)).float().unique().tolist() == [8.0]


@pytest.mark.parametrize("bad", [4, 2**31 + 3, 2**32 - 1])
def test_an_embedding_id_outside_the_vocab_reads_what_lies_past_the_table(device, bad):
    """A card does not check device-resident ids (a kernel cannot, without a readback): a
    garbage id such as a trace-buffer-reuse victim holds reads past the table, row ``id``
    (unsigned) of it wherever that lies: here never-written memory, so the chip's seeded junk at
    that address; the in-range rows are untouched."""
    tbl = ttsim.from_torch(torch.arange(8, dtype=torch.float32).reshape(4, 2) + 1, dtype=ttsim.bfloat16,
                           layout=ttsim.ROW_MAJOR_LAYOUT, device=device)
    raw = torch.tensor([[1, bad, 3, 0]], dtype=torch.int64)
    ids = rm(((raw & 0xFFFFFFFF) - ((raw & 0x80000000) << 1)).to(torch.int32), device, ttsim.uint32)
    out = ttsim.to_torch(ttsim.embedding(ids, tbl)).reshape(4, 2)
    junk = junk_bytes(device.chips[0].dram.junk_key, tbl.buffer_address() + bad * 4, 4)
    want = numerics.to_bfloat16(torch.from_numpy(junk.copy()).view(torch.bfloat16))  # NaNs stored canonical
    assert out[1].view(torch.int16).tolist() == want.view(torch.int16).tolist()
    assert out[[0, 2, 3]].float().tolist() == [[3.0, 4.0], [7.0, 8.0], [1.0, 2.0]]


# -- ops that only move values work on bf16 as stored (run_op's moves_values) -------------------

TILE = ttsim.TILE_LAYOUT


def _junk_bf16(device, shape, layout):
    """Never-written memory, as bf16: random bit patterns, so non-canonical NaNs (0xFFxx,
    0x7Fxx with any payload), infinities, negative zeros and subnormals all occur."""
    return ttsim.allocate_tensor_on_device(ttsim.Shape(shape), ttsim.bfloat16, layout, device)


def _bits(t) -> list[int]:
    return ttsim.to_torch(t).view(torch.int16).reshape(-1).tolist()


MOVES = {
    "reshape": lambda x, ids: ttsim.reshape(x, [1, 64, 96]),
    "to_layout": lambda x, ids: ttsim.to_layout(x, RM),
    "typecast": lambda x, ids: ttsim.typecast(x, ttsim.bfloat16),
    "embedding": lambda x, ids: ttsim.embedding(ids, ttsim.to_layout(x, RM), layout=TILE),
    # the moved values widened to a float32 / block-float output, NaN payloads included
    "typecast to float32": lambda x, ids: ttsim.typecast(x, ttsim.float32),
    "embedding to float32": lambda x, ids: ttsim.embedding(ids, ttsim.to_layout(x, RM), dtype=ttsim.float32),
    "to_layout to bfloat8_b": lambda x, ids: ttsim.to_layout(ttsim.to_layout(x, RM), TILE, dtype=ttsim.bfloat8_b),
}


@pytest.mark.parametrize("op", sorted(MOVES))
def test_a_value_moving_op_stores_what_the_float32_path_stores(op, device, monkeypatch):
    """Differential: the same op on the same junk, once on stored bf16 and once through the
    float32 widening every other op takes (chip_stored swapped for chip_logical)."""
    from ttsim.ops import base

    x = _junk_bf16(device, [96, 64], TILE)
    ids = rm(torch.tensor([[0, 95, 17, 17, 3]], dtype=torch.int32), device, ttsim.uint32)
    raw = _bits(x)
    assert any((b & 0x7F80) == 0x7F80 and b & 0x7F and b != 0x7FC0 for b in raw), "junk holds no odd NaN"
    fast = _bits(MOVES[op](x, ids))
    monkeypatch.setattr(base, "chip_stored", base.chip_logical)
    assert fast == _bits(MOVES[op](x, ids))


def test_a_moved_bf16_nan_is_stored_canonical_and_every_other_value_exactly(device):
    x = _junk_bf16(device, [64, 96], RM)
    before = _bits(x)
    after = _bits(ttsim.reshape(x, [96, 64]))
    nan = [(b & 0x7F80) == 0x7F80 and (b & 0x7F) != 0 for b in before]
    assert any(nan) and any((b & 0xFFFF) == 0x8000 for b in before)  # NaNs and a -0.0 to keep
    assert [a & 0xFFFF for a, n in zip(after, nan) if n] == [0x7FC0] * sum(nan)
    assert [a for a, n in zip(after, nan) if not n] == [b for b, n in zip(before, nan) if not n]


@pytest.mark.parametrize("inference", [True, False])
def test_kernel_threads_run_in_the_callers_inference_mode(inference, monkeypatch):
    """The SDPA kernels spread rows over Python threads; torch's inference mode is per thread,
    so without passing it on, a row's in-place write into an inference tensor would raise."""
    from ttsim.kernels.attention import _for_each

    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)  # two workers, whatever the box
    monkeypatch.setattr(torch, "set_num_threads", lambda n: None)
    seen = []
    with torch.inference_mode(inference):
        out = torch.zeros(4)

        def row(r):
            seen.append(torch.is_inference_mode_enabled())
            out[r].copy_(torch.tensor(float(r + 1)))

        _for_each(range(4), row)
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0] and seen == [inference] * 4
