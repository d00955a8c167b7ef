"""ttsim's small-input paths change no byte, no error and no timing a program can see.

Each fast path is run against the path it replaces (forced by a monkeypatch, or written out
here as it was) on its boundary cases:

- one-queue ``run_until`` (runs the queue's head in place instead of through ``_step``):
  the same commands run, the same hang is raised, a failing command is consumed the same;
- trace corruption (``_corrupt_overlaps``): a source's image is made once, and a victim the
  source covers whole is decoded from the source's bytes without its own image;
- ``numerics.decode(owned=True)`` keeps the caller's array, ``owned=False`` never shares it;
- the embedding's vocabulary check on up to ``SMALL_IDS`` ids as Python ints;
- the float -> int32 range check on up to ``SMALL_RANGE_CHECK`` values as Python floats;
- ``to_torch`` skips a ``to`` that would return its input.
"""

import math
import warnings

import numpy as np
import pytest
import torch

import ttsim
from ttsim import device as ttsim_device
from ttsim import numerics
from ttsim.ops import embedding as embedding_mod
from ttsim.memory import DRAM_SIZE
from ttsim.seed import junk_bytes
from ttsim.types import DataType, Layout

RM, TILE = ttsim.ROW_MAJOR_LAYOUT, ttsim.TILE_LAYOUT


def _open(num_command_queues=1, **kw):
    return ttsim.open_mesh_device(ttsim.MeshShape(1, 1), num_command_queues=num_command_queues, **kw)


def _generic_run_until(self, condition):
    """MeshDevice.run_until as it was: one ``_step`` per command, whatever the queues."""
    while not condition():
        self._step()


@pytest.fixture(params=[False, True])
def generic(request, monkeypatch):
    """The test runs on the one-queue ``run_until`` and (True) on ``run_until`` as it was."""
    if request.param:
        monkeypatch.setattr(ttsim_device.MeshDevice, "run_until", _generic_run_until)


def _on_new_device(program, *args, **open_kw):
    """``program(dev, *args)`` on a newly opened device, closed afterwards."""
    dev = _open(**open_kw)
    try:
        return program(dev, *args)
    finally:
        ttsim.close_mesh_device(dev)


def _lagging(**open_kw):
    """A device that runs nothing until the host waits."""
    with ttsim.device_knobs(readback_lag=1.0):
        return _open(**open_kw)


# -- run_until ----------------------------------------------------------------------------

def _queue_program(dev) -> tuple:
    """Blocking and non-blocking reads, events and in-place ops; what the host saw after each."""
    seen = []
    t = ttsim.from_torch(torch.arange(8, dtype=torch.int32).reshape(1, 8), dtype=ttsim.int32, layout=RM, device=dev)
    host = ttsim.from_torch(torch.zeros(1, 8, dtype=torch.int32), dtype=ttsim.int32, layout=RM)
    for i in range(120):
        ttsim.plus_one(t)
        if i % 3 == 0:
            ev = ttsim.record_event(dev, 0)
            seen.append(len(dev._queues[0]))
            ttsim.event_synchronize(ev)
            seen.append((ev.done, len(dev._queues[0])))
        if i % 5 == 0:
            ttsim.copy_device_to_host_tensor(t, host, blocking=False)
            seen.append(host._pending is None)
        if i % 7 == 0:
            seen.append(ttsim.to_torch(t).tolist())  # a blocking read: runs up to its own command
            seen.append(len(dev._queues[0]))
    ttsim.synchronize_device(dev)
    return tuple(seen), ttsim.to_torch(t).tolist(), dict(dev.stats), ttsim_device.digest_state([dev])


def test_one_queue_run_until_runs_what_one_step_per_command_runs(monkeypatch):
    got_fast = _on_new_device(_queue_program)
    monkeypatch.setattr(ttsim_device.MeshDevice, "run_until", _generic_run_until)
    got_slow = _on_new_device(_queue_program)
    assert got_fast == got_slow
    assert any(n for n in got_fast[0] if isinstance(n, int) and not isinstance(n, bool)), (
        "the program must leave commands queued at some reads, or it tests nothing")


def _hang_message(dev) -> str:
    tid = ttsim.begin_trace_capture(dev, cq_id=0)
    ev = ttsim.record_event(dev, 0)  # captured, never queued: nothing will ever record it
    ttsim.end_trace_capture(dev, tid, cq_id=0)
    with pytest.raises(ttsim.TTFatal, match="device hang") as err:
        ttsim.event_synchronize(ev)
    return str(err.value)


