"""Devices, command queues, events and traces.

A MeshDevice owns its chips (one Blackhole each) and its command queues. Every device
operation is a command appended to a queue; the device executes commands in order per
queue, but LATER than the host issues them: after each enqueue a seeded draw decides
whether the device has caught up (probability ``1 - lag``) or is still behind. Host
reads, events and synchronisation run the device forward as far as they must. So a
program that synchronises correctly always sees the right bytes, and one that consumes
a non-blocking read early sees what a real card could show, reproducibly per seed.
With two command queues the interleaving between them is also a seeded draw, ordered
only by ``wait_for_event``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from . import numerics
from .fabric import FabricConfig, get_arch_name
from .grid import CoreGrid
from .memory import ALIGNMENT, DRAM_SIZE, L1_SIZE, Buffer, Region
from .program_cache import ProgramCache
from .seed import derive, get_seed, stream
from .types import TILE_BYTES as BF16_TILE_BYTES
from .types import Arch, BufferType, CoreCoord, DataType, Layout, MeshShape, TraceAllocationWarning, TTFatal

#: ttnn.device.DEFAULT_* of ttnn 0.81.1 (checked by tests/ttsim/test_conformance.py)
DEFAULT_L1_SMALL_SIZE = 0
DEFAULT_TRACE_REGION_SIZE = 0
DEFAULT_WORKER_L1_SIZE = 0
#: probability that the device has not yet executed what the host just enqueued
DEFAULT_LAG = 0.5
#: lag doubles a one-queue device draws at a time from its queue stream (see MeshDevice._lag_draw)
LAG_DRAW_BLOCK = 256
_knob_lag: list[float] = []  # innermost device_knobs(readback_lag=...) in force


@contextlib.contextmanager
def device_knobs(*, readback_lag: float | None = None):
    """ttsim's seeded device knobs for meshes opened inside the block (a card has its own
    timing instead). ``readback_lag``: the chance a queued command has not run yet when the
    host looks (default DEFAULT_LAG)."""
    if readback_lag is not None and not 0.0 <= float(readback_lag) <= 1.0:
        raise ValueError(f"readback_lag must be in [0, 1], got {readback_lag!r}")
    _knob_lag.append(DEFAULT_LAG if readback_lag is None else float(readback_lag))
    try:
        yield
    finally:
        _knob_lag.pop()
#: ttsim's estimate of a trace buffer (see Trace.nbytes): a program's fixed share (launch
#: message, CB config, go signal), each worker core's share (runtime args, launch message),
#: the worker cores of a Blackhole (13x10) and the bytes of one bf16 tile
TRACE_BYTES_PER_COMMAND = 2048
TRACE_BYTES_PER_CORE = 256
WORKER_GRID = CoreCoord(13, 10)
WORKER_CORES = WORKER_GRID.x * WORKER_GRID.y
TILE_BYTES = BF16_TILE_BYTES[DataType.BFLOAT16]


class _ThreadState(threading.local):
    def __init__(self):  # runs once per thread, on its first use
        self.cq_stack: list[int] = []


_thread = _ThreadState()


def current_cq_id(cq_id: int | None = None) -> int:
    """``cq_id`` if given; else the queue calls without an explicit cq go to: 0, or the
    innermost ``ttnn.command_queue(cq)``."""
    if cq_id is not None:
        return cq_id
    stack = _thread.cq_stack
    return stack[-1] if stack else 0


def push_cq_id(cq_id: int) -> None:
    _thread.cq_stack.append(cq_id)


def pop_cq_id() -> None:
    _thread.cq_stack.pop()


class Chip:
    """One Blackhole chip: a DRAM and an L1 address space with seeded junk."""

    def __init__(self, chip_id: int, seed: int):
        self.id = chip_id
        self.dram = Region("DRAM", DRAM_SIZE, ALIGNMENT[BufferType.DRAM], derive("chip", chip_id, "dram", seed=seed))
        self.l1 = Region("L1", L1_SIZE, ALIGNMENT[BufferType.L1], derive("chip", chip_id, "l1", seed=seed))
        self.live: dict[int, Buffer] = {}  # id(buffer) -> buffer, for trace corruption

    def region(self, buffer_type: BufferType) -> Region:
        return self.l1 if buffer_type == BufferType.L1 else self.dram

    def contents(self, buf: Buffer):
        """``buf``'s data; a buffer nothing has written yet shows what its memory held."""
        if buf.data is None:
            raw = self.region(buf.buffer_type).read_bytes(buf.address, buf.nbytes)  # a new array
            buf.data = numerics.decode(raw, buf.dtype, buf.layout, buf.padded, owned=True)
        return buf.data


