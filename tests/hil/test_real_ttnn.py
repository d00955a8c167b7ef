"""hil against the REAL ttnn 0.81.1 (Python 3.12 venv, no torch, no card): the proofs that need
no card. Every run here uses the real package; nothing is faked."""

from __future__ import annotations

import json

from hil_helpers import MOCK_CLUSTER, ROOT, clean_env, run

PROBE_JSON = "HIL-PROBE-JSON: "


def _verdict(out) -> dict:
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith(PROBE_JSON)]
    assert len(lines) == 1, out.stdout + out.stderr
    return json.loads(lines[0][len(PROBE_JSON):])


def test_probe_without_torch_refuses_with_the_runtimes_no_chips_cause(real_python, tmp_path):
    out = run([real_python, "-m", "hil.probe", "--json"], cwd=tmp_path, env=clean_env(PYTHONPATH=ROOT))
    assert out.returncode == 1, out.stdout + out.stderr
    v = _verdict(out)
    assert v["ok"] is False and v["ttnn_version"] == "0.81.1" and v["python"].startswith("Python 3.12")
    # the real runtime's own words, condensed to one line
    assert v["cause"] == ("no Tenstorrent card found: TT_FATAL num_chips > 0: No chips detected in the cluster "
                          "(tt_cluster.cpp:129)"), v["cause"]
    assert f"hil.probe: refusing: {v['cause']}" in out.stdout
    # and that venv cannot import torch at all, so nothing on this path needs it
    no_torch = run([real_python, "-c", "import importlib.util as u, hil.probe, hil.devices, hil.cards, hil.record, "
                    "hil.reset, hil.watchdog; print(u.find_spec('torch'))"], cwd=tmp_path, env=clean_env(PYTHONPATH=ROOT))
    assert no_torch.stdout.strip() == "None", no_torch.stdout + no_torch.stderr


def test_probe_refuses_a_mock_cluster_even_though_ttnn_reports_a_p150(real_python, tmp_path):
    env = clean_env(PYTHONPATH=ROOT, TT_METAL_MOCK_CLUSTER_DESC_PATH=MOCK_CLUSTER)
    out = run([real_python, "-m", "hil.probe", "--json"], cwd=tmp_path, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    cause = _verdict(out)["cause"]
    assert cause.startswith(f"TT_METAL_MOCK_CLUSTER_DESC_PATH is set ({MOCK_CLUSTER})"), cause
    assert "ttnn reports 1 chip(s), cluster type ClusterType.P150" in cause, cause


def test_probe_selects_cards_before_import_and_still_finds_none(real_python, tmp_path):
    out = run([real_python, "-m", "hil.probe", "--json", "--devices", "0,1"], cwd=tmp_path,
              env=clean_env(PYTHONPATH=ROOT))
    v = _verdict(out)
    assert out.returncode == 1 and v["visible_devices"] == "0,1"
    assert "No chips detected in the cluster" in v["cause"]
    bad = run([real_python, "-m", "hil.probe", "--devices", "0,x"], cwd=tmp_path, env=clean_env(PYTHONPATH=ROOT))
    assert bad.returncode == 2 and "not a comma-separated list of card ids" in bad.stderr


DEVICE_RULES = r"""
import inspect, json, warnings
import ttnn
from hil import devices
out = {}
try:
    ttnn.DispatchCoreConfig(None, ttnn.DispatchCoreAxis.ROW)
    out["raw_row"] = "accepted"
except RuntimeError as e:
    out["raw_row"] = [l for l in str(e).splitlines() if l.startswith("ROW")][0]
with warnings.catch_warnings(record=True):
    warnings.simplefilter("always")
    prod = devices.prepare(ttnn, {"dispatch_core_axis": ttnn.DispatchCoreAxis.ROW, "trace_region_size": 50000000,
                                  "num_command_queues": 2}, 2)
one = devices.prepare(ttnn, {}, 1)
mux = devices.prepare(ttnn, {"dispatch_core_axis": ttnn.DispatchCoreAxis.ROW,
                             "fabric_tensix_config": ttnn.FabricTensixConfig.MUX}, 2)
dc = prod.open_kwargs["dispatch_core_config"]
out["prod"] = {"axis": str(dc.axis), "type": str(dc.type), "fabric": [str(x) for x in prod.fabric],
               "keys": sorted(prod.open_kwargs)}
out["one"] = {"fabric": one.fabric, "axis": str(one.open_kwargs["dispatch_core_config"].axis)}
out["mux_axis"] = str(mux.open_kwargs["dispatch_core_config"].axis)
inspect.signature(ttnn.open_mesh_device).bind(mesh_shape=ttnn.MeshShape(1, 2), **prod.open_kwargs)
ttnn.set_fabric_config(*prod.fabric)
out["after_set"] = str(ttnn.get_fabric_config())
ttnn.set_fabric_config(ttnn.FabricConfig.DISABLED)
out["after_reset"] = str(ttnn.get_fabric_config())
print("RULES " + json.dumps(out))
"""


def test_device_params_rules_bind_to_the_real_package(real_python, tmp_path):
    """Under the mock cluster (host side only): the real DispatchCoreConfig refuses ROW on Blackhole,
    hil's rule turns it into COL; the fabric arguments and open keywords bind to the real
    set_fabric_config / open_mesh_device."""
    env = clean_env(PYTHONPATH=ROOT, TT_METAL_MOCK_CLUSTER_DESC_PATH=MOCK_CLUSTER)
    out = run([real_python, "-c", DEVICE_RULES], cwd=tmp_path, env=env)
    line = [ln for ln in out.stdout.splitlines() if ln.startswith("RULES ")]
    assert line, out.stdout[-3000:] + out.stderr[-3000:]
    r = json.loads(line[0][6:])
    assert r["raw_row"] == "ROW dispatch core axis is not supported for blackhole arch unless fabric tensix MUX is enabled"
    assert r["prod"] == {"axis": "DispatchCoreAxis.COL", "type": "DispatchCoreType.WORKER",
                         "fabric": ["FabricConfig.FABRIC_1D", "FabricReliabilityMode.STRICT_INIT", "None",
                                    "FabricTensixConfig.DISABLED", "FabricUDMMode.DISABLED", "FabricManagerMode.DEFAULT"],
                         "keys": ["dispatch_core_config", "num_command_queues", "trace_region_size"]}
    assert r["one"] == {"fabric": None, "axis": "DispatchCoreAxis.COL"}
    assert r["mux_axis"] == "DispatchCoreAxis.ROW"
    assert (r["after_set"], r["after_reset"]) == ("FabricConfig.FABRIC_1D", "FabricConfig.DISABLED")