@pytest.mark.usefixtures("generic")
def test_waiting_on_what_no_queue_will_run_is_the_same_hang():
    dev = _open(trace_region_size=1 << 20)
    try:
        assert _hang_message(dev) == "TT_FATAL: device hang:  that no queue will record"
        assert not dev._queues[0]
    finally:
        dev.closed = True


@pytest.mark.usefixtures("generic")
def test_a_head_waiting_on_an_event_no_queue_will_record_hangs_unrun():
    dev = _lagging(trace_region_size=1 << 20)
    tid = ttsim.begin_trace_capture(dev, cq_id=0)
    ev = ttsim.record_event(dev, 0)  # captured: never recorded
    ttsim.end_trace_capture(dev, tid, cq_id=0)
    ran = []
    before = dev.enqueue(0, "before", lambda: ran.append("before"))
    ttsim.wait_for_event(0, ev)
    after = dev.enqueue(0, "after", lambda: ran.append("after"))
    with pytest.raises(ttsim.TTFatal, match=r"device hang: cq 0 waits for MeshEvent\(cq=0, pending\)"):
        dev.wait_command(after)
    assert ran == ["before"] and before.done and not after.done
    assert [c.label for c in dev._queues[0]] == [f"wait_for_event {ev.id}", "after"]
    dev.closed = True


@pytest.mark.usefixtures("generic")
def test_a_command_that_raises_is_consumed_and_not_done():
    dev = _lagging()

    def boom():
        raise RuntimeError("kernel failed")

    ran = []
    first = dev.enqueue(0, "ok", lambda: ran.append(1))
    bad = dev.enqueue(0, "boom", boom)
    after = dev.enqueue(0, "after", lambda: ran.append(2))
    with pytest.raises(RuntimeError, match="kernel failed"):
        dev.wait_command(after)
    assert (first.done, bad.done, after.done, ran) == (True, False, False, [1])
    assert list(dev._queues[0]) == [after]
    dev.wait_command(after)
    assert after.done and ran == [1, 2]
    dev.closed = True


def test_two_queues_keep_the_seeded_interleaving(monkeypatch):
    calls = []
    real_step = ttsim_device.MeshDevice._step

    def counting_step(self):
        calls.append(1)
        return real_step(self)

    monkeypatch.setattr(ttsim_device.MeshDevice, "_step", counting_step)
    dev = _lagging(num_command_queues=2)
    try:
        for _ in range(5):
            dev.enqueue(0, "a", None)
            dev.enqueue(1, "b", None)
        ev = ttsim.record_event(dev, 1)
        ttsim.event_synchronize(ev)
        assert calls, "with two queues every command still runs through the seeded _step"
    finally:
        ttsim.close_mesh_device(dev)


# -- trace corruption ---------------------------------------------------------------------

def _reference_corrupt_overlaps(self, trace):
    """MeshDevice._corrupt_overlaps as it was: both images made for every overlap."""
    stale = [src for src in trace.buffers if src.freed and src.data is not None]
    for src in stale:
        lo, hi = src.address, src.address + src.nbytes
        for dst in [d for d in src.chip.live.values() if d.data is not None]:
            if dst.buffer_type != src.buffer_type or dst.address >= hi or dst.address + dst.nbytes <= lo:
                continue
            img = numerics.encode(dst.data, dst.dtype, dst.layout)
            s_img = numerics.encode(src.data, src.dtype, src.layout)
            a, b = max(lo, dst.address), min(hi, dst.address + dst.nbytes)
            img[a - dst.address : b - dst.address] = s_img[a - lo : b - lo]
            dst.data = numerics.decode(img, dst.dtype, dst.layout, dst.padded)
            self.stats["trace_corruptions"] += 1


