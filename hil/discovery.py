"""Which cards are there, and may a hardware run use them? (torch-free; imports ttnn lazily)

``probe()`` answers in-process; it is what ``python -m hil.probe`` runs, and the pytest plugin runs
that module in a SUBPROCESS of the same interpreter, so the pytest process itself never
imports ttnn before the environment (``TT_VISIBLE_DEVICES``) is final and never holds the cards.

A run is refused (``Probe.ok`` False, ``cause`` one line) when:
- the real ttnn is not importable on this Python (0.81.1 ships cp310/cp312 wheels only);
- ``TT_METAL_MOCK_CLUSTER_DESC_PATH`` is set: a mock cluster reports a P150 that does not exist;
- no card is found (the real runtime's own cause, e.g. ``TT_FATAL num_chips > 0: No chips
  detected in the cluster``);
- fewer cards are found than ``--hil-devices`` selects or the run needs.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import settings

VISIBLE_ENV = "TT_VISIBLE_DEVICES"
MOCK_ENV = "TT_METAL_MOCK_CLUSTER_DESC_PATH"
MGD_ENV = "TT_MESH_GRAPH_DESC_PATH"
#: the mesh graph descriptor for a one-cable p150a pair (2 ethernet channels), shipped with hil
MESH_GRAPH = Path(__file__).resolve().parent / "mesh_graphs" / "p150a_x2_1cable_mesh_graph_descriptor.textproto"
SETUP_HINT = "see docs/hardware.md 'On the hardware host'"


@dataclass
class Probe:
    ok: bool
    cause: str | None
    python: str
    ttnn_version: str | None = None
    ttnn_path: str | None = None
    num_chips: int | None = None
    card_ids: list[int] = field(default_factory=list)
    cluster_type: str | None = None
    arch: str | None = None
    visible_devices: str | None = None

    def as_json(self) -> dict:
        return asdict(self)


def python_description() -> str:
    return f"Python {sys.version.split()[0]} ({sys.executable})"


def parse_devices(text: str | None) -> list[int] | None:
    """``"0,1"`` -> ``[0, 1]``; None or ``"all"`` -> None (every card). Raises ValueError naming the text."""
    if text is None or text.strip().lower() in ("", "all"):
        return None
    ids = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit():
            raise ValueError(f"--hil-devices: {text!r} is not a comma-separated list of card ids (e.g. 0,1)")
        ids.append(int(part))
    if len(set(ids)) != len(ids):
        raise ValueError(f"--hil-devices: {text!r} names a card twice")
    return ids


def select_cards(devices: list[int] | None, environ=None) -> None:
    """Make only ``devices`` visible to ttnn (TT_VISIBLE_DEVICES). Must precede ``import ttnn``."""
    environ = settings.process_environ() if environ is None else environ
    if devices is None:
        return
    if "ttnn" in sys.modules:
        raise RuntimeError(f"{VISIBLE_ENV} must be set before ttnn is imported, and ttnn is already imported")
    environ[VISIBLE_ENV] = ",".join(str(d) for d in devices)


def use_mesh_graph(num_chips: int, environ=None) -> str | None:
    """Point TT_MESH_GRAPH_DESC_PATH at our 1x2 one-cable descriptor for a two-card run, unless the
    user set it. Returns the path in force (or None)."""
    environ = settings.process_environ() if environ is None else environ
    if environ.get(MGD_ENV):
        return environ[MGD_ENV]
    if num_chips == 2:
        environ[MGD_ENV] = str(MESH_GRAPH)
        return environ[MGD_ENV]
    return None


_FATAL = re.compile(r"TT_(?:FATAL|THROW) @ (?P<where>\S+): (?P<cond>[^\n]*)(?:\ninfo:\n(?P<info>[^\n]*))?")


def runtime_cause(exc: BaseException) -> str:
    """One line from a tt-metal exception: ``TT_FATAL num_chips > 0: No chips detected in the cluster
    (tt_cluster.cpp:129)`` instead of a 40-line backtrace."""
    text = str(exc)
    m = _FATAL.search(text)
    if not m:
        first = text.strip().splitlines()[0] if text.strip() else ""
        return f"{type(exc).__name__}: {first}"
    kind = "TT_FATAL" if "TT_FATAL" in m.group(0) else "TT_THROW"
    info = f": {m.group('info').strip()}" if m.group("info") else ""
    return f"{kind} {m.group('cond').strip()}{info} ({os.path.basename(m.group('where'))})"


def _real_ttnn():
    """Import the real ttnn or say in one line why not."""
    try:
        import ttnn
    except Exception as exc:  # noqa: BLE001 - any import failure means: no hardware backend here
        v = sys.version_info
        return None, (f"the real ttnn is not importable on {python_description()}: {type(exc).__name__}: {exc}; "
                      f"ttnn 0.81.1 ships wheels for Python 3.10/3.12 only (this is {v.major}.{v.minor}); "
                      f"{SETUP_HINT}")
    if not hasattr(ttnn, "_ttnn"):
        return None, (f"the `ttnn` importable here ({getattr(ttnn, '__file__', '?')}) is not the real package "
                      f"(it has no compiled ttnn._ttnn); {SETUP_HINT}")
    return ttnn, None


def _version(ttnn) -> str:
    try:
        from importlib.metadata import version

        return version("ttnn")
    except Exception:  # noqa: BLE001 - a tt-metal source build may have no distribution metadata
        return str(getattr(ttnn, "__version__", "unknown"))


def probe(devices: list[int] | None = None, need: int = 1, environ=None) -> Probe:
    """Look for cards through the real ttnn (imported here, after TT_VISIBLE_DEVICES is set)."""
    environ = settings.process_environ() if environ is None else environ
    select_cards(devices, environ)
    ttnn, cause = _real_ttnn()
    if ttnn is None:
        return Probe(ok=False, cause=cause, python=python_description(), visible_devices=environ.get(VISIBLE_ENV))
    return inspect(ttnn, devices, need, environ)


def inspect(ttnn, devices: list[int] | None = None, need: int = 1, environ=None) -> Probe:
    """The verdict on an imported (real) ttnn: mock cluster, no card, too few cards, or ok."""
    environ = settings.process_environ() if environ is None else environ
    pr = Probe(ok=False, cause=None, python=python_description(), visible_devices=environ.get(VISIBLE_ENV))
    pr.ttnn_version, pr.ttnn_path = _version(ttnn), os.path.dirname(getattr(ttnn, "__file__", "") or "")
    if environ.get(MOCK_ENV):
        seen = ""
        try:
            seen = f" (ttnn reports {ttnn.GetNumAvailableDevices()} chip(s), cluster type " \
                   f"{ttnn.cluster.get_cluster_type()})"
        except Exception as exc:  # noqa: BLE001
            seen = f" ({runtime_cause(exc)})"
        pr.cause = (f"{MOCK_ENV} is set ({environ[MOCK_ENV]}): a mock cluster describes chips that do not exist"
                    f"{seen}; unset it to run on cards")
        return pr
    try:
        n = int(ttnn.GetNumAvailableDevices())
    except Exception as exc:  # noqa: BLE001 - the runtime's own reason is the cause
        pr.cause = f"no Tenstorrent card found: {runtime_cause(exc)}"
        return pr
    pr.num_chips = n
    pr.card_ids = list(devices) if devices is not None else list(range(n))
    for attr, fn in (("cluster_type", lambda: ttnn.cluster.get_cluster_type()), ("arch", ttnn.get_arch_name)):
        try:
            setattr(pr, attr, str(fn()))
        except Exception:  # noqa: BLE001 - informational only
            pass
    if n == 0:
        pr.cause = "no Tenstorrent card found: GetNumAvailableDevices() returned 0"
    elif devices is not None and n != len(devices):
        pr.cause = (f"--hil-devices {','.join(map(str, devices))} selects {len(devices)} card(s) but ttnn sees {n} "
                    f"with {VISIBLE_ENV}={environ.get(VISIBLE_ENV)}")
    elif n < need:
        pr.cause = f"found {n} card(s); the run needs {need} (a 1x{need} mesh)"
    else:
        pr.ok = True
    return pr
