"""Opening devices, synchronisation, events and traces: ttnn's module-level functions."""

from __future__ import annotations

import contextlib

from . import chips, fabric
from .device import (DEFAULT_L1_SMALL_SIZE, DEFAULT_TRACE_REGION_SIZE, DEFAULT_WORKER_L1_SIZE, Event, MeshDevice,
                     current_cq_id, pop_cq_id, push_cq_id)
from .types import MeshShape, TTFatal

def GetNumAvailableDevices() -> int:
    return chips.num_available()


def GetNumPCIeDevices() -> int:
    return GetNumAvailableDevices()


open_devices = chips.open_devices


def _check_sizes(what: str, l1_small_size, trace_region_size, num_command_queues) -> None:
    for name, value in (("l1_small_size", l1_small_size), ("trace_region_size", trace_region_size)):
        if not isinstance(value, int) or value < 0:
            raise TTFatal(f"{what}: {name} must be a non-negative int, got {value!r}")
    if num_command_queues not in (1, 2):
        raise TTFatal(f"{what}: num_command_queues must be 1 or 2, got {num_command_queues!r}")


def open_device(
    *,
    device_id: int,
    l1_small_size: int = DEFAULT_L1_SMALL_SIZE,
    trace_region_size: int = DEFAULT_TRACE_REGION_SIZE,
    dispatch_core_config=None,
    worker_l1_size: int = DEFAULT_WORKER_L1_SIZE,
    num_command_queues: int = 1,
) -> MeshDevice:
    """Open one chip (a 1x1 mesh). ``worker_l1_size`` 0 means the hardware default."""
    _check_sizes("open_device", l1_small_size, trace_region_size, num_command_queues)
    chips.claim([device_id], "open_device")
    fabric_config = fabric.check_open(1, "open_device")
    dev = MeshDevice(MeshShape(1, 1), [device_id], l1_small_size=l1_small_size,
                     trace_region_size=trace_region_size, num_command_queues=num_command_queues,
                     fabric_config=fabric_config)
    chips.hold([device_id], dev)
    return dev


def close_device(device: MeshDevice) -> None:
    _close(device, "close_device")


def open_mesh_device(
    mesh_shape: MeshShape | None = None,
    l1_small_size: int = DEFAULT_L1_SMALL_SIZE,
    trace_region_size: int = DEFAULT_TRACE_REGION_SIZE,
    num_command_queues: int = 1,
    dispatch_core_config=None,
    offset=None,
    physical_device_ids: list[int] = (),
    worker_l1_size: int = DEFAULT_WORKER_L1_SIZE,
) -> MeshDevice:
    """Open a rows x cols mesh of chips (production: MeshShape(1, 2)).

    ``physical_device_ids`` empty means chips 0..n-1; ``worker_l1_size`` 0 means the hardware default.
    """
    if mesh_shape is None:
        mesh_shape = MeshShape(1, GetNumAvailableDevices())
    if isinstance(mesh_shape, (tuple, list)):
        mesh_shape = MeshShape(*mesh_shape)
    if not isinstance(mesh_shape, MeshShape):
        raise TTFatal(f"open_mesh_device: mesh_shape must be a MeshShape, got {mesh_shape!r}")
    _check_sizes("open_mesh_device", l1_small_size, trace_region_size, num_command_queues)
    if offset is not None:
        raise TTFatal(f"open_mesh_device: offset={offset!r} is not modelled by ttsim; pass physical_device_ids")
    n = mesh_shape.mesh_size()
    available = GetNumAvailableDevices()
    if not physical_device_ids:
        if n > available:
            raise TTFatal(
                f"open_mesh_device: requested {mesh_shape!r} ({n} chips) but the system has {available}"
            )
        physical_device_ids = list(range(n))
    elif len(physical_device_ids) != n:
        raise TTFatal(
            f"open_mesh_device: {mesh_shape!r} needs {n} physical_device_ids, got {physical_device_ids!r}"
        )
    chips.claim(list(physical_device_ids), "open_mesh_device")
    fabric_config = fabric.check_open(n, "open_mesh_device")
    dev = MeshDevice(mesh_shape, list(physical_device_ids), l1_small_size=l1_small_size,
                     trace_region_size=trace_region_size, num_command_queues=num_command_queues,
                     fabric_config=fabric_config)
    chips.hold(list(physical_device_ids), dev)
    return dev