def _corruption_program(dev, victims) -> tuple:
    """A trace whose two freed intermediates (bf16 TILE [1, 32, 64], 4 KB each, side by side)
    are overwritten by the victims placed over them after the capture; every victim's bytes
    after two replays."""
    values = torch.arange(32 * 64, dtype=torch.float32).reshape(1, 32, 64) / 7 - 150
    values[0, 0, :4] = torch.tensor([float("nan"), float("inf"), -0.0, float("-inf")])
    inp = ttsim.from_torch(values, dtype=ttsim.bfloat16, layout=TILE, device=dev)
    tid = ttsim.begin_trace_capture(dev, cq_id=0)
    t1 = ttsim.multiply(inp, 2.0)
    t2 = ttsim.add(t1, 1.0)
    out = ttsim.multiply(t2, 0.5)
    hole = (t1.buffer_address(), t2.buffer_address() + 4096)
    assert t2.buffer_address() == hole[0] + 4096
    ttsim.deallocate(t1)
    ttsim.deallocate(t2)
    ttsim.end_trace_capture(dev, tid, cq_id=0)
    placed = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ttsim.TraceAllocationWarning)
        for shape, dtype, layout in victims:
            fill = torch.full(shape, -5, dtype=torch.int32) if dtype in (ttsim.int32, ttsim.uint32) else \
                torch.full(shape, 0.5)
            placed.append(ttsim.from_torch(fill, dtype=dtype, layout=layout, device=dev))
    for v in placed:  # every victim lies over the intermediates
        assert hole[0] <= v.buffer_address() and v.buffer_address() + v._buffers[0].nbytes <= hole[1]
    for _ in range(2):
        ttsim.execute_trace(dev, tid, cq_id=0)
    got = [numerics.encode(ttsim.from_device(v)._host[0], v._dtype, v._layout).tobytes() for v in placed]
    addresses = [v.buffer_address() for v in placed]
    result = (got, addresses, ttsim.to_torch(out).view(torch.int16).tolist(), dict(dev.stats),
              ttsim_device.digest_state([dev]))
    ttsim.release_trace(dev, tid)
    return result


VICTIMS = {
    # each intermediate covers one victim whole (another dtype, shape and layout)
    "covered whole, TILE int32 and ROW_MAJOR bf16": [((1, 32, 32), ttsim.int32, TILE), ((32, 64), ttsim.bfloat16, RM)],
    # one victim over both: each intermediate covers a part of it (the second writes over the first's result)
    "one victim over both": [((1, 2048), ttsim.float32, RM)],
    # pieces: the first covered whole by the first intermediate, the rest inside the second
    "pieces": [((1, 1024), ttsim.float32, RM), ((1, 32), ttsim.uint32, RM), ((1, 32, 32), ttsim.bfloat16, TILE),
               ((1, 480), ttsim.int32, RM)],
    # straddling: the first intermediate whole and half the second; then one inside the second
    "straddling": [((1, 1536), ttsim.float32, RM), ((1, 32, 32), ttsim.bfloat16, TILE)],
}


@pytest.mark.parametrize("case", sorted(VICTIMS))
def test_trace_corruption_writes_what_both_images_wrote(monkeypatch, case):
    got = _on_new_device(_corruption_program, VICTIMS[case], trace_region_size=1 << 20)
    monkeypatch.setattr(ttsim_device.MeshDevice, "_corrupt_overlaps", _reference_corrupt_overlaps)
    want = _on_new_device(_corruption_program, VICTIMS[case], trace_region_size=1 << 20)
    assert got == want
    assert got[3]["trace_corruptions"] >= 2 * len(VICTIMS[case]), "every victim must be hit on both replays"


def test_a_victim_covered_whole_holds_the_sources_bytes_and_owns_them():
    """Independent of the reference: the covered victim's image IS the intermediate's, and
    it is a copy (the next replay writes the intermediate anew, the victim keeps its bytes
    until then; writing the victim does not write the intermediate)."""
    dev = _open(trace_region_size=1 << 20)
    try:
        values = torch.arange(64, dtype=torch.float32).reshape(1, 64) - 20.5
        inp = ttsim.from_torch(values, dtype=ttsim.float32, layout=RM, device=dev)
        tid = ttsim.begin_trace_capture(dev, cq_id=0)
        tmp = ttsim.multiply(inp, 2.0)
        out = ttsim.add(tmp, 1.0)
        src_buf = tmp._buffers[0]
        ttsim.deallocate(tmp)
        ttsim.end_trace_capture(dev, tid, cq_id=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ttsim.TraceAllocationWarning)
            victim = ttsim.from_torch(torch.zeros(1, 64, dtype=torch.int32), dtype=ttsim.int32, layout=RM, device=dev)
        assert victim.buffer_address() == src_buf.address and victim._buffers[0].nbytes == src_buf.nbytes
        ttsim.execute_trace(dev, tid, cq_id=0)
        want = (2 * values).reshape(-1).view(torch.int32).tolist()
        assert ttsim.to_torch(victim).reshape(-1).tolist() == want
        vdata = victim._buffers[0].data
        assert vdata.untyped_storage().data_ptr() != src_buf.data.untyped_storage().data_ptr()
        ttsim.plus_one(victim)
        assert ttsim.to_torch(victim).reshape(-1).tolist() == [v + 1 for v in want]
        assert src_buf.data.reshape(-1).tolist() == (2 * values).reshape(-1).tolist()
        assert ttsim.to_torch(out).reshape(-1).tolist() == (2 * values + 1).reshape(-1).tolist()
        ttsim.release_trace(dev, tid)
    finally:
        ttsim.close_mesh_device(dev)


