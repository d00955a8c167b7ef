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
