"""The DRAM allocator and what uninitialized memory shows."""

import pytest
import torch

import ttsim


def test_freed_bf16_activations_read_back_as_production_int32_garbage(device):
    # production read positions like 1206993233 = 0x47F14151: two bf16 activations
    # (0x4151 ~ 13.06 and 0x47F1 ~ 123392) seen as one int32
    acts = torch.empty(1, 1, 32, 32)
    acts[..., 0::2] = 13.0625
    acts[..., 1::2] = 123392.0
    t = ttsim.from_torch(acts, dtype=ttsim.bfloat16, device=device)
    address = t.buffer_address()
    ttsim.deallocate(t)
    pos = ttsim.allocate_tensor_on_device(ttsim.Shape([1, 32]), ttsim.int32, ttsim.ROW_MAJOR_LAYOUT, device)
    assert pos.buffer_address() == address  # first fit: the freed block is reused
    assert ttsim.to_torch(pos)[0, :4].tolist() == [1206993233] * 4


def test_never_written_memory_is_seeded_junk_that_replays(device):
    def junk():
        t = ttsim.allocate_tensor_on_device(ttsim.Shape([64]), ttsim.int32, ttsim.ROW_MAJOR_LAYOUT, device)
        values = ttsim.to_torch(t)
        ttsim.deallocate(t)
        return values

    first = junk()
    assert first.unique().numel() > 32  # junk, not zeros
    assert torch.equal(junk(), first)  # freed again: the same bytes are still there


def test_junk_depends_on_seed_only():
    def junk(seed):
        ttsim.set_seed(seed)
        dev = ttsim.open_device(device_id=0)
        try:
            t = ttsim.allocate_tensor_on_device(ttsim.Shape([16]), ttsim.int32, ttsim.ROW_MAJOR_LAYOUT, dev)
            return ttsim.to_torch(t)
        finally:
            ttsim.close_device(dev)

    assert torch.equal(junk(7), junk(7))
    assert not torch.equal(junk(7), junk(8))


def test_first_fit_reuses_the_lowest_hole(device):
    def alloc():
        return ttsim.from_torch(torch.zeros(32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)

    a, b, c = alloc(), alloc(), alloc()
    assert a.buffer_address() < b.buffer_address() < c.buffer_address()
    hole = b.buffer_address()
    ttsim.deallocate(b)
    assert alloc().buffer_address() == hole


def test_out_of_memory_is_a_clear_error(device):
    with pytest.raises(ttsim.TTFatal, match=r"Out of Memory: .* largest free block"):
        ttsim.allocate_tensor_on_device(
            ttsim.Shape([64, 1024, 1024, 1024]), ttsim.bfloat16, ttsim.ROW_MAJOR_LAYOUT, device
        )


def test_use_after_deallocate_names_the_tensor(device):
    t = ttsim.from_torch(torch.ones(4, 4), device=device)
    ttsim.deallocate(t)
    with pytest.raises(ttsim.TTFatal, match=r"to_torch|from_device.*deallocated"):
        ttsim.to_torch(t)


# -- residue bookkeeping: the bisected window against the plain rule ----------------------------

def _plain_claim(residue, start, end):
    """The rule, written plainly: residue overlapping [start, end) is cut back to what lies outside."""
    kept = []
    for lo, hi, buf in residue:
        if hi <= start or lo >= end:
            kept.append((lo, hi, buf))
            continue
        if lo < start:
            kept.append((lo, start, buf))
        if hi > end:
            kept.append((end, hi, buf))
    return kept


def _buffer(address, nbytes, fill):
    from ttsim.memory import Buffer
    from ttsim.types import BufferType

    data = torch.full((nbytes,), fill, dtype=torch.uint8)
    return Buffer(None, BufferType.DRAM, address, nbytes, ttsim.uint8, ttsim.ROW_MAJOR_LAYOUT, (nbytes,), data)


def test_residue_after_random_frees_matches_the_plain_rule_byte_for_byte():
    from ttsim.memory import Region

    rng = torch.Generator().manual_seed(7)
    region = Region("DRAM", 1 << 16, 64, junk_key=5)
    plain = []
    for i in range(300):
        start = int(torch.randint(0, 900, (1,), generator=rng)) * 64
        n = int(torch.randint(1, 40, (1,), generator=rng)) * 64 - int(torch.randint(0, 2, (1,), generator=rng))
        buf = _buffer(start, n, fill=i % 251)
        region.leave_residue(buf)
        plain = sorted(_plain_claim(plain, start, start + n) + [(start, start + n, buf)], key=lambda r: r[0])
        assert [(r.start, r.end, r.buf) for r in region._residue] == plain, f"after free {i}"
    for _ in range(50):  # what uninitialized memory shows: residue where some is, else the seeded junk
        start = int(torch.randint(0, 60000, (1,), generator=rng))
        n = int(torch.randint(1, 3000, (1,), generator=rng))
        want = Region("DRAM", 1 << 16, 64, junk_key=5).read_bytes(start, n)
        for lo, hi, buf in plain:
            a, b = max(lo, start), min(hi, start + n)
            if a < b:
                want[a - start:b - start] = buf.data.numpy()[a - buf.address:b - buf.address]
        assert (region.read_bytes(start, n) == want).all()


def test_a_free_inside_older_residue_splits_it_and_edges_stay_disjoint():
    from ttsim.memory import Region

    region = Region("DRAM", 1 << 16, 64, junk_key=1)
    old, new, touching = _buffer(0, 1024, 1), _buffer(256, 128, 2), _buffer(384, 64, 3)
    for buf in (old, new, touching):
        region.leave_residue(buf)
    spans = [(r.start, r.end, r.buf.data[0].item()) for r in region._residue]
    assert spans == [(0, 256, 1), (256, 384, 2), (384, 448, 3), (448, 1024, 1)]
    got = region.read_bytes(250, 200)
    assert got[:6].tolist() == [1] * 6 and got[6:134].tolist() == [2] * 128 and got[134:198].tolist() == [3] * 64
    assert got[198:].tolist() == [1, 1]