# -- decode(owned=...) ------------------------------------------------------------------------

SPECS = [(DataType.BFLOAT16, Layout.ROW_MAJOR, (3, 5)), (DataType.BFLOAT16, Layout.TILE, (32, 64)),
         (DataType.INT32, Layout.ROW_MAJOR, (7,)), (DataType.UINT32, Layout.TILE, (1, 32, 32)),
         (DataType.FLOAT32, Layout.TILE, (32, 32)), (DataType.UINT16, Layout.ROW_MAJOR, (1, 33))]


@pytest.mark.parametrize("dtype,layout,padded", SPECS)
def test_decode_owned_is_bitwise_the_copying_decode_and_only_it_keeps_the_array(dtype, layout, padded):
    nbytes = numerics.nbytes(dtype, layout, padded)
    raw = np.random.default_rng(5).integers(0, 256, nbytes, dtype=np.uint8)
    raw[:4] = [0xC0, 0xFF, 0x81, 0x7F]  # a negative NaN and a signalling NaN in bf16
    copied = numerics.decode(raw, dtype, layout, padded)
    owned = numerics.decode(raw.copy(), dtype, layout, padded, owned=True)
    assert copied.dtype == owned.dtype and copied.shape == owned.shape == padded
    assert numerics.encode(copied, dtype, layout).tobytes() == numerics.encode(owned, dtype, layout).tobytes() \
        == raw.tobytes()
    raw[:] = 0  # the copying decode shares nothing with its input
    assert numerics.encode(copied, dtype, layout).tobytes() != raw.tobytes()


def test_an_uninitialized_buffer_reads_its_residue_and_junk_and_owns_them():
    dev = _open()
    try:
        first = ttsim.from_torch(torch.arange(40, dtype=torch.int32).reshape(1, 40), dtype=ttsim.int32, layout=RM,
                                 device=dev)
        addr = first.buffer_address()
        ttsim.deallocate(first)
        # 64 ints over the 40 left (160 bytes of residue, then junk)
        again = ttsim.allocate_tensor_on_device(ttsim.Shape([1, 64]), ttsim.int32, RM, dev)
        assert again.buffer_address() == addr
        got = ttsim.to_torch(again).reshape(-1).tolist()
        assert got[:40] == list(range(40))
        chip = dev.chips[0]
        junk = chip.dram.read_bytes(addr + 160, 96)
        assert got[40:] == np.frombuffer(junk.tobytes(), dtype=np.int32).tolist()
        ttsim.plus_one(again)  # an in-place write of the decoded data: nobody else's bytes
        assert ttsim.to_torch(again).reshape(-1).tolist()[:40] == list(range(1, 41))
        assert chip.dram.read_bytes(addr + 160, 96).tobytes() == junk.tobytes()
    finally:
        ttsim.close_mesh_device(dev)


# -- the embedding's vocabulary check ----------------------------------------------------------

def _embed(dev, ids: list[int], layout, vocab=40, hidden=33):
    table = (torch.arange(vocab * hidden, dtype=torch.float32).reshape(vocab, hidden) - 600) / 3
    table[1, :3] = torch.tensor([float("nan"), -0.0, float("inf")])
    w = ttsim.from_torch(table, dtype=ttsim.bfloat16, layout=RM, device=dev)
    i = ttsim.from_torch(torch.tensor([ids], dtype=torch.int64).to(torch.int32), dtype=ttsim.uint32, layout=RM,
                         device=dev)
    out = ttsim.embedding(i, w, layout=layout)
    got = ttsim.to_torch(out).view(torch.int16)
    data = out._buffers[0].data
    return got.tolist(), numerics.encode(data, out._dtype, out._layout).tobytes(), table, (w, i)


