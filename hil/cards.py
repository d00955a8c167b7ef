"""The real ttnn as a backend for programs outside pytest (``ttsim arms --hil``), fail-closed.

Same checks as ``pytest --hil``: cards selected (TT_VISIBLE_DEVICES) before ttnn is imported,
probed in a subprocess, refused with one line naming the cause; the one-cable mesh graph
descriptor is put in force for a two-card run.
"""

from __future__ import annotations

from . import discovery
from .probe import probe_in_subprocess


class Refused(RuntimeError):
    """No usable card: the message is the one-line cause."""


def real_ttnn(devices: list[int] | None, need: int = 1):
    """Return ``(ttnn, probe)`` for the selected cards, or raise Refused."""
    try:
        discovery.select_cards(devices)
    except RuntimeError as exc:
        raise Refused(str(exc)) from None
    probe = probe_in_subprocess(devices, need=need)
    if not probe.ok:
        raise Refused(probe.cause)
    discovery.use_mesh_graph(probe.num_chips)
    import ttnn

    return ttnn, probe
