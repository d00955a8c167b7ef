"""``ttsim.tensor.peek``: a blocking read's result without the read, or None where it could differ.

The sweep's shared runs (harness.shared_arms) peek the inputs of the trace an arm with
``merge_from_last_run`` reads while the run reads another's: exact only if a peek returns
what that read returns and leaves the device as it was.
"""

import pytest
import torch

import ttsim
from ttsim.tensor import peek


def _open(**kw):
    return ttsim.open_mesh_device(ttsim.MeshShape(1, 1), **kw)


@pytest.mark.parametrize("layout", [ttsim.ROW_MAJOR_LAYOUT, ttsim.TILE_LAYOUT], ids=["row-major", "tile"])
@pytest.mark.parametrize("dtype", [ttsim.uint32, ttsim.int32, ttsim.bfloat16], ids=["uint32", "int32", "bf16"])
def test_a_peek_returns_what_the_blocking_read_returns_and_changes_nothing(layout, dtype):
    dev = _open()
    try:
        host = torch.tensor([[3, -1, 2**31 - 1, 7, 0]], dtype=torch.int32)
        t = ttsim.from_torch(host if dtype != ttsim.bfloat16 else host.to(torch.bfloat16), dtype=dtype, layout=layout,
                             device=dev)
        ttsim.synchronize_device(dev)
        before = (dict(dev.stats), ttsim.digest_state([dev]))
        got = peek(t)
        assert (dict(dev.stats), ttsim.digest_state([dev])) == before  # no command, no state
        want = ttsim.to_torch(t)
        assert got.dtype == want.dtype and torch.equal(got, want)
        got[0, 0] = 99  # a copy: writing it changes no buffer
        assert torch.equal(ttsim.to_torch(t), want)
    finally:
        ttsim.close_mesh_device(dev)


def test_no_peek_while_commands_are_queued_or_before_anything_wrote_the_buffer():
    with ttsim.device_knobs(readback_lag=1.0):  # every command waits in the queue
        dev = _open()
    try:
        t = ttsim.from_torch(torch.tensor([[1, 2]], dtype=torch.int32), dtype=ttsim.uint32, device=dev)
        assert peek(t) is None  # the write is queued: a read would run it first
        ttsim.synchronize_device(dev)
        assert torch.equal(peek(t), ttsim.to_torch(t))
        ttsim.copy_host_to_device_tensor(ttsim.from_torch(torch.tensor([[5, 6]], dtype=torch.int32), dtype=ttsim.uint32), t)
        assert peek(t) is None  # the buffer holds [1, 2] but a read would see the queued write land first
        assert ttsim.to_torch(t).tolist() == [[5, 6]]
    finally:
        ttsim.close_mesh_device(dev)
    dev = _open(trace_region_size=1 << 20)
    try:
        a = ttsim.from_torch(torch.ones(1, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=dev)
        tid = ttsim.begin_trace_capture(dev, cq_id=0)
        out = ttsim.add(a, a)  # captured: allocated, never run
        ttsim.end_trace_capture(dev, tid, cq_id=0)
        ttsim.synchronize_device(dev)
        assert peek(out) is None  # its first look would decode the memory beneath: a read's side effect
        ttsim.execute_trace(dev, tid, cq_id=0, blocking=True)
        assert torch.equal(peek(out), ttsim.to_torch(out))
    finally:
        ttsim.close_mesh_device(dev)