def _embed_fresh(ids: list[int], layout):
    """:func:`_embed` on a device of its own (an id past the table reads the memory after it, so
    two calls compare only from the same memory), or the failure's text."""
    dev = _open()
    try:
        return _embed(dev, ids, layout)[:2]
    except ttsim.TTFatal as e:
        return str(e)
    finally:
        ttsim.close_mesh_device(dev)


IDS = {
    "in range, both ends": [0, 39, 1, 38],
    "one past the vocabulary": [0, 40, 3],
    "uint32 at 2**31 (a negative int32 pattern)": [5, -(2**31), 2],
    "uint32 max": [-1, 7],
    "one id": [1],
    "256 ids (the small bound)": [i % 41 for i in range(256)],
    "257 ids": [i % 40 for i in range(257)],
}


@pytest.mark.parametrize("layout", [RM, TILE], ids=["rm", "tile"])
@pytest.mark.parametrize("case", sorted(IDS))
def test_embedding_small_check_is_the_aminmax_check(monkeypatch, case, layout):
    fast = _embed_fresh(IDS[case], layout)
    monkeypatch.setattr(embedding_mod, "SMALL_IDS", -1)  # every check through aminmax
    slow = _embed_fresh(IDS[case], layout)
    assert fast == slow


@pytest.mark.parametrize("case", sorted(IDS))
def test_embedding_rows_by_hand(case):
    """Independent of the other path: an id in [0, vocab) gives its table row (bf16, NaN
    canonical); any other id (unsigned) reads as a card's reader does the 66 bytes at row ``id`` of
    the table's buffer, the address wrapped into the chip's 32 GB (a bank address is a uint32).
    Id 40, one past: the table buffer's 48 bytes of alignment padding (never-written junk), then the
    ids buffer allocated after it (and its own padding); ids at 2**31 and up: junk gigabytes away."""
    dev = _open()
    try:
        got, _, table, (w, ids) = _embed(dev, IDS[case], RM)
        base, chip = w.buffer_address(), dev.chips[0]
        assert ids.buffer_address() == base + 2688  # 2640 B of table, aligned to 64
        id_bytes = torch.tensor([IDS[case]], dtype=torch.int32).numpy().tobytes()[:18]
        one_past = (bytes(junk_bytes(chip.dram.junk_key, base + 2640, 48)) + id_bytes
                    + bytes(junk_bytes(chip.dram.junk_key, base + 2688 + len(id_bytes), 18 - len(id_bytes))))
        far = {}
        for i in IDS[case]:
            if i < 0:  # a uint32 id >= 2**31
                address = (base + (i & 0xFFFFFFFF) * 66) % DRAM_SIZE
                assert all(b.address >= address + 66 or b.address + b.nbytes <= address for b in chip.live.values())
                far[i] = bytes(junk_bytes(chip.dram.junk_key, address, 66))
    finally:
        ttsim.close_mesh_device(dev)
    want = []
    for i in IDS[case]:
        if 0 <= i < 40:
            row = table[i]
        else:
            assert i == 40 or i in far
            row = torch.frombuffer(bytearray(one_past if i == 40 else far[i]), dtype=torch.bfloat16).float()
        want.append(numerics.to_bfloat16(row).view(torch.int16).tolist())
    assert got == [want]


# -- the float -> int32 range check --------------------------------------------------------------

F32_CASES = {
    "nan": [1.0, float("nan")],
    "inf": [float("inf")],
    "-inf": [3.0, float("-inf")],
    "2**31 (wraps)": [2.0**31],
    "largest float32 below 2**31": [2.0**31 - 128],
    "-(2**31) exactly": [-(2.0**31)],
    "just below -(2**31)": [-(2.0**31) - 256],
    "-0.0 and halves": [-0.0, 1.5, -1.5, 0.5, -0.5],
    "64 values": [float(i) - 31.5 for i in range(64)],
    "64 values, the last wraps": [float(i) for i in range(63)] + [2.0**32 + 512],
    "65 values, the last wraps": [float(i) for i in range(64)] + [2.0**32 + 512],
}


