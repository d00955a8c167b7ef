"""A trace replay writes its captured buffers at their captured addresses, freed or not.

Independent of test_queues_and_traces.py's same-shape case: here the victims are another
dtype and each covers only part of the freed intermediate (so the replay's bytes land at
an offset into its image, reinterpreted), and a neighbour outside it is untouched.
"""

import warnings

import pytest
import torch

import ttsim

TRACED = {"trace_region_size": 1 << 20}


@pytest.mark.parametrize("device_params", [TRACED], indirect=True)
def test_a_partly_overlapping_buffer_of_another_dtype_gets_the_replayed_bytes(device):
    values = torch.arange(64, dtype=torch.float32).reshape(1, 64)
    inp = ttsim.from_torch(values, dtype=ttsim.float32, device=device)
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    tmp = ttsim.multiply(inp, 2.0)  # 64 float32 = 256 bytes, freed inside the capture
    out = ttsim.add(tmp, 1.0)
    lo, hi = tmp.buffer_address(), tmp.buffer_address() + 256
    ttsim.deallocate(tmp)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    corruptions = device.stats["trace_corruptions"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ttsim.TraceAllocationWarning)
        # first fit: the first half of the freed intermediate, then the second half
        first = ttsim.from_torch(torch.zeros(1, 32), dtype=ttsim.float32, device=device)
        victim = ttsim.from_torch(torch.full((1, 32), -7, dtype=torch.int32), dtype=ttsim.int32, device=device)
    assert (first.buffer_address(), victim.buffer_address()) == (lo, lo + 128)
    assert ttsim.to_torch(victim).reshape(-1).tolist() == [-7] * 32
    ttsim.execute_trace(device, tid, cq_id=0)
    assert ttsim.to_torch(out).reshape(-1).tolist() == (2 * values + 1).reshape(-1).tolist()
    doubled = (2 * values).reshape(-1)
    assert ttsim.to_torch(victim).reshape(-1).tolist() == doubled[32:].view(torch.int32).tolist(), (
        "the second half of the intermediate's float32 bytes, read as int32")
    assert ttsim.to_torch(first).reshape(-1).tolist() == doubled[:32].tolist()
    assert device.stats["trace_corruptions"] == corruptions + 2
    assert victim.buffer_address() + 128 == hi
    ttsim.release_trace(device, tid)


@pytest.mark.parametrize("device_params", [TRACED], indirect=True)
def test_a_buffer_placed_next_to_the_freed_intermediate_is_never_touched(device):
    inp = ttsim.from_torch(torch.full((1, 64), 3.0), dtype=ttsim.float32, device=device)
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    tmp = ttsim.multiply(inp, 2.0)
    out = ttsim.add(tmp, 1.0)
    ttsim.deallocate(tmp)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    after_out = out.buffer_address() + 256  # first free byte past everything allocated so far
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ttsim.TraceAllocationWarning)
        filler = ttsim.from_torch(torch.zeros(1, 64), dtype=ttsim.float32, device=device)  # takes the hole
        neighbour = ttsim.from_torch(torch.full((1, 64), 5.0), dtype=ttsim.float32, device=device)
    assert neighbour.buffer_address() >= after_out
    ttsim.execute_trace(device, tid, cq_id=0)
    assert ttsim.to_torch(neighbour)[0].tolist() == [5.0] * 64
    assert ttsim.to_torch(filler)[0].tolist() == [6.0] * 64
    ttsim.release_trace(device, tid)
