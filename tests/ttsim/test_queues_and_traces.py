"""Command queues, non-blocking reads, events and traces."""

import warnings

import pytest
import torch

import ttsim

SEEDS = range(24)


def _row(value: float) -> torch.Tensor:
    return torch.full((1, 32), value)


def _read_before_sync(seed: int) -> tuple[float, float]:
    """Write 1.0 over 0.0, read back without blocking; return (seen early, seen after sync)."""
    ttsim.set_seed(seed)
    dev = ttsim.open_device(device_id=0)
    try:
        x = ttsim.from_torch(_row(0.0), dtype=ttsim.float32, device=dev)
        host = ttsim.from_torch(_row(0.0), dtype=ttsim.float32)
        ttsim.copy_device_to_host_tensor(x, host)  # blocking: host now holds 0.0
        ttsim.copy_host_to_device_tensor(ttsim.from_torch(_row(1.0), dtype=ttsim.float32), x)
        ttsim.copy_device_to_host_tensor(x, host, blocking=False)
        early = ttsim.to_torch(host)[0, 0].item()
        ttsim.synchronize_device(dev)
        return early, ttsim.to_torch(host)[0, 0].item()
    finally:
        ttsim.close_device(dev)


def test_non_blocking_read_used_before_sync_can_show_the_pre_op_value():
    results = [_read_before_sync(s) for s in SEEDS]
    early = {e for e, _ in results}
    assert early == {0.0, 1.0}, "some seeds must show the pre-op value, others the new one"
    assert all(after == 1.0 for _, after in results), "after synchronisation the read has always landed"
    # and a seed replays exactly
    assert [_read_before_sync(s) for s in SEEDS] == results


def test_event_synchronize_makes_a_non_blocking_read_safe():
    for seed in SEEDS:
        ttsim.set_seed(seed)
        dev = ttsim.open_device(device_id=0)
        x = ttsim.from_torch(_row(3.0), dtype=ttsim.float32, device=dev)
        y = ttsim.multiply(x, 2.0)
        host = y.cpu(blocking=False)
        ttsim.event_synchronize(ttsim.record_event(dev, 0))
        assert ttsim.to_torch(host)[0, 0].item() == 6.0
        ttsim.close_device(dev)


def _two_queue_read(seed: int, ordered: bool) -> float:
    ttsim.set_seed(seed)
    dev = ttsim.open_device(device_id=0, num_command_queues=2)
    try:
        x = ttsim.from_torch(_row(0.0), dtype=ttsim.float32, device=dev)
        ttsim.synchronize_device(dev)
        ttsim.copy_host_to_device_tensor(ttsim.from_torch(_row(1.0), dtype=ttsim.float32), x, cq_id=0)
        if ordered:
            ttsim.wait_for_event(1, ttsim.record_event(dev, 0))
        return ttsim.to_torch(x, cq_id=1)[0, 0].item()  # a BLOCKING read, on the other queue
    finally:
        ttsim.close_device(dev)


def test_second_queue_races_the_first_unless_ordered_by_an_event():
    assert {_two_queue_read(s, ordered=False) for s in SEEDS} == {0.0, 1.0}
    assert {_two_queue_read(s, ordered=True) for s in SEEDS} == {1.0}


@pytest.mark.parametrize("queues", [1, 2])  # one queue drains on its own path (no interleaving draw)
def test_waiting_on_an_event_no_queue_records_is_a_hang_error(queues):
    dev = ttsim.open_device(device_id=0, num_command_queues=queues)
    waiter = queues - 1
    try:
        ev = ttsim.MeshEvent(dev, 0)  # never recorded
        dev.wait_for_event(waiter, ev)
        with pytest.raises(ttsim.TTFatal, match=f"device hang: cq {waiter} waits for MeshEvent"):
            ttsim.synchronize_device(dev)
    finally:
        dev._queues[waiter].clear()
        ttsim.close_device(dev)


def test_one_queue_runs_its_commands_in_order_and_only_once():
    ttsim.set_seed(3)
    dev = ttsim.open_device(device_id=0)
    try:
        ran = []
        for i in range(40):  # with the default lag some enqueues drain, some leave work queued
            dev.enqueue(0, f"mark {i}", lambda i=i: ran.append(i))
        ttsim.synchronize_device(dev)
        assert ran == list(range(40))
        assert dev.stats["commands"] == 40
    finally:
        ttsim.close_device(dev)


