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

import itertools
import warnings
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from . import numerics
from .grid import CoreGrid
from .memory import ALIGNMENT, DRAM_SIZE, L1_SIZE, Buffer, Region
from .program_cache import ProgramCache
from .seed import derive, get_seed, stream
from .types import BufferType, CoreCoord, DataType, Layout, MeshShape, TraceAllocationWarning, TTFatal

#: ttnn.device.DEFAULT_* of ttnn 0.81.1 (checked by tests/ttsim/test_conformance.py)
DEFAULT_L1_SMALL_SIZE = 0
DEFAULT_TRACE_REGION_SIZE = 0
DEFAULT_WORKER_L1_SIZE = 0
#: probability that the device has not yet executed what the host just enqueued
DEFAULT_LAG = 0.5


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
            raw = self.region(buf.buffer_type).read_bytes(buf.address, buf.nbytes)
            buf.data = numerics.decode(raw, buf.dtype, buf.layout, buf.padded)
        return buf.data


@dataclass(eq=False)
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
    ):
        seed = get_seed()
        self.seed = seed
        self._shape = mesh_shape
        self.chips = [Chip(i, seed) for i in chip_ids]
        self.l1_small_size = l1_small_size
        self.trace_region_size = trace_region_size
        self.num_command_queues = num_command_queues
        self._queues: list[deque[Command]] = [deque() for _ in range(num_command_queues)]
        self._rng = stream("mesh", *chip_ids, "queue", seed=seed)
        self.lag = DEFAULT_LAG if lag is None else float(lag)
        self._traces: dict[int, Trace] = {}
        self._capturing: Trace | None = None
        self._trace_ids = itertools.count()
        self.closed = False
        self.program_cache = ProgramCache()
        self.stats = {"commands": 0, "stale_host_reads": 0, "trace_corruptions": 0}

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

    def arch(self) -> str:
        return "Arch.BLACKHOLE"

    def compute_with_storage_grid_size(self) -> CoreCoord:
        return CoreCoord(13, 10)

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
        if not isinstance(cq_id, int) or not 0 <= cq_id < self.num_command_queues:
            raise TTFatal(
                f"{what}: cq_id={cq_id!r} is out of range; the device was opened with "
                f"num_command_queues={self.num_command_queues}"
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
        size = numerics.nbytes(dtype, layout, padded)
        bufs = []
        for chip in chips or self.chips:
            region = chip.region(buffer_type)
            addr = region.allocate(size, what)
            buf = Buffer(chip, buffer_type, addr, size, dtype, layout, tuple(padded))
            chip.live[id(buf)] = buf
            bufs.append(buf)
        if self._capturing is not None:
            self._capturing.buffers.extend(bufs)
        return bufs

    def free(self, bufs: list[Buffer]) -> None:
        for buf in bufs:
            if buf.freed:
                continue
            buf.freed = True
            buf.chip.live.pop(id(buf), None)
            region = buf.chip.region(buf.buffer_type)
            region.free(buf.address, buf.nbytes)
            region.leave_residue(buf)

    def _live_traces(self) -> bool:
        return any(t.ended for t in self._traces.values())

    # -- command queues -------------------------------------------------------------
    def enqueue(self, cq_id: int, label: str, fn: Callable[[], None] | None, writes=(), wait=None) -> Command:
        cmd = Command(label, fn, tuple(writes), wait, device=self)
        if self._capturing is not None and self._capturing.cq_id == cq_id and wait is None:
            self._capturing.commands.append(cmd)  # captured, not run (as on a real card)
            return cmd
        self._queues[cq_id].append(cmd)
        self.stats["commands"] += 1
        if self._rng.random() >= self.lag:
            self.run_until(lambda: not any(self._queues))
        return cmd

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
        while not condition():
            self._step()

    def finish(self, cq_id: int | None = None) -> None:
        """Block until cq ``cq_id`` (or every queue) is empty."""
        if cq_id is None:
            self.run_until(lambda: not any(self._queues))
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
        trace = self._trace(trace_id, "end_trace_capture")
        if self._capturing is not trace or trace.cq_id != cq_id:
            raise TTFatal(f"end_trace_capture: trace {trace_id} is not being captured on cq {cq_id}")
        self._capturing = None
        trace.ended = True

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
        del self._traces[trace.trace_id]

    def _trace(self, trace_id: int, what: str) -> Trace:
        self.check_open(what)
        if trace_id not in self._traces:
            raise TTFatal(f"{what}: no trace with id {trace_id!r} on {self!r}")
        return self._traces[trace_id]

    def _corrupt_overlaps(self, trace: Trace) -> None:
        """A replay writes the trace's buffers at their captured addresses even if the host
        freed them since; live buffers placed there since get those bytes."""
        for src in trace.buffers:
            if not src.freed or src.data is None:
                continue
            lo, hi = src.address, src.address + src.nbytes
            for dst in list(src.chip.live.values()):
                if dst.buffer_type != src.buffer_type or dst.data is None:
                    continue
                if dst.address >= hi or dst.address + dst.nbytes <= lo:
                    continue
                img = numerics.encode(dst.data, dst.dtype, dst.layout)
                s_img = numerics.encode(src.data, src.dtype, src.layout)
                a, b = max(lo, dst.address), min(hi, dst.address + dst.nbytes)
                img[a - dst.address : b - dst.address] = s_img[a - lo : b - lo]
                dst.data = numerics.decode(img, dst.dtype, dst.layout, dst.padded)
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

