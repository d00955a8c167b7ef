"""ttsim refuses what a card refuses: trace regions, command queues, the fabric, open keywords.

Each rule has its negative cases (with tt-metal's words where tt-metal has them) and a
positive one. Where the real package can answer without a card (set_fabric_config's
state machine, which keywords open_device's binding accepts) ttsim is compared against the
dump of the real ttnn 0.81.1 (fixture ``real``).
"""

from __future__ import annotations

import re

import pytest
import torch

import ttsim
from ttsim.device import TRACE_BYTES_PER_COMMAND as PER_COMMAND
from ttsim.device import TRACE_BYTES_PER_CORE as PER_CORE

#: several tests stage inputs while an earlier trace is live; ttsim warns, as ttnn logs
pytestmark = pytest.mark.filterwarnings("ignore::ttsim.TraceAllocationWarning")

F = ttsim.FabricConfig
#: tt-metal's words for the two dynamic-trace-mode refusals the tests below provoke
DELETION_TEXT = ("Trace buffer at address {} overlaps with buffers deallocated during trace capture (deletion high "
                 "water mark: {}). Avoid deallocating DRAM buffers during trace capture or set a non-zero "
                 "trace_region_size.")
LIVE_TRACE_TEXT = ("Trace buffer at address {} overlaps with DRAM activity captured by another live trace (maximum "
                   "live trace high water mark: {}). Release the existing trace before capturing this trace or set "
                   "a non-zero trace_region_size.")


def _pattern(template: str, *values) -> str:
    """A regex for a tt-metal format string; ``values`` pin its first placeholders."""
    parts = template.split("{}")
    fills = [re.escape(str(v)) for v in values] + [r".+?"] * (len(parts) - 1 - len(values))
    return "".join(re.escape(p) + (fills[i] if i < len(fills) else "") for i, p in enumerate(parts))


@pytest.fixture(autouse=True)
def _fabric_disabled_after():
    yield
    ttsim.set_fabric_config(F.DISABLED)


def _host(n: int = 32):
    return ttsim.from_torch(torch.arange(n * 32, dtype=torch.float32).reshape(n, 32), dtype=ttsim.bfloat16,
                            layout=ttsim.TILE_LAYOUT)


def _capture(dev, ops: int = 1):
    """Capture ``ops`` elementwise ops on a fresh input; returns (trace id, input, output)."""
    x = ttsim.to_device(_host(), dev)
    tid = ttsim.begin_trace_capture(dev, cq_id=0)
    y = x
    for _ in range(ops):
        y = ttsim.add(y, x)
    ttsim.end_trace_capture(dev, tid, cq_id=0)
    return tid, x, y


# ---------------------------------------------------------------------------- trace region

OUTGROWN = re.compile(r"Creating trace buffers of size (\d+)B on MeshDevice 0, but only (\d+)B is allocated "
                      r"for trace region\.")


def test_a_trace_that_fits_its_region_replays_and_releases_its_share():
    dev = ttsim.open_device(device_id=0, trace_region_size=1 << 20)
    try:
        tid, x, y = _capture(dev, ops=3)
        used = dev.trace_buffers_size
        assert used == PER_COMMAND + 3 * (PER_COMMAND + PER_CORE)  # end + 3 ops writing one tile each
        ttsim.execute_trace(dev, tid, cq_id=0, blocking=True)
        assert torch.equal(ttsim.to_torch(y), ttsim.to_torch(x) * 4)
        ttsim.release_trace(dev, tid)
        assert dev.trace_buffers_size == 0
    finally:
        ttsim.close_device(dev)


def test_the_size_estimate_charges_one_core_per_output_tile_up_to_the_whole_grid():
    dev = ttsim.open_device(device_id=0, trace_region_size=1 << 20)
    try:
        for rows, cores in ((32 * 8, 8), (32 * 200, 130)):  # 8 tiles: 8 cores; 200 tiles: all 130 cores
            x = ttsim.to_device(ttsim.from_torch(torch.ones(rows, 32), dtype=ttsim.bfloat16,
                                                 layout=ttsim.TILE_LAYOUT), dev)
            tid = ttsim.begin_trace_capture(dev, cq_id=0)
            ttsim.add(x, x)
            ttsim.end_trace_capture(dev, tid, cq_id=0)
            assert dev.trace_buffers_size == 2 * PER_COMMAND + PER_CORE * cores
            ttsim.release_trace(dev, tid)
        small = ttsim.allocate_tensor_on_device(ttsim.Shape([16]), ttsim.uint32, ttsim.ROW_MAJOR_LAYOUT, dev)
        tid = ttsim.begin_trace_capture(dev, cq_id=0)  # a 64-byte write still occupies a core
        ttsim.copy_host_to_device_tensor(ttsim.from_torch(torch.arange(16, dtype=torch.int32), dtype=ttsim.uint32),
                                         small)
        ttsim.end_trace_capture(dev, tid, cq_id=0)
        assert dev.trace_buffers_size == 2 * PER_COMMAND + PER_CORE
        ttsim.release_trace(dev, tid)
    finally:
        ttsim.close_device(dev)


