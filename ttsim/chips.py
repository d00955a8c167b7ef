"""Which chips are open, and the fabric rule that depends on it.

One registry of open chips for the whole process: ``api`` claims and releases chips as
meshes open and close, and ``fabric`` asks it before enabling a fabric (tt-metal refuses
that while devices are open). Keeping both here is what lets ``api -> fabric`` run one way.
"""

from __future__ import annotations

from . import settings
from .types import TTFatal

#: chips in the simulated system: the production host has two p150a cards
NUM_CHIPS_DEFAULT = 2

_open_chips: dict[int, object] = {}  # chip id -> the MeshDevice holding it


def num_available() -> int:
    value = settings.num_chips_text(NUM_CHIPS_DEFAULT)
    try:
        return int(value)
    except ValueError:
        raise TTFatal(f"{settings.NUM_CHIPS_ENV} must be an int, got {value!r}") from None


def open_devices() -> list:
    """The devices open now (each once), in the order their first chip was opened."""
    out: list = []
    for dev in _open_chips.values():
        if not dev.closed and dev not in out:
            out.append(dev)
    return out


def claim(chip_ids: list[int], what: str) -> None:
    n = num_available()
    for cid in chip_ids:
        if not isinstance(cid, int) or not 0 <= cid < n:
            raise TTFatal(f"{what}: device_id {cid!r} is out of range: the system has {n} chip(s) (num_chips > 0)")
        if cid in _open_chips and not _open_chips[cid].closed:
            raise TTFatal(f"{what}: device {cid} is already open in {_open_chips[cid]!r}")


def hold(chip_ids: list[int], device) -> None:
    for cid in chip_ids:
        _open_chips[cid] = device


def release(device) -> None:
    for cid in device.get_device_ids():
        if _open_chips.get(cid) is device:
            del _open_chips[cid]


def refuse_fabric_while_open(config_name: str) -> None:
    if open_devices():
        raise TTFatal(
            f"SetFabricConfig({config_name}) is not allowed while devices are still open: it would reinitialize "
            "the control plane underneath running fabric kernels and dangle the ControlPlane& held by the fabric "
            "firmware initializer. Close the mesh device before changing the fabric config to a non-DISABLED value."
            f" (open: {', '.join(repr(d) for d in open_devices())})"
        )