@dataclass(eq=False, slots=True)
class Command:
    label: str
    fn: Callable[[], None] | None
    writes: tuple[Buffer, ...] = ()
    wait: "Event | None" = None
    done: bool = False
    device: "MeshDevice | None" = None


class Event:
    """ttnn.MeshEvent: marks a point in one command queue."""

    _ids = itertools.count()

    def __init__(self, device: "MeshDevice", cq_id: int):
        self.device = device
        self.cq_id = cq_id
        self.id = next(Event._ids)
        self.done = False

    def __repr__(self) -> str:
        return f"MeshEvent(cq={self.cq_id}, {'done' if self.done else 'pending'})"


@dataclass(eq=False)
class Trace:
    trace_id: int
    cq_id: int
    commands: list[Command] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)  # allocated during capture
    ended: bool = False
    # dynamic trace mode (trace_region_size=0): DRAM high-water marks of the capture, the trace buffers
    alloc_high_water_mark: int = 0
    deletion_high_water_mark: int = 0
    dram_buffers: list[Buffer] = field(default_factory=list)
    counted_bytes: int = 0  # what this trace adds to the device's trace region use

    def nbytes(self) -> int:
        """ttsim's estimate of the trace buffer's size on one chip.

        On a card the trace buffer holds the assembled dispatch command stream (per program:
        launch messages, runtime args, CB and semaphore config, go signals; then one
        exec-buf-end command), padded to the interleaved page size. It grows with the number
        of programs and the cores each runs on, not with tensor bytes. ttsim records no
        dispatch commands, so it estimates from the buffers each captured command writes (an
        op: the output it allocated): a fixed share per command plus a per-core share for as
        many cores as the output has tiles, up to the whole grid. An order-of-magnitude
        estimate that can be off either way (a ~1500-program decode on full grids comes to
        ~50 MB, the vLLM plugin's region); its job is to make a too-small region fail.
        """
        total = TRACE_BYTES_PER_COMMAND  # exec-buf-end
        for cmd in self.commands:
            chip = cmd.writes[0].chip if cmd.writes else None
            tiles = sum(-(-b.nbytes // TILE_BYTES) for b in cmd.writes if b.chip is chip)
            total += TRACE_BYTES_PER_COMMAND + TRACE_BYTES_PER_CORE * min(WORKER_CORES, tiles)
        return total

    @property
    def dram_high_water_mark(self) -> int:
        return max(self.alloc_high_water_mark, self.deletion_high_water_mark)


class MeshDevice:
    """ttnn.MeshDevice: a grid of chips with shared command queues."""

    def __init__(
        self,
        mesh_shape: MeshShape,
        chip_ids: list[int],
        *,
        l1_small_size: int,
        trace_region_size: int,
        num_command_queues: int,
        lag: float | None = None,
        fabric_config: FabricConfig = FabricConfig.DISABLED,
    ):
        seed = get_seed()
        self.seed = seed
        self._shape = mesh_shape
        self.chips = [Chip(i, seed) for i in chip_ids]
        self.l1_small_size = l1_small_size
        self.trace_region_size = trace_region_size
        self.num_command_queues = num_command_queues
        self.fabric_config = fabric_config  # the fabric in force when the mesh opened
        self.trace_buffers_size = 0  # bytes of the trace region the live traces use
        self._queues: list[deque[Command]] = [deque() for _ in range(num_command_queues)]
        self._rng = stream("mesh", *chip_ids, "queue", seed=seed)
        # with one queue the stream only ever draws lag doubles (the interleaving draw of
        # _step needs two runnable queues), so they are drawn in blocks: the same doubles in
        # the same order as one draw per command (numpy fills a block draw by draw)
        self._draws: list[float] = []
        self._draw_block = LAG_DRAW_BLOCK if num_command_queues == 1 else 0
        self.lag = (_knob_lag[-1] if _knob_lag else DEFAULT_LAG) if lag is None else float(lag)
        self._traces: dict[int, Trace] = {}
        self._capturing: Trace | None = None
        self._trace_ids = itertools.count()
        self.closed = False
        self.program_cache = ProgramCache()
        self.stats = {"commands": 0, "stale_host_reads": 0, "trace_corruptions": 0}
        self._diagnostics: list = []  # ttsim.diagnostics.Entry: stray accesses its kernels made

    # -- identity, as ttnn exposes it ------------------------------------------
    @property
    def shape(self) -> MeshShape:
        return self._shape

    def get_num_devices(self) -> int:
        return len(self.chips)

    def get_device_ids(self) -> list[int]:
        return [c.id for c in self.chips]

    def id(self) -> int:
        return self.chips[0].id

    def arch(self) -> Arch:
        """The arch of the first chip: every simulated chip is a Blackhole (p150a)."""
        return Arch.BLACKHOLE

    def compute_with_storage_grid_size(self) -> CoreCoord:
        return WORKER_GRID

    def dram_grid_size(self) -> CoreCoord:
        return CoreCoord(8, 1)

    @property
    def core_grid(self) -> CoreGrid:
        """The compute grid as a CoreGrid (Blackhole p150a: 13 x 10 worker cores)."""
        size = self.compute_with_storage_grid_size()
        return CoreGrid(x=size.x, y=size.y)

    @property
    def program_cache_enabled(self) -> bool:
        return self.program_cache.enabled

    def enable_program_cache(self) -> None:
        self.program_cache.enabled = True

    def disable_and_clear_program_cache(self) -> None:
        self.program_cache.enabled = False
        self.program_cache.clear()

    def clear_program_cache(self) -> None:
        self.program_cache.clear()

    def num_program_cache_entries(self) -> int:
        """Distinct programs compiled since the cache was last cleared (ttsim/program_cache.py)."""
        return len(self.program_cache)

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"MeshDevice({self._shape[0]}x{self._shape[1]}, chips={self.get_device_ids()}, {state})"

    # -- checks -------------------------------------------------------------------
    def check_open(self, what: str) -> None:
        if self.closed:
            raise TTFatal(f"{what}: {self!r} is closed")

    def check_cq(self, cq_id: int, what: str) -> None:
        # tt-metal: MeshDeviceImpl::mesh_command_queue, TT_FATAL "cq_id {} is out of range"
        if not isinstance(cq_id, int) or isinstance(cq_id, bool) or not 0 <= cq_id < self.num_command_queues:
            raise TTFatal(
                f"cq_id {cq_id!r} is out of range ({what} on {self!r}, opened with "
                f"num_command_queues={self.num_command_queues}; pass num_command_queues=2 to use cq 1)"
            )

    # -- buffers ------------------------------------------------------------------
    def allocate(
        self, buffer_type: BufferType, dtype: DataType, layout: Layout, padded: tuple[int, ...], what: str,
        chips: list[Chip] | None = None,
    ) -> list[Buffer]:
        """One buffer per chip (all, or ``chips``), at the first free address that fits."""
        self.check_open(what)
        if self._live_traces() and self._capturing is None:
            warnings.warn(
                "Allocating device buffers is unsafe due to the existence of an active trace. "
                "These buffers may be corrupted once a trace is executed.",
                TraceAllocationWarning,
                stacklevel=3,
            )
        padded = tuple(padded)  # a plain tuple: the cache below compares keys (a Shape's == is Python)
        size = numerics.nbytes(dtype, layout, padded)
        bufs = []
        for chip in chips or self.chips:
            region = chip.region(buffer_type)
            addr = region.allocate(size, what)
            buf = Buffer(chip, buffer_type, addr, size, dtype, layout, padded)
            chip.live[id(buf)] = buf
            bufs.append(buf)
        if self._capturing is not None:
            self._capturing.buffers.extend(bufs)
            if buffer_type == BufferType.DRAM:
                top = max(b.address + b.nbytes for b in bufs)
                self._capturing.alloc_high_water_mark = max(self._capturing.alloc_high_water_mark, top)
        return bufs

    def free(self, bufs: list[Buffer]) -> None:
        for buf in bufs:
            if buf.freed:
                continue
            buf.freed = True
            if self._capturing is not None and buf.buffer_type == BufferType.DRAM:
                cap = self._capturing
                cap.deletion_high_water_mark = max(cap.deletion_high_water_mark, buf.address + buf.nbytes)
            buf.chip.live.pop(id(buf), None)
            region = buf.chip.region(buf.buffer_type)
            region.free(buf.address, buf.nbytes)
            region.leave_residue(buf)

    def _live_traces(self) -> bool:
        for t in self._traces.values():
            if t.ended:
                return True
        return False

    # -- command queues -------------------------------------------------------------
    def enqueue(self, cq_id: int, label: str, fn: Callable[[], None] | None, writes=(), wait=None) -> Command:
        cmd = Command(label, fn, tuple(writes), wait, device=self)
        if self._capturing is not None and self._capturing.cq_id == cq_id and wait is None:
            self._capturing.commands.append(cmd)  # captured, not run (as on a real card)
            return cmd
        self._queues[cq_id].append(cmd)
        self.stats["commands"] += 1
        draws = self._draws
        if (draws.pop() if draws else self._lag_draw()) >= self.lag:
            self._drain()
        return cmd

    def _lag_draw(self) -> float:
        """The next double of the queue stream (see ``_draw_block``; enqueue pops a block's
        remaining draws itself)."""
        if not self._draw_block:
            return self._rng.random()
        if not self._draws:
            self._draws = self._rng.random(self._draw_block).tolist()
            self._draws.reverse()  # pop() from the end takes them in stream order
        return self._draws.pop()

    def _drain(self) -> None:
        """Run every queued command (the device has caught up)."""
        if len(self._queues) > 1:  # the interleaving of queues is a seeded draw per command
            self.run_until(lambda: not any(self._queues))
            return
        queue = self._queues[0]
        while queue:
            self._run_head(queue)

    def _run_head(self, queue) -> None:
        """Run the one queue's head in place: with one queue _step's choice is always it and
        draws nothing. A head that cannot run (nothing queued, or waiting on an event not done)
        is _step's hang."""
        cmd = queue[0] if queue else None
        if cmd is None or (cmd.wait is not None and not cmd.wait.done):
            self._step()  # raises the hang
            return
        queue.popleft()
        if cmd.fn is not None:
            cmd.fn()
        cmd.done = True

    def _runnable(self) -> list[int]:
        return [
            i for i, q in enumerate(self._queues) if q and (q[0].wait is None or q[0].wait.done)
        ]

    def _step(self) -> None:
        ready = self._runnable()
        if not ready:
            waiting = [f"cq {i} waits for {q[0].wait!r}" for i, q in enumerate(self._queues) if q]
            raise TTFatal(f"device hang: {', '.join(waiting)} that no queue will record")
        cq = ready[0] if len(ready) == 1 else ready[int(self._rng.integers(len(ready)))]
        cmd = self._queues[cq].popleft()
        if cmd.fn is not None:
            cmd.fn()
        cmd.done = True

    def run_until(self, condition: Callable[[], bool]) -> None:
        if len(self._queues) == 1:
            queue = self._queues[0]
            while not condition():
                self._run_head(queue)
            return
        while not condition():
            self._step()

    def finish(self, cq_id: int | None = None) -> None:
        """Block until cq ``cq_id`` (or every queue) is empty."""
        if cq_id is None:
            self._drain()
        else:
            queue = self._queues[cq_id]
            self.run_until(lambda: not queue)

    def wait_command(self, cmd: Command) -> None:
        self.run_until(lambda: cmd.done)

    # -- events ---------------------------------------------------------------------
    def record_event(self, cq_id: int) -> Event:
        event = Event(self, cq_id)

        def mark():
            event.done = True

        self.enqueue(cq_id, "record_event", mark)
        return event

    def wait_for_event(self, cq_id: int, event: Event) -> None:
        self.enqueue(cq_id, f"wait_for_event {event.id}", None, wait=event)

    # -- traces ---------------------------------------------------------------------
    def begin_trace_capture(self, cq_id: int) -> int:
        self.check_cq(cq_id, "begin_trace_capture")
        if self._capturing is not None:
            raise TTFatal("begin_trace_capture: a trace capture is already in progress on this device")
        self.finish(cq_id)
        trace = Trace(next(self._trace_ids), cq_id)
        self._traces[trace.trace_id] = trace
        self._capturing = trace
        return trace.trace_id

    def end_trace_capture(self, trace_id: int, cq_id: int) -> None:
        self.check_cq(cq_id, "end_trace_capture")
        trace = self._trace(trace_id, "end_trace_capture")
        if self._capturing is not trace or trace.cq_id != cq_id:
            raise TTFatal(f"end_trace_capture: trace {trace_id} is not being captured on cq {cq_id}")
        self._capturing = None
        try:
            self._place_trace_buffer(trace)
        except TTFatal:
            del self._traces[trace.trace_id]  # the capture is over and the trace is unusable
            raise
        trace.ended = True

    def _place_trace_buffer(self, trace: Trace) -> None:
        """Where the captured commands go, as tt-metal's MeshTrace::populate_mesh_buffer decides.

        With a trace region (trace_region_size > 0) every live trace's buffer must fit in it
        together. Without one (0, the default in 0.81.1) tt-metal's dynamic mode puts the
        buffer at the TOP of DRAM and fails if it lands below DRAM the capture allocated or
        freed, or below what another live trace's capture touched.
        """
        size = trace.nbytes()
        if self.trace_region_size > 0:
            # counted before the check and never taken back on failure, as tt-metal does
            self.trace_buffers_size += size
            trace.counted_bytes = size
            if self.trace_buffers_size > self.trace_region_size:
                raise TTFatal(
                    f"Creating trace buffers of size {self.trace_buffers_size}B on MeshDevice {self.id()}, "
                    f"but only {self.trace_region_size}B is allocated for trace region. "
                    f"(trace {trace.trace_id}: {len(trace.commands)} captured commands; open the device with a "
                    f"larger trace_region_size)"
                )
            return
        bufs = []
        for chip in self.chips:
            addr = chip.dram.allocate(size, f"trace {trace.trace_id} buffer", top_down=True)
            bufs.append(Buffer(chip, BufferType.DRAM, addr, size, DataType.UINT32, Layout.ROW_MAJOR, (size // 4,)))
        trace.dram_buffers = bufs
        address = min(b.address for b in bufs)
        alloc, dele = trace.alloc_high_water_mark, trace.deletion_high_water_mark
        live = max((t.dram_high_water_mark for t in self._traces.values() if t.ended), default=0)
        if address >= max(alloc, dele, live):
            return
        self._free_trace_buffers(trace)
        if address < alloc and address < dele:
            raise TTFatal(
                f"Trace buffer at address {address} overlaps with DRAM activity during trace capture. "
                f"Allocation high water mark: {alloc}, Deletion high water mark: {dele}. "
                "Reduce allocations during trace capture or set a non-zero trace_region_size."
            )
        if address < dele:
            raise TTFatal(
                f"Trace buffer at address {address} overlaps with buffers deallocated during trace capture "
                f"(deletion high water mark: {dele}). "
                "Avoid deallocating DRAM buffers during trace capture or set a non-zero trace_region_size."
            )
        if address < alloc:
            raise TTFatal(
                f"Trace buffer at address {address} overlaps with buffers allocated during trace capture "
                f"(allocation high water mark: {alloc}). "
                "Reduce allocations during trace capture or set a non-zero trace_region_size."
            )
        raise TTFatal(
            f"Trace buffer at address {address} overlaps with DRAM activity captured by another live trace "
            f"(maximum live trace high water mark: {live}). "
            "Release the existing trace before capturing this trace or set a non-zero trace_region_size."
        )

    def _free_trace_buffers(self, trace: Trace) -> None:
        for b in trace.dram_buffers:
            b.chip.dram.free(b.address, b.nbytes)
        trace.dram_buffers = []

    def execute_trace(self, trace_id: int, cq_id: int, blocking: bool) -> None:
        trace = self._trace(trace_id, "execute_trace")
        if not trace.ended:
            raise TTFatal(f"execute_trace: trace {trace_id} is still being captured")
        if self._capturing is not None:
            raise TTFatal("execute_trace: cannot replay a trace while capturing another")

        def replay():
            for cmd in trace.commands:
                if cmd.fn is not None:
                    cmd.fn()
            self._corrupt_overlaps(trace)

        cmd = self.enqueue(cq_id, f"execute_trace {trace_id}", replay)
        if blocking:
            self.wait_command(cmd)

    def release_trace(self, trace_id: int) -> None:
        trace = self._trace(trace_id, "release_trace")
        self.finish()
        self.trace_buffers_size -= trace.counted_bytes
        self._free_trace_buffers(trace)
        del self._traces[trace.trace_id]

    def _trace(self, trace_id: int, what: str) -> Trace:
        self.check_open(what)
        if trace_id not in self._traces:
            raise TTFatal(f"{what}: no trace with id {trace_id!r} on {self!r}")
        return self._traces[trace_id]

    def _corrupt_overlaps(self, trace: Trace) -> None:
        """A replay writes the trace's buffers at their captured addresses even if the host
        freed them since; live buffers placed there since get those bytes."""
        stale = [src for src in trace.buffers if src.freed and src.data is not None]
        near: dict[int, list[Buffer]] = {}  # chip id -> its live buffers within the chip's stale span
        spans: dict[int, list] = {}  # chip id -> [chip, lowest address, highest end] of its stale buffers
        for b in stale:
            span = spans.get(b.chip.id)
            if span is None:
                spans[b.chip.id] = [b.chip, b.address, b.address + b.nbytes]
            else:
                span[1] = min(span[1], b.address)
                span[2] = max(span[2], b.address + b.nbytes)
        for chip, lo_all, hi_all in spans.values():
            near[chip.id] = [dst for dst in chip.live.values() if dst.data is not None
                             and dst.address < hi_all and dst.address + dst.nbytes > lo_all]
        for src in stale:
            lo, hi = src.address, src.address + src.nbytes
            s_img = None  # src's image, made once (read only: it may view src's data)
            for dst in near[src.chip.id]:
                if dst.buffer_type != src.buffer_type:
                    continue
                d_lo, d_hi = dst.address, dst.address + dst.nbytes
                if d_lo >= hi or d_hi <= lo:
                    continue
                if s_img is None:
                    s_img = numerics.encode(src.data, src.dtype, src.layout, copy=False)
                a, b = max(lo, d_lo), min(hi, d_hi)
                if a == d_lo and b == d_hi:  # src covers all of dst: dst's own image is not needed
                    # (a slice of src's image: decode copies it)
                    dst.data = numerics.decode(s_img[a - lo : b - lo], dst.dtype, dst.layout, dst.padded)
                else:
                    img = numerics.encode(dst.data, dst.dtype, dst.layout)  # a new array, dst's from now on
                    img[a - d_lo : b - d_lo] = s_img[a - lo : b - lo]
                    dst.data = numerics.decode(img, dst.dtype, dst.layout, dst.padded, owned=True)
                self.stats["trace_corruptions"] += 1

    # -- lifetime ---------------------------------------------------------------------
    def close(self) -> None:
        """Drain the queues, then release the device even if a queued command fails (the
        failure is re-raised after release, so one bad op cannot keep the chips claimed)."""
        if self.closed:
            return
        try:
            self.finish()
        finally:
            for queue in self._queues:
                queue.clear()
            self._traces.clear()
            self._capturing = None
            self.closed = True


def digest_state(devices: list[MeshDevice]) -> str:
    """SHA-256 over every live buffer's bytes and every device counter, for determinism checks."""
    import hashlib

    h = hashlib.sha256()
    for dev in devices:
        dev.finish()
        h.update(repr(sorted(dev.stats.items())).encode())
        for chip in dev.chips:
            for buf in sorted(chip.live.values(), key=lambda b: (b.buffer_type.value, b.address)):
                h.update(f"{chip.id}:{buf.buffer_type.name}:{buf.address}:{buf.nbytes}".encode())
                if buf.data is not None:
                    h.update(numerics.encode(buf.data, buf.dtype, buf.layout).tobytes())
    return h.hexdigest()


# -- ttnn.device's arch queries (real 0.81.1: ttnn/device.py, plain Python over the binding) -------

def is_blackhole(device=None) -> bool:
    """``device.arch() == Arch.BLACKHOLE`` for a device, else whether the host's arch name says blackhole."""
    if device is not None:
        return device.arch() == Arch.BLACKHOLE
    return "blackhole" in get_arch_name()


def is_wormhole_b0(device=None) -> bool:
    """As :func:`is_blackhole` for WORMHOLE_B0: False on ttsim's Blackhole chips, with or without a device."""
    if device is not None:
        return device.arch() == Arch.WORMHOLE_B0
    return "wormhole_b0" in get_arch_name()
