"""A stand-in for the REAL ttnn, for testing hil's session logic only (never a proof about cards).

It re-exports a private copy of ttsim (loaded as ``_fake_card_sim``: like a card's ttnn it shares
no module, and no seed, with the simulator, so ``ttsim`` in ``sys.modules`` means the harness
imported it), says it is "real" the way hil checks (a ``_ttnn`` attribute), sees
``FAKE_TTNN_CARDS`` cards (default 2) filtered by TT_VISIBLE_DEVICES, and appends every
device-level call, plus the environment it was imported with, to ``FAKE_TTNN_LOG`` (JSON lines).
"""

import importlib.util
import json
import os
import sys
from pathlib import Path


def _private_sim():
    root = Path(importlib.util.find_spec("ttsim").origin).parent  # found, not imported
    spec = importlib.util.spec_from_file_location("_fake_card_sim", root / "__init__.py",
                                                  submodule_search_locations=[str(root)])
    sim = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = sim
    spec.loader.exec_module(sim)
    return sim


_sim = _private_sim()
globals().update({name: getattr(_sim, name) for name in _sim.__all__})

__version__ = "0.81.1+fake"
_ttnn = "fake compiled module"


def _log(event, **kw):
    path = os.environ.get("FAKE_TTNN_LOG")
    if path:
        with open(path, "a") as f:
            f.write(json.dumps({"event": event, "pid": os.getpid(), **kw}, default=str) + "\n")


_log("import", visible=os.environ.get("TT_VISIBLE_DEVICES"), mgd=os.environ.get("TT_MESH_GRAPH_DESC_PATH"))


def GetNumAvailableDevices():
    cards = int(os.environ.get("FAKE_TTNN_CARDS", "2"))
    visible = os.environ.get("TT_VISIBLE_DEVICES")
    if visible:
        return len([i for i in visible.split(",") if int(i) < cards])
    return cards


def set_fabric_config(*args, **kwargs):
    _log("set_fabric_config", args=[str(a) for a in args])
    return _sim.set_fabric_config(*args, **kwargs)


def open_mesh_device(*args, **kwargs):
    _log("open_mesh_device", kwargs=sorted(kwargs), shape=str(kwargs.get("mesh_shape")),
         fabric=str(_sim.get_fabric_config()), dispatch=str(kwargs.get("dispatch_core_config")))
    return _sim.open_mesh_device(*args, **kwargs)


def close_mesh_device(mesh):
    _log("close_mesh_device")
    return _sim.close_mesh_device(mesh)