def _quantize_bits(values, torch_dtype):
    x = torch.tensor(values, dtype=torch.float32).to(torch_dtype)
    return numerics.quantize(x, DataType.INT32).tolist(), numerics.quantize(x, DataType.UINT32).dtype


@pytest.mark.parametrize("torch_dtype", [torch.float32, torch.bfloat16, torch.float64])
@pytest.mark.parametrize("case", sorted(F32_CASES))
def test_small_range_check_is_the_aminmax_check(monkeypatch, case, torch_dtype):
    fast = _quantize_bits(F32_CASES[case], torch_dtype)
    monkeypatch.setattr(numerics, "SMALL_RANGE_CHECK", 0)  # every check through aminmax
    slow = _quantize_bits(F32_CASES[case], torch_dtype)
    assert fast == slow


@pytest.mark.parametrize("case", sorted(F32_CASES))
def test_float_to_int32_by_hand(case):
    """Independent of the other path: truncation toward zero, then the low 32 bits (two's
    complement) for anything outside int32; NaN and inf as the wrap path gives them."""
    values = torch.tensor(F32_CASES[case], dtype=torch.float32)
    got = numerics.quantize(values, DataType.INT32).tolist()
    for v, g in zip(values.tolist(), got):
        if math.isfinite(v):
            w = int(v) & 0xFFFFFFFF
            assert g == (w - 2**32 if w >= 2**31 else w), (v, g)
    if all(math.isfinite(v) and -(2**31) <= v < 2**31 for v in values.tolist()):
        assert got == values.to(torch.int32).tolist()


def test_typecast_of_decode_positions_on_the_device():
    dev = _open()
    try:
        for values in ([-1.0, 0.0, 5.0, 1023.0], [float("nan"), 2.0**31, -3.5], [7.0] * 64, [7.0] * 65):
            t = ttsim.from_torch(torch.tensor(values), dtype=ttsim.float32, layout=RM, device=dev)
            got = ttsim.to_torch(ttsim.typecast(t, ttsim.uint32)).tolist()
            assert got == numerics.quantize(torch.tensor(values), DataType.UINT32).tolist()
            finite = [v for v in values if math.isfinite(v) and abs(v) < 2**31]
            assert got[: len(finite)] == [int(v) for v in finite] or not finite or values[0] != values[0]
    finally:
        ttsim.close_mesh_device(dev)


# -- to_torch's dtype conversion -------------------------------------------------------------------

@pytest.mark.parametrize("dtype,layout", [(ttsim.bfloat16, RM), (ttsim.bfloat16, TILE), (ttsim.float32, RM),
                                          (ttsim.int32, RM), (ttsim.uint32, TILE), (ttsim.bfloat8_b, TILE)])
def test_to_torch_gives_the_storage_dtype_and_memory_of_its_own(dtype, layout):
    dev = _open()
    try:
        src = torch.arange(33, dtype=torch.int32).reshape(1, 33)
        if dtype not in (ttsim.int32, ttsim.uint32):
            src = src.to(torch.float32) - 16.25
        t = ttsim.from_torch(src, dtype=dtype, layout=layout, device=dev)
        a = ttsim.to_torch(t)
        assert a.dtype == numerics.TORCH_STORAGE[dtype] and tuple(a.shape) == (1, 33)
        before = numerics.encode(t._buffers[0].data, t._dtype, t._layout).tobytes()
        a += 1
        assert numerics.encode(t._buffers[0].data, t._dtype, t._layout).tobytes() == before
        assert ttsim.to_torch(t, dtype=torch.float64).dtype == torch.float64
    finally:
        ttsim.close_mesh_device(dev)


# -- plus_one on a few entries -------------------------------------------------------------------

INT32_MAX = 2**31 - 1
PLUS_ONE_VALUES = [0, 1, -1, -2, INT32_MAX, INT32_MAX - 1, -(2**31), 1023, 5, -7]