def test_trace_replay_reads_the_persistent_input_buffers(device):
    inp = ttsim.from_torch(_row(1.0), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    warm = ttsim.multiply(inp, 2.0)  # compile run, as real code does before capture
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    out = ttsim.multiply(inp, 2.0)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    addresses = (inp.buffer_address(), out.buffer_address())
    for value in (5.0, -3.0):
        ttsim.copy_host_to_device_tensor(
            ttsim.from_torch(_row(value), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT), inp
        )
        ttsim.execute_trace(device, tid, cq_id=0, blocking=False)
        assert ttsim.to_torch(out)[0, 0].item() == 2 * value
    assert (inp.buffer_address(), out.buffer_address()) == addresses
    assert ttsim.to_torch(warm)[0, 0].item() == 2.0
    ttsim.release_trace(device, tid)


def test_capture_records_without_running(device):
    inp = ttsim.from_torch(_row(1.0), dtype=ttsim.float32, device=device)
    ttsim.synchronize_device(device)
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    out = ttsim.add(inp, 1.0)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    # nothing ran: the output holds whatever its memory held
    before = ttsim.to_torch(out)[0, 0].item()
    ttsim.execute_trace(device, tid, cq_id=0)
    assert ttsim.to_torch(out)[0, 0].item() == 2.0 != before


def test_allocating_while_a_trace_is_live_warns_and_can_be_corrupted(device):
    inp = ttsim.from_torch(_row(7.0), dtype=ttsim.float32, device=device)
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    tmp = ttsim.multiply(inp, 2.0)
    out = ttsim.add(tmp, 1.0)
    tmp_address = tmp.buffer_address()
    ttsim.deallocate(tmp)  # freed inside the capture: the trace still writes there
    ttsim.end_trace_capture(device, tid, cq_id=0)
    with pytest.warns(ttsim.TraceAllocationWarning, match="active trace"):
        victim = ttsim.from_torch(_row(0.0), dtype=ttsim.float32, device=device)
    assert victim.buffer_address() == tmp_address
    assert ttsim.to_torch(victim)[0, 0].item() == 0.0
    ttsim.execute_trace(device, tid, cq_id=0)
    assert ttsim.to_torch(out)[0, 0].item() == 15.0
    assert ttsim.to_torch(victim)[0, 0].item() == 14.0, "the replay overwrote the new buffer"
    ttsim.release_trace(device, tid)


def test_trace_errors_name_the_problem(device):
    with pytest.raises(ttsim.TTFatal, match="no trace with id 99"):
        ttsim.execute_trace(device, 99)
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    with pytest.raises(ttsim.TTFatal, match="already in progress"):
        ttsim.begin_trace_capture(device, cq_id=0)
    x = ttsim.from_torch(_row(1.0), dtype=ttsim.float32, device=device)
    with pytest.raises(ttsim.TTFatal, match="not allowed while a trace is being captured"):
        ttsim.to_torch(x)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    ttsim.release_trace(device, tid)


def _warns_on_allocation(device) -> bool:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        ttsim.deallocate(ttsim.from_torch(_row(0.0), dtype=ttsim.float32, device=device))
    return any(issubclass(w.category, ttsim.TraceAllocationWarning) for w in seen)


def test_the_allocation_warning_holds_exactly_while_some_trace_is_live():
    """ttnn warns on an allocation while any trace is captured and not released; not during a
    capture, not once every trace is released, and not for a capture that end_trace_capture refused."""
    dev = ttsim.open_device(device_id=0, trace_region_size=1 << 20)
    try:
        x = ttsim.from_torch(_row(1.0), dtype=ttsim.float32, device=dev)
        assert not _warns_on_allocation(dev)
        ids = []
        for _ in range(2):
            tid = ttsim.begin_trace_capture(dev, cq_id=0)
            assert not _warns_on_allocation(dev), "allocating inside the capture is the capture's own business"
            ttsim.add(x, 1.0)
            ttsim.end_trace_capture(dev, tid, cq_id=0)
            ids.append(tid)
            assert _warns_on_allocation(dev)
        ttsim.release_trace(dev, ids[0])
        assert _warns_on_allocation(dev), "one trace is still live"
        ttsim.release_trace(dev, ids[1])
        assert not _warns_on_allocation(dev)
    finally:
        ttsim.close_device(dev)
    tight = ttsim.open_device(device_id=0, trace_region_size=4096)
    try:
        y = ttsim.from_torch(_row(1.0), dtype=ttsim.float32, device=tight)
        tid = ttsim.begin_trace_capture(tight, cq_id=0)
        ttsim.add(y, y)
        with pytest.raises(ttsim.TTFatal, match="trace region"):
            ttsim.end_trace_capture(tight, tid, cq_id=0)
        assert not _warns_on_allocation(tight), "a refused capture leaves no live trace"
    finally:
        ttsim.close_device(tight)