def test_a_trace_outgrowing_its_region_is_a_tt_fatal_at_end_trace_capture():
    dev = ttsim.open_device(device_id=0, trace_region_size=4096)
    try:
        x = ttsim.to_device(_host(), dev)
        tid = ttsim.begin_trace_capture(dev, cq_id=0)  # tt-metal checks at end, not here
        ttsim.add(x, x)
        with pytest.raises(ttsim.TTFatal, match=OUTGROWN) as err:
            ttsim.end_trace_capture(dev, tid, cq_id=0)
        size, region = map(int, OUTGROWN.search(str(err.value)).groups())
        assert (size, region) == (2 * PER_COMMAND + PER_CORE, 4096)
        with pytest.raises(ttsim.TTFatal, match="no trace with id"):
            ttsim.execute_trace(dev, tid, cq_id=0)
    finally:
        ttsim.close_device(dev)


@pytest.mark.parametrize("spare", [0, -1], ids=["exact-fit", "one-byte-short"])
def test_a_region_of_exactly_the_trace_size_is_enough_and_one_byte_less_is_not(spare):
    one = 2 * PER_COMMAND + PER_CORE  # one captured add of a bf16 tile
    dev = ttsim.open_device(device_id=0, trace_region_size=one + spare)
    try:
        x = ttsim.to_device(_host(), dev)
        tid = ttsim.begin_trace_capture(dev, cq_id=0)
        ttsim.add(x, x)
        if spare < 0:
            with pytest.raises(ttsim.TTFatal, match=OUTGROWN):
                ttsim.end_trace_capture(dev, tid, cq_id=0)
        else:
            ttsim.end_trace_capture(dev, tid, cq_id=0)
            ttsim.execute_trace(dev, tid, cq_id=0, blocking=True)
    finally:
        ttsim.close_device(dev)


def test_the_region_holds_every_live_trace_at_once_and_its_boundary_is_exact():
    one = 2 * PER_COMMAND + PER_CORE  # one captured add of a bf16 tile
    dev = ttsim.open_device(device_id=0, trace_region_size=2 * one)
    try:
        first, _, _ = _capture(dev)
        second, _, _ = _capture(dev)  # exactly fills the region: allowed
        assert dev.trace_buffers_size == 2 * one
        ttsim.release_trace(dev, second)
        x = ttsim.to_device(_host(), dev)
        tid = ttsim.begin_trace_capture(dev, cq_id=0)
        ttsim.add(ttsim.add(x, x), x)  # one more command than fits beside the first trace
        with pytest.raises(ttsim.TTFatal, match=OUTGROWN):
            ttsim.end_trace_capture(dev, tid, cq_id=0)
        ttsim.release_trace(dev, first)
    finally:
        ttsim.close_device(dev)


@pytest.fixture
def small_dram(monkeypatch):
    """A device whose DRAM is 1 MiB, so tests can fill it with ordinary tensors."""
    monkeypatch.setattr(ttsim.device, "DRAM_SIZE", 1 << 20)
    dev = ttsim.open_device(device_id=0)  # trace_region_size=0: tt-metal's dynamic trace mode
    yield dev
    ttsim.close_device(dev)