def _plus_one_program(dtype, shape, skip: bool, values):
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 1))
    try:
        n = math.prod(shape)
        flat = (values * (n // len(values) + 1))[:n]
        t = ttsim.from_torch(torch.tensor(flat, dtype=torch.int64).to(torch.int32).reshape(shape), dtype=dtype,
                             layout=RM, device=dev)
        seen = []
        for _ in range(3):
            ttsim.plus_one(t, skip_negative_entries=skip)
            seen.append(ttsim.to_torch(t).reshape(-1).tolist())
        return seen, dict(dev.stats), ttsim_device.digest_state([dev])
    finally:
        ttsim.close_mesh_device(dev)


SHAPES = [(1,), (10,), (1, 10), (2, 1, 1, 5), (64,), (65,), (1, 8, 8)]


@pytest.mark.parametrize("dtype", [ttsim.int32, ttsim.uint32])
@pytest.mark.parametrize("skip", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_small_plus_one_is_the_tensor_plus_one(monkeypatch, dtype, skip, shape):
    from ttsim.ops import reduction

    fast = _plus_one_program(dtype, shape, skip, PLUS_ONE_VALUES)
    monkeypatch.setattr(reduction, "SMALL_PLUS_ONE", -1)  # every update through the tensor ops
    slow = _plus_one_program(dtype, shape, skip, PLUS_ONE_VALUES)
    assert fast == slow


@pytest.mark.parametrize("skip", [False, True])
def test_plus_one_by_hand(skip):
    """Independent of the other path: with skip only [0, INT32_MAX) gains 1; without, every
    entry gains 1 and INT32_MAX wraps to INT32_MIN (uint32 2**31 - 1 -> 2**31)."""
    seen, _, _ = _plus_one_program(ttsim.int32, (10,), skip, PLUS_ONE_VALUES)
    want = list(PLUS_ONE_VALUES)
    for got in seen:
        if skip:
            want = [v + 1 if 0 <= v < INT32_MAX else v for v in want]
        else:
            want = [((v + 1 + 2**31) % 2**32) - 2**31 for v in want]
        assert got == want


def test_plus_one_in_a_replayed_trace_writes_in_place_every_replay():
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 1), trace_region_size=1 << 20)
    try:
        pos = ttsim.from_torch(torch.tensor([3, -1, INT32_MAX - 1, 0], dtype=torch.int32), dtype=ttsim.int32,
                               layout=RM, device=dev)
        data = pos._buffers[0]
        tid = ttsim.begin_trace_capture(dev, cq_id=0)
        ttsim.plus_one(pos, skip_negative_entries=True)
        ttsim.end_trace_capture(dev, tid, cq_id=0)
        for k in range(1, 4):
            ttsim.execute_trace(dev, tid, cq_id=0)
            assert ttsim.to_torch(pos).tolist() == [3 + k, -1, INT32_MAX, k]
        assert pos._buffers[0] is data
        ttsim.release_trace(dev, tid)
    finally:
        ttsim.close_mesh_device(dev)


@pytest.mark.parametrize("ids_shape", [(4,), (1, 4), (2, 2), (2, 1, 1, 2), (1, 1, 1, 4)])
@pytest.mark.parametrize("table_shape", [(40, 33), (1, 40, 33), (1, 1, 40, 33)])
@pytest.mark.parametrize("ids_dtype", [ttsim.uint32, ttsim.bfloat16])
def test_embedding_of_every_accepted_rank_gathers_the_rows(ids_shape, table_shape, ids_dtype):
    """Ids and tables already 2-D are used as stored, the others reshaped: every accepted rank
    gives the same rows (bf16 ids truncated to ints; ids past the vocabulary: test_embedding_rows_by_hand)."""
    dev = _open()
    try:
        table = (torch.arange(40 * 33, dtype=torch.float32).reshape(40, 33) - 600) / 3
        w = ttsim.from_torch(table.reshape(table_shape), dtype=ttsim.bfloat16, layout=RM, device=dev)
        flat = [3, 39, 38, 0]
        ids = torch.tensor(flat, dtype=torch.int32).reshape(ids_shape)
        i = ttsim.from_torch(ids if ids_dtype == ttsim.uint32 else ids.to(torch.float32), dtype=ids_dtype, layout=RM,
                             device=dev)
        got = ttsim.to_torch(ttsim.embedding(i, w)).to(torch.float32)
        batch = ids_shape[0] if len(ids_shape) > 1 else 1
        want = torch.stack([numerics.to_bfloat16(table[v]).to(torch.float32) for v in flat]).reshape(
            batch, 4 // batch, 33)
        assert got.shape == want.shape and torch.equal(got, want)
    finally:
        ttsim.close_mesh_device(dev)