def close_mesh_device(mesh_device: MeshDevice) -> None:
    _close(mesh_device, "close_mesh_device")


def _close(device: MeshDevice, what: str) -> None:
    if not isinstance(device, MeshDevice):
        raise TTFatal(f"{what}: expected a MeshDevice, got {type(device).__name__}")
    device.close()
    chips.release(device)


@contextlib.contextmanager
def command_queue(cq_id: int):
    """Calls inside the block that name no queue go to ``cq_id`` (ttnn's thread-local default)."""
    if cq_id is None:
        raise ValueError("cq_id cannot be None in command_queue context")
    push_cq_id(cq_id)
    try:
        yield
    finally:
        pop_cq_id()


def synchronize_device(device: MeshDevice, cq_id: int | None = None, sub_device_ids=()) -> None:
    """Block until the device has executed everything enqueued (on ``cq_id``, or all queues)."""
    _device(device, "synchronize_device")
    if cq_id is not None:
        device.check_cq(cq_id, "synchronize_device")
    device.finish(cq_id)


def record_event(mesh_device: MeshDevice, cq_id: int | None = None, sub_device_ids=(), device_range=None) -> Event:
    """Record an event on queue ``cq_id`` (default 0). ``device_range`` (a sub-mesh) is not modelled."""
    cq_id = current_cq_id(cq_id)
    if device_range is not None:
        raise TTFatal("record_event: device_range is not modelled by ttsim")
    _device(mesh_device, "record_event").check_cq(cq_id, "record_event")
    return mesh_device.record_event(cq_id)


def wait_for_event(cq_id: int | None, mesh_event: Event) -> None:
    """Make queue ``cq_id`` (None = 0) of the event's device wait until ``mesh_event`` has completed.

    ttnn declares ``cq_id=None`` before the required ``mesh_event``, which Python cannot spell;
    pass both (``wait_for_event(1, event)``), as ttnn code does.
    """
    cq_id = current_cq_id(cq_id)
    if not isinstance(mesh_event, Event):
        raise TTFatal(f"wait_for_event: expected an event from record_event, got {mesh_event!r}")
    mesh_event.device.check_cq(cq_id, "wait_for_event")
    mesh_event.device.wait_for_event(cq_id, mesh_event)


def event_synchronize(mesh_event: Event) -> None:
    """Block the host until ``mesh_event`` has completed."""
    if not isinstance(mesh_event, Event):
        raise TTFatal(f"event_synchronize: expected an event from record_event, got {mesh_event!r}")
    mesh_event.device.run_until(lambda: mesh_event.done)


def begin_trace_capture(mesh_device: MeshDevice, *, cq_id: int | None = None) -> int:
    return _device(mesh_device, "begin_trace_capture").begin_trace_capture(current_cq_id(cq_id))


def end_trace_capture(mesh_device: MeshDevice, trace_id: int, *, cq_id: int | None = None) -> None:
    _device(mesh_device, "end_trace_capture").end_trace_capture(trace_id, current_cq_id(cq_id))


def execute_trace(mesh_device: MeshDevice, trace_id: int, *, cq_id: int | None = None, blocking: bool = True) -> None:
    cq_id = current_cq_id(cq_id)
    dev = _device(mesh_device, "execute_trace")
    dev.check_cq(cq_id, "execute_trace")
    dev.execute_trace(trace_id, cq_id, blocking)


def release_trace(mesh_device: MeshDevice, trace_id: int) -> None:
    _device(mesh_device, "release_trace").release_trace(trace_id)


def _device(device, what: str) -> MeshDevice:
    if not isinstance(device, MeshDevice):
        raise TTFatal(f"{what}: expected a MeshDevice, got {type(device).__name__}")
    device.check_open(what)
    return device
