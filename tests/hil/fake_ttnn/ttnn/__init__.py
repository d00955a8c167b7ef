"""A stand-in for the REAL ttnn, for testing hil's session logic only (never a proof about cards).

It re-exports ttsim, says it is "real" the way hil checks (a ``_ttnn`` attribute), sees
``FAKE_TTNN_CARDS`` cards (default 2) filtered by TT_VISIBLE_DEVICES, and appends every
device-level call, plus the environment it was imported with, to ``FAKE_TTNN_LOG`` (JSON lines).
"""

import json
import os

import ttsim as _sim
from ttsim import *  # noqa: F401,F403
from ttsim import transformer, experimental  # noqa: F401

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