def _fill(dev, nbytes: int):
    """A uint32 row-major tensor of exactly ``nbytes`` in DRAM."""
    return ttsim.allocate_tensor_on_device(ttsim.Shape([nbytes // 4]), ttsim.uint32, ttsim.ROW_MAJOR_LAYOUT, dev)


def test_without_a_region_the_trace_buffer_goes_to_the_top_of_dram_as_in_0_81_1(small_dram):
    """trace_region_size=0 (ttnn 0.81.1's default) is tt-metal's dynamic mode, not an error."""
    tid, x, y = _capture(small_dram, ops=2)
    (buf,) = small_dram._traces[tid].dram_buffers
    assert buf.address + buf.nbytes == 1 << 20
    ttsim.execute_trace(small_dram, tid, cq_id=0, blocking=True)
    assert torch.equal(ttsim.to_torch(y), ttsim.to_torch(x) * 3)
    ttsim.release_trace(small_dram, tid)
    assert small_dram.chips[0].dram.allocated_bytes == 2 * 2048 + 2048  # x and two outputs: the buffer is gone


HOLE = 8192  # the room the dynamic-mode scenarios leave in a full 1 MiB DRAM
B1 = 16384  # what the first trace's capture allocates in the live-trace scenario
T1_SIZE = 2 * PER_COMMAND + PER_CORE * (B1 // 2048)  # end + B1's allocation (8 tiles' worth)


def _freed_during_capture(dev) -> int:
    """DRAM full but a hole the capture itself frees: the trace buffer can only go there."""
    a = _fill(dev, HOLE)
    small = _fill(dev, 2048)
    _fill(dev, (1 << 20) - HOLE - 2048)
    tid = ttsim.begin_trace_capture(dev, cq_id=0)
    ttsim.deallocate(a)
    ttsim.copy_host_to_device_tensor(ttsim.from_torch(torch.zeros(512, dtype=torch.int32), dtype=ttsim.uint32), small)
    return tid


def _below_a_live_trace(dev) -> tuple[int, int]:
    """T1's capture allocates above a hole too small for it; T1's buffer takes the top; T2's can
    only go into the hole, below T1's high-water mark. Returns (t1, t2) with T2 still capturing."""
    a = _fill(dev, HOLE)
    _fill(dev, (1 << 20) - HOLE - B1 - T1_SIZE)
    ttsim.deallocate(a)
    t1 = ttsim.begin_trace_capture(dev, cq_id=0)
    _fill(dev, B1)
    ttsim.end_trace_capture(dev, t1, cq_id=0)
    return t1, ttsim.begin_trace_capture(dev, cq_id=0)


def test_dynamic_mode_refuses_a_trace_buffer_below_dram_freed_during_capture(small_dram):
    tid = _freed_during_capture(small_dram)
    with pytest.raises(ttsim.TTFatal, match=_pattern(DELETION_TEXT, HOLE - (2 * PER_COMMAND + PER_CORE), HOLE)):
        ttsim.end_trace_capture(small_dram, tid, cq_id=0)


def test_dynamic_mode_refuses_a_trace_buffer_below_another_live_traces_dram_activity(small_dram):
    t1, t2 = _below_a_live_trace(small_dram)
    with pytest.raises(ttsim.TTFatal, match=_pattern(LIVE_TRACE_TEXT, HOLE - PER_COMMAND, (1 << 20) - T1_SIZE)):
        ttsim.end_trace_capture(small_dram, t2, cq_id=0)
    ttsim.release_trace(small_dram, t1)
    t3 = ttsim.begin_trace_capture(small_dram, cq_id=0)
    ttsim.end_trace_capture(small_dram, t3, cq_id=0)  # with T1 released the same capture is fine


# ---------------------------------------------------------------------------- command queues

def _cq1_calls(dev):
    """Every kind of call that names a command queue, on cq 1."""
    x = ttsim.to_device(_host(), dev)
    host = _host()
    return {
        "to_device": lambda: ttsim.to_device(host, dev, queue_id=1),
        "from_device": lambda: ttsim.from_device(x, queue_id=1),
        "from_torch": lambda: ttsim.from_torch(torch.ones(32, 32), dtype=ttsim.bfloat16, device=dev, cq_id=1),
        "to_torch": lambda: ttsim.to_torch(x, cq_id=1),
        "Tensor.cpu": lambda: x.cpu(blocking=True, cq_id=1),
        "copy_host_to_device_tensor": lambda: ttsim.copy_host_to_device_tensor(host, x, cq_id=1),
        "copy_device_to_host_tensor": lambda: ttsim.copy_device_to_host_tensor(x, _host(), cq_id=1),
        "record_event": lambda: ttsim.record_event(dev, 1),
        "wait_for_event": lambda: ttsim.wait_for_event(1, ttsim.record_event(dev, 0)),
        "synchronize_device": lambda: ttsim.synchronize_device(dev, 1),
        "begin_trace_capture": lambda: ttsim.release_trace(dev, ttsim.begin_trace_capture(dev, cq_id=1))
        if dev.num_command_queues == 1 else _capture_on_cq1(dev),
        "execute_trace": lambda: ttsim.execute_trace(dev, _capture(dev)[0], cq_id=1, blocking=True),
        "an op in command_queue(1)": lambda: _op_on_cq1(x),
    }


def _op_on_cq1(x):
    with ttsim.command_queue(1):
        return ttsim.add(x, x)


def _capture_on_cq1(dev):
    tid = ttsim.begin_trace_capture(dev, cq_id=1)
    ttsim.end_trace_capture(dev, tid, cq_id=1)
    ttsim.release_trace(dev, tid)


CQ1_CALLS = ("to_device", "from_device", "from_torch", "to_torch", "Tensor.cpu", "copy_host_to_device_tensor",
             "copy_device_to_host_tensor", "record_event", "wait_for_event", "synchronize_device",
             "begin_trace_capture", "execute_trace", "an op in command_queue(1)")


@pytest.mark.parametrize("call", CQ1_CALLS)
def test_cq1_on_a_device_with_one_command_queue_is_refused(call):
    dev = ttsim.open_device(device_id=0, trace_region_size=1 << 20)
    try:
        with pytest.raises(ttsim.TTFatal, match=r"cq_id 1 is out of range \(.*num_command_queues=1"):
            _cq1_calls(dev)[call]()
    finally:
        ttsim.close_device(dev)


@pytest.mark.parametrize("call", CQ1_CALLS)
def test_cq1_on_a_device_opened_with_two_command_queues_works(call):
    dev = ttsim.open_device(device_id=0, trace_region_size=1 << 20, num_command_queues=2)
    try:
        _cq1_calls(dev)[call]()
        ttsim.synchronize_device(dev)
    finally:
        ttsim.close_device(dev)


def test_command_queue_routes_unqueued_calls_and_restores_the_default():
    dev = ttsim.open_device(device_id=0, num_command_queues=2)
    dev.lag = 1.1  # nothing runs until something waits: the queues show where commands went
    try:
        x = ttsim.to_device(_host(), dev)
        pos = ttsim.to_device(ttsim.from_torch(torch.zeros(8, dtype=torch.int32), dtype=ttsim.int32), dev)
        with ttsim.command_queue(1):
            ttsim.add(x, x)
            with ttsim.command_queue(0):
                ttsim.multiply(x, x)
            ttsim.plus_one(pos)  # an in-place op
            ttsim.record_event(dev)
        ttsim.subtract(x, x)
        assert [c.label for c in dev._queues[0]] == ["write", "write", "multiply", "subtract"]
        assert [c.label for c in dev._queues[1]] == ["add", "plus_one", "record_event"]
    finally:
        ttsim.close_device(dev)


# ---------------------------------------------------------------------------- the fabric

def _replicated(dev):
    return ttsim.from_torch(torch.ones(1, 1, 32, 64), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=dev,
                            mesh_mapper=ttsim.ReplicateTensorToMesh(dev))


COLLECTIVES = {
    "all_gather": lambda t: ttsim.all_gather(t, 3),
    "all_reduce": lambda t: ttsim.all_reduce(t),
    "reduce_scatter": lambda t: ttsim.reduce_scatter(t, 3),
}


@pytest.mark.parametrize("op", COLLECTIVES)
def test_a_collective_on_a_mesh_opened_without_fabric_is_refused(op):
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
    try:
        assert dev.fabric_config == F.DISABLED
        with pytest.raises(ttsim.TTFatal, match=rf"Trying to get un-initialized fabric context \({op} on .*"
                                                r"set_fabric_config\(ttnn\.FabricConfig\.FABRIC_1D\) before"):
            COLLECTIVES[op](_replicated(dev))
    finally:
        ttsim.close_mesh_device(dev)


@pytest.mark.parametrize("op", COLLECTIVES)
def test_a_collective_on_a_mesh_opened_with_fabric_1d_runs_until_the_fabric_is_torn_down(op):
    ttsim.set_fabric_config(F.FABRIC_1D)
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
    try:
        assert dev.fabric_config == F.FABRIC_1D
        t = _replicated(dev)
        out = COLLECTIVES[op](t)
        assert ttsim.to_torch(ttsim.get_device_tensors(out)[0]).numel() > 0
        ttsim.set_fabric_config(F.DISABLED)  # torn down under the open mesh: the fabric context is gone
        with pytest.raises(ttsim.TTFatal, match=rf"Trying to get un-initialized fabric context \({op} on"):
            COLLECTIVES[op](t)
    finally:
        ttsim.close_mesh_device(dev)


def test_fabric_set_after_the_mesh_opened_or_torn_down_under_it_does_not_count():
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
    try:
        with pytest.raises(ttsim.TTFatal, match=r"SetFabricConfig\(FABRIC_1D\) is not allowed while devices are "
                                                r"still open"):
            ttsim.set_fabric_config(F.FABRIC_1D)
        assert ttsim.get_fabric_config() == F.DISABLED
    finally:
        ttsim.close_mesh_device(dev)
    ttsim.set_fabric_config(F.FABRIC_1D)
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
    try:
        t = _replicated(dev)
        ttsim.all_reduce(t)
        ttsim.set_fabric_config(F.DISABLED)  # allowed while open; it tears the fabric down
        with pytest.raises(ttsim.TTFatal, match="un-initialized fabric context .*set to DISABLED while it was open"):
            ttsim.all_reduce(t)
    finally:
        ttsim.close_mesh_device(dev)


@pytest.mark.parametrize("opener", ["open_device", "open_mesh_device"])
def test_a_one_chip_device_cannot_open_with_a_fabric(opener):
    ttsim.set_fabric_config(F.FABRIC_1D)
    with pytest.raises(ttsim.TTFatal, match=r"Fabric config FABRIC_1D requires at least 2 participating chips, but "
                                            r"the opened mesh has 1 local device\(s\)"):
        if opener == "open_device":
            ttsim.open_device(device_id=0)
        else:
            ttsim.open_mesh_device(ttsim.MeshShape(1, 1))
    ttsim.set_fabric_config(F.DISABLED)
    ttsim.close_device(ttsim.open_device(device_id=0))


def test_set_fabric_config_accepts_and_refuses_what_real_ttnn_does(real):
    fab = real["fabric"]
    assert repr(ttsim.get_fabric_config()) == fab["default"]
    assert fab["sequences"], fab
    for seq, theirs in fab["sequences"].items():
        mine = []
        for name in seq.split(" -> "):
            try:
                ttsim.set_fabric_config(getattr(F, name))
                mine.append("ok")
            except ttsim.TTFatal as e:
                mine.append("RuntimeError: " + str(e).removeprefix("TT_FATAL: "))
        ttsim.set_fabric_config(F.DISABLED)
        mine.append(repr(ttsim.get_fabric_config()))
        assert mine == theirs, seq
    assert any(r.startswith("RuntimeError: Tried to override") for rs in fab["sequences"].values() for r in rs)


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["1x1", "1x2"])
def test_the_mesh_fixture_opens_multi_chip_meshes_with_fabric_1d_and_1x1_without(ttnn, mesh_device):
    want = F.FABRIC_1D if mesh_device.get_num_devices() > 1 else F.DISABLED
    assert mesh_device.fabric_config == want == ttnn.get_fabric_config()


# ---------------------------------------------------------------------------- open keywords

def _form_call(label: str):
    """Turn a dump label such as ``open_device(device_id=0, bogus=1)`` into a ttsim call."""
    return lambda: eval("ttsim." + label, {"ttsim": ttsim, "FabricConfig": F})  # noqa: S307 - the dump's labels


def test_open_device_accepts_and_rejects_the_keywords_real_ttnn_does(real):
    forms = real["device"]["open_device_call_forms"]
    assert "open_device(device_id=0, fabric_config=FabricConfig.FABRIC_1D)" in forms
    for label, theirs in forms.items():
        try:
            dev = _form_call(label)()
        except TypeError:
            mine = "rejected: TypeError"
        else:
            mine = "accepted"
            ttsim.close_device(dev)
        assert mine == theirs.split(" (")[0], f"{label}: real {theirs}, ttsim {mine}"


@pytest.mark.parametrize("kw", [{"fabric_config": F.FABRIC_1D}, {"bogus": 1}, {"device_id": 0}])
def test_open_mesh_device_rejects_keywords_it_does_not_have(kw):
    with pytest.raises(TypeError, match=f"unexpected keyword argument '{next(iter(kw))}'"):
        ttsim.open_mesh_device(ttsim.MeshShape(1, 2), **kw)
    assert not ttsim.api.open_devices()


# ---------------------------------------------------------------------------- tt-metal's words

def _message(fn) -> str:
    with pytest.raises(ttsim.TTFatal) as err:
        fn()
    return str(err.value)


def _outgrow():
    dev = ttsim.open_device(device_id=0, trace_region_size=64)
    try:
        _capture(dev)
    finally:
        ttsim.close_device(dev)


def _cq1():
    dev = ttsim.open_device(device_id=0)
    try:
        ttsim.record_event(dev, 1)
    finally:
        ttsim.close_device(dev)


def _ccl_without_fabric():
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
    try:
        ttsim.all_reduce(_replicated(dev))
    finally:
        ttsim.close_mesh_device(dev)


def _fabric_while_open():
    dev = ttsim.open_device(device_id=0)
    try:
        ttsim.set_fabric_config(F.FABRIC_1D)
    finally:
        ttsim.close_device(dev)


def _one_chip_with_fabric():
    ttsim.set_fabric_config(F.FABRIC_1D)
    ttsim.open_mesh_device(ttsim.MeshShape(1, 1))


def _override():
    ttsim.set_fabric_config(F.FABRIC_1D)
    ttsim.set_fabric_config(F.FABRIC_2D)


def _on_small_dram(fn):
    mp = pytest.MonkeyPatch()
    mp.setattr(ttsim.device, "DRAM_SIZE", 1 << 20)
    dev = ttsim.open_device(device_id=0)
    try:
        fn(dev)
    finally:
        ttsim.close_device(dev)
        mp.undo()


def _on_chip(fn):
    dev = ttsim.open_device(device_id=0)
    try:
        fn(dev)
    finally:
        ttsim.close_device(dev)


def _on_1x2(fn):
    mesh = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
    try:
        fn(mesh)
    finally:
        ttsim.close_mesh_device(mesh)


def _tiled(dev, shape=(1, 1, 32, 64), dtype=None, layout=None):
    return ttsim.from_torch(torch.zeros(shape), dtype=dtype or ttsim.bfloat16, layout=layout or ttsim.TILE_LAYOUT,
                            device=dev)


def _sharded_2d(mesh, mesh_shape, width):
    mapper = ttsim.ShardTensor2dMesh(mesh, mesh_shape, (3, None))
    ttsim.from_torch(torch.zeros(1, 1, 1, width), dtype=ttsim.float32, mesh_mapper=mapper, device=mesh)


def _shard_cfg(shard, cores):
    grid = ttsim.num_cores_to_corerangeset(cores, ttsim.CoreCoord(8, 8), True)
    return ttsim.MemoryConfig(ttsim.TensorMemoryLayout.HEIGHT_SHARDED, ttsim.BufferType.L1,
                              ttsim.ShardSpec(grid, list(shard), ttsim.ShardOrientation.ROW_MAJOR))


def _height_sharded(dev, shard, cores):
    return ttsim.from_torch(torch.zeros(1, 1, 256, 64), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=dev,
                            memory_config=_shard_cfg(shard, cores))


TRIGGERS = {
    "Creating trace buffers of size {}B on MeshDevice {}, but only {}B is allocated for trace region.": _outgrow,
    DELETION_TEXT: lambda: _on_small_dram(lambda d: ttsim.end_trace_capture(d, _freed_during_capture(d), cq_id=0)),
    LIVE_TRACE_TEXT: lambda: _on_small_dram(lambda d: ttsim.end_trace_capture(d, _below_a_live_trace(d)[1], cq_id=0)),
    "cq_id {} is out of range": _cq1,
    "Trying to get un-initialized fabric context": _ccl_without_fabric,
    "SetFabricConfig({}) is not allowed while devices are still open: it would reinitialize the control plane "
    "underneath running fabric kernels and dangle the ControlPlane& held by the fabric firmware initializer. "
    "Close the mesh device before changing the fabric config to a non-DISABLED value.": _fabric_while_open,
    "Fabric config {} requires at least 2 participating chips, but the opened mesh has {} local device(s) on a "
    "single host. Either open a larger mesh (e.g. a MeshShape with >= 2 devices) or call "
    "SetFabricConfig(FabricConfig::DISABLED) before opening a 1-chip mesh.": _one_chip_with_fabric,
    "Tried to override previous value of fabric config: {}, with: {}": _override,
    "Tensor rank is greater than 4": lambda: _on_chip(lambda d: ttsim.unsqueeze_to_4D(_tiled(d, (1, 1, 1, 2, 3)))),
    "K must be non-zero": lambda: _on_chip(lambda d: ttsim.topk(_tiled(d), 0)),
    "The input must be in tiled format": lambda: _on_chip(
        lambda d: ttsim.topk(_tiled(d, layout=ttsim.ROW_MAJOR_LAYOUT), 2)),
    "Input tensor must be BFLOAT16, BFLOAT8_B, or FLOAT32, got: {}": lambda: _on_chip(
        lambda d: ttsim.topk(_tiled(d, dtype=ttsim.uint32), 2)),
    "The size of the supplied mesh shape {} does not match the device shape size {}": lambda: _on_1x2(
        lambda m: ttsim.ShardTensor2dMesh(m, (2, 2), (2, 3))),
    "ND sharding requires the number of chunks {} to match the mesh dimension size {}": lambda: _on_1x2(
        lambda m: _sharded_2d(m, (2, 1), 1)),
    "Physical shard shape {} must be tile {} sized!": lambda: _on_chip(lambda d: _height_sharded(d, (16, 64), 8)),
    "Shard width {} must match physical width {} for height sharded": lambda: _on_chip(
        lambda d: _height_sharded(d, (32, 32), 8)),
    "Number of shards along height {} must not exceed number of cores {}": lambda: _on_chip(
        lambda d: _height_sharded(d, (32, 64), 4)),
    "Input tensor must be Interleaved": lambda: _on_chip(
        lambda d: ttsim.interleaved_to_sharded(_height_sharded(d, (32, 64), 8), _shard_cfg((32, 64), 8))),
    "Output memory config must be sharded": lambda: _on_chip(
        lambda d: ttsim.interleaved_to_sharded(_tiled(d), ttsim.L1_MEMORY_CONFIG)),
    "Input tensor must be sharded": lambda: _on_chip(lambda d: ttsim.sharded_to_interleaved(_tiled(d))),
    "Output memory config must be Interleaved": lambda: _on_chip(
        lambda d: ttsim.sharded_to_interleaved(_height_sharded(d, (32, 64), 8), _shard_cfg((32, 64), 8))),
    "Tensor layout must be ROW_MAJOR for unpadding": lambda: ttsim.from_torch(
        torch.zeros(2, 32), dtype=ttsim.bfloat8_b, layout=ttsim.TILE_LAYOUT).to(ttsim.ROW_MAJOR_LAYOUT),
    "Target number of cores {} is greater than total number of available cores {}": lambda: (
        ttsim.num_cores_to_corerangeset(65, ttsim.CoreCoord(8, 8), True)),
    # the qwen36 vocabulary (each refusal is also tested where its op is)
    "Number of chunks must be greater than zero": lambda: _on_chip(lambda d: ttsim.chunk(_tiled(d), 0, 3)),
    "Ranks of input tensor, output_tensor, slice start and slice end should be equal. Got {} {} {} {}": lambda: (
        _on_chip(lambda d: _slice_write(d, [0, 0, 0], [1, 1, 32], [1, 1, 1]))),
    "Start is outside the bounds of the output tensor for index {}. Got {}. Size {}": lambda: _on_chip(
        lambda d: _slice_write(d, [0, 0, 64, 0], [1, 1, 64, 64], [1, 1, 1, 1])),
    "Ends {} must be less than or equal to the shape of the tensor {}": lambda: _on_chip(
        lambda d: _slice_write(d, [0, 0, 32, 0], [1, 1, 96, 64], [1, 1, 1, 1])),
    "Step is not supported for sharded slice_write operation": lambda: _on_chip(
        lambda d: _slice_write(d, [0, 0, 0, 0], [1, 1, 64, 64], [1, 1, 2, 1], sharded=True)),
    "slice_write expects output start for the last dimension to be 0. Got {}": lambda: _on_chip(
        lambda d: _slice_write(d, [0, 0, 0, 32], [1, 1, 32, 64], [1, 1, 1, 1], width=32)),
    "slice_write input & output must have the same dtype": lambda: _on_chip(
        lambda d: _slice_write(d, [0, 0, 0, 0], [1, 1, 32, 64], [1, 1, 1, 1], dtype=ttsim.float32)),
    "Only tilized inputs supported.": lambda: _on_chip(
        lambda d: ttsim.rms_norm_pre_all_gather(_tiled(d, layout=ttsim.ROW_MAJOR_LAYOUT))),
    "Only interleaved inputs supported.": lambda: _on_chip(lambda d: ttsim.rms_norm_pre_all_gather(
        ttsim.to_memory_config(_tiled(d), ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG))),
    "Input data format not supported.": lambda: _on_chip(
        lambda d: ttsim.rms_norm_pre_all_gather(_tiled(d, dtype=ttsim.int32))),
    "Residual tensor must have TILE layout, got: {}": lambda: _on_chip(lambda d: ttsim.rms_norm_pre_all_gather(
        _tiled(d), residual_input_tensor=_tiled(d, layout=ttsim.ROW_MAJOR_LAYOUT))),
    "Stats tensor must have TILE layout, got: {}": lambda: _on_chip(lambda d: ttsim.rms_norm_post_all_gather(
        _tiled(d), _tiled(d, (1, 1, 32, 32), layout=ttsim.ROW_MAJOR_LAYOUT))),
    "Expected {} semaphores but got {}": lambda: _on_chip(lambda d: ttsim.experimental.reduce_scatter_minimal_async(
        _tiled(d), dim=3, multi_device_global_semaphore=_semaphores(d, 2))),
    "Both addcmul_input_tensor1 and addcmul_input_tensor2 must be provided together.": lambda: _on_chip(
        lambda d: ttsim.experimental.all_gather_minimal_matmul_async(
            _tiled(d), _tiled(d, (1, 1, 64, 32)), multi_device_global_semaphore=_semaphores(d, 2),
            barrier_semaphore=_semaphores(d, 1)[0], addcmul_input_tensor1=_tiled(d))),
    "chunk_sizes must sum to the output width N={}, got {}": lambda: _on_chip(
        lambda d: ttsim.experimental.all_gather_minimal_matmul_async(
            _tiled(d), _tiled(d, (1, 1, 64, 32)), multi_device_global_semaphore=_semaphores(d, 2),
            barrier_semaphore=_semaphores(d, 1)[0], chunk_sizes=[16])),
    "fast_reduce_nc dims should not be empty": lambda: _on_chip(lambda d: ttsim.experimental.fast_reduce_nc(_tiled(d))),
    "FastReduceNC reduces only outer dims: dim must be between 0 and {}, but has {}": lambda: _on_chip(
        lambda d: ttsim.experimental.fast_reduce_nc(_tiled(d), dims=[3])),
    "dims must be unique": lambda: _on_chip(lambda d: ttsim.experimental.fast_reduce_nc(_tiled(d), dims=[0, 0])),
    "flat q width {} != H*K ({}*{}); flat q/k path assumes K==V": lambda: _on_chip(lambda d: _flat_gdn(d, qw=48)),
    "HV ({}) must be divisible by H ({})": lambda: _on_chip(lambda d: _flat_gdn(d, qw=96)),
    "OPT-A flat v requires T ({}) to be a multiple of chunk_size ({})": lambda: _on_chip(lambda d: _flat_gdn(d, t=48)),
    "OPT-A flat q/k requires T ({}) to be a multiple of chunk_size ({})": lambda: _on_chip(
        lambda d: _flat_gdn(d, t=48, flat_v=False)),
    "OPT-A flat q/k needs the in-kernel norm (chunk_size == 32)": lambda: _on_chip(lambda d: _flat_gdn(d, chunk=64)),
    "chunk_start_idx tensor must be int32. Got {}": lambda: _on_chip(_uint_chunk_start),
    "cache_tensor1 and cache_tensor2 must have identical shapes": lambda: _on_chip(lambda d: _fused_update(d, cache2=(2, 1, 32, 64))),
    "input_tensor1 and input_tensor2 must have identical shapes": lambda: _on_chip(lambda d: _fused_update(d, x2=(1, 1, 1, 64))),
    "input_tensor1 ({}) and input_tensor2 ({}) must not overlap": lambda: _on_chip(lambda d: _fused_update(d, grids=((0, 1), (1, 2)))),
    "input_tensor1 ({}) and input_tensor2 ({}) must have same number of cores": lambda: _on_chip(
        lambda d: _fused_update(d, grids=((0, 1), (2, 4)))),
    "Tile size is not valid for our hardware": lambda: ttsim.Tile([64, 32]),
    "Tile height must equal 16 or 32 in transpose mode": lambda: ttsim.Tile([8, 32], transpose_tile=True),
    "Last 2 dims of input shape must be multiples of 32": lambda: ttsim.from_torch(
        torch.zeros(2, 40, 20), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, tile=ttsim.Tile([16, 32])).to(
        ttsim.ROW_MAJOR_LAYOUT),
    "chunk_gated_delta_rule: use_qk_l2norm not yet supported; pre-normalize q/k on host": lambda: _on_chip(
        lambda d: ttsim.transformer.chunk_gated_delta_rule(*_gdn_heads(d), use_qk_l2norm=True)),
    "fused_recurrent_gated_delta_rule: use_qk_l2norm not done here; L2-normalize q/k on host": lambda: _on_chip(
        lambda d: ttsim.transformer.fused_recurrent_gated_delta_rule(*_gdn_heads(d, t=1), use_qk_l2norm=True)),
    "cache_position_modulo ({}) must be a positive multiple of effective block_size ({}); otherwise a wrapped "
    "position would split across blocks and the kernel can't address it.": lambda: _on_chip(
        lambda d: _modulo_update(d, 48)),
    "cache_position_modulo/block_size ({}) must be <= max_num_blocks ({})": lambda: _on_chip(
        lambda d: _modulo_update(d, 5 * 32)),
}


def _gdn_heads(dev, t=32):
    """q, k [1, t, 2, 32], v [1, t, 2, 32], g, beta [1, t, 2]: the head-split gated-delta-rule inputs."""
    x, gb = _tiled(dev, (1, t, 2, 32), dtype=ttsim.float32), _tiled(dev, (1, t, 2), dtype=ttsim.float32)
    return x, x, x, gb, gb


def _modulo_update(dev, modulo):
    table = ttsim.from_torch(torch.zeros(1, 2, dtype=torch.int32), device=dev)
    pos = ttsim.from_torch(torch.zeros(1, dtype=torch.int32), device=dev)
    ttsim.experimental.paged_update_cache(_tiled(dev, (4, 1, 32, 64)), _tiled(dev, (1, 1, 32, 64)), page_table=table,
                                          update_idxs_tensor=pos, cache_position_modulo=modulo)


def _slice_write(dev, start, end, step, sharded=False, width=64, dtype=ttsim.bfloat16):
    out = ttsim.from_torch(torch.zeros(1, 1, 64, 64), dtype=ttsim.bfloat16, device=dev)
    src = _tiled(dev, (1, 1, 32, width), dtype=dtype)
    if sharded:
        src = ttsim.to_memory_config(src, ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    ttsim.experimental.slice_write(src, out, start, end, step)


def _semaphores(dev, n):
    cores = ttsim.CoreRangeSet({ttsim.CoreRange(ttsim.CoreCoord(0, 0), ttsim.CoreCoord(1, 1))})
    return [ttsim.create_global_semaphore(dev, cores, 0) for _ in range(n)]


def _flat_gdn(dev, t=64, qw=64, flat_v=True, chunk=32):
    q = _tiled(dev, (1, t, qw), dtype=ttsim.float32)
    v = _tiled(dev, (1, t, 128) if flat_v else (1, t, 4, 32), dtype=ttsim.float32)
    gb = _tiled(dev, (1, t, 4), dtype=ttsim.float32)
    ttsim.transformer.chunk_gated_delta_rule(q, q, v, gb, gb, chunk_size=chunk)


def _uint_chunk_start(dev):
    q = _tiled(dev, (1, 1, 64, 64))
    cache = _tiled(dev, (4, 1, 32, 64))
    table = ttsim.from_torch(torch.zeros(1, 4, dtype=torch.int32), device=dev)
    start = ttsim.from_torch(torch.zeros(1, dtype=torch.int32), dtype=ttsim.uint32, device=dev)
    ttsim.transformer.chunked_scaled_dot_product_attention(q, cache, cache, table, chunk_start_idx_tensor=start)


def _fused_update(dev, cache2=(4, 1, 32, 64), x2=(1, 2, 1, 64), grids=None):
    table = ttsim.from_torch(torch.zeros(2, 2, dtype=torch.int32), device=dev)
    x1, xb = _tiled(dev, (1, 2, 1, 64)), _tiled(dev, x2)
    if grids is not None:
        (a0, a1), (b0, b1) = grids

        def cfg(x0, x1_):
            grid = ttsim.CoreRangeSet({ttsim.CoreRange(ttsim.CoreCoord(x0, 0), ttsim.CoreCoord(x1_, 0))})
            return ttsim.create_sharded_memory_config(shape=(32, 64), core_grid=grid,
                                                      strategy=ttsim.ShardStrategy.HEIGHT,
                                                      use_height_and_width_as_shard_shape=True)

        x1, xb = ttsim.to_memory_config(x1, cfg(a0, a1)), ttsim.to_memory_config(xb, cfg(b0, b1))
    ttsim.experimental.paged_fused_update_cache(_tiled(dev, (4, 1, 32, 64)), x1, _tiled(dev, cache2), xb,
                                                update_idxs=[0, 0], page_table=table)


def test_every_refusal_speaks_a_tt_fatal_text_found_in_the_real_0_81_1_libraries(real):
    texts = real["tt_fatal_texts"]
    assert set(texts) == set(TRIGGERS), "dump_ttnn.py's TT_FATAL_TEXTS and this table must list the same texts"
    missing = [t for t, found in texts.items() if not found]
    assert not missing, f"not in libtt_metal.so / _ttnncpp.so of ttnn 0.81.1: {missing}"
    for template, trigger in TRIGGERS.items():
        msg = _message(trigger)
        assert re.search(_pattern(template), msg), f"ttsim said {msg!r}; tt-metal says {template!r}"
        ttsim.set_fabric_config(F.DISABLED)
