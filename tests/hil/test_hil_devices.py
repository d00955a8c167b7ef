"""hil.devices: tt-metal's device_params conventions, on ttsim and on a recording ttnn-like module."""

from __future__ import annotations

import types
import warnings

import pytest

import ttsim
from hil import devices


class Recorder:
    """ttsim behind a log of the system-level calls (set_fabric_config / open / close)."""

    def __init__(self, fail_close: bool = False):
        self.calls = []
        self.fail_close = fail_close

    def __getattr__(self, name):
        return getattr(ttsim, name)

    def set_fabric_config(self, *args):
        self.calls.append(("set_fabric_config", args[0]))
        ttsim.set_fabric_config(*args)

    def open_mesh_device(self, **kw):
        self.calls.append(("open", str(kw["mesh_shape"]), ttsim.get_fabric_config(), sorted(kw)))
        return ttsim.open_mesh_device(**kw)

    def close_mesh_device(self, mesh):
        self.calls.append(("close", getattr(mesh, "name", "mesh")))
        if mesh is not None and not isinstance(mesh, types.SimpleNamespace):
            ttsim.close_mesh_device(mesh)
        if self.fail_close:
            raise RuntimeError("close failed")


def test_multichip_mesh_gets_fabric_1d_before_open_and_disabled_after_close():
    tt = Recorder()
    opened = devices.open_mesh(tt, tt.MeshShape(1, 2), {"trace_region_size": 50_000_000, "num_command_queues": 2})
    assert opened.mesh.get_num_devices() == 2
    devices.close(tt, opened)
    F = ttsim.FabricConfig
    assert tt.calls == [
        ("set_fabric_config", F.FABRIC_1D),
        ("open", "MeshShape([1, 2])", F.FABRIC_1D, ["dispatch_core_config", "mesh_shape", "num_command_queues",
                                                  "trace_region_size"]),
        ("close", "mesh"),
        ("set_fabric_config", F.DISABLED),
    ]


def test_single_chip_gets_no_fabric_even_if_asked():
    tt = Recorder()
    for params in ({}, {"fabric_config": ttsim.FabricConfig.FABRIC_1D}):
        devices.close(tt, devices.open_device(tt, 0, params))
    assert [c[0] for c in tt.calls] == ["open", "close", "open", "close"]
    assert all(c[2] == ttsim.FabricConfig.DISABLED for c in tt.calls if c[0] == "open")


def test_explicit_no_fabric_on_a_mesh_is_respected():
    tt = Recorder()
    devices.close(tt, devices.open_mesh(tt, tt.MeshShape(1, 2), {"fabric_config": ttsim.FabricConfig.DISABLED}))
    assert [c[0] for c in tt.calls] == ["open", "close"]


def test_blackhole_dispatch_rule():
    with pytest.warns(UserWarning, match="Blackhole does not support DispatchCoreAxis.ROW"):
        prep = devices.prepare(ttsim, {"dispatch_core_axis": ttsim.DispatchCoreAxis.ROW}, 2)
    assert prep.open_kwargs["dispatch_core_config"] == ttsim.DispatchCoreConfig(ttsim.DispatchCoreType.WORKER,
                                                                                ttsim.DispatchCoreAxis.COL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mux = devices.prepare(ttsim, {"dispatch_core_axis": ttsim.DispatchCoreAxis.ROW,
                                      "fabric_tensix_config": ttsim.FabricTensixConfig.MUX}, 2)
    assert mux.open_kwargs["dispatch_core_config"].axis == ttsim.DispatchCoreAxis.ROW
    assert mux.fabric[3] == ttsim.FabricTensixConfig.MUX
    # what the rule protects against: ttsim refuses ROW without MUX with the real runtime's text
    with pytest.raises(RuntimeError, match="ROW dispatch core axis is not supported for blackhole arch unless "
                                           "fabric tensix MUX is enabled"):
        ttsim.DispatchCoreConfig(None, ttsim.DispatchCoreAxis.ROW)


def test_submeshes_close_before_the_parent_and_fabric_resets_even_if_close_fails():
    tt = Recorder(fail_close=True)
    parent = types.SimpleNamespace(name="parent", get_submeshes=lambda: [types.SimpleNamespace(name="sub0"),
                                                                          types.SimpleNamespace(name="sub1")])
    with pytest.raises(RuntimeError, match="close failed"):
        devices.close(tt, devices.Opened(parent, (ttsim.FabricConfig.FABRIC_1D,)))
    assert tt.calls == [("close", "sub0"), ("set_fabric_config", ttsim.FabricConfig.DISABLED)]
    tt = Recorder()
    devices.close(tt, devices.Opened(parent, (ttsim.FabricConfig.FABRIC_1D,)))
    assert tt.calls == [("close", "sub0"), ("close", "sub1"), ("close", "parent"),
                        ("set_fabric_config", ttsim.FabricConfig.DISABLED)]


def test_a_failed_open_leaves_no_fabric_configured():
    tt = Recorder()
    with pytest.raises(RuntimeError, match="4 chips"):
        devices.open_mesh(tt, tt.MeshShape(1, 4), {})
    assert tt.calls[-1] == ("set_fabric_config", ttsim.FabricConfig.DISABLED)
    assert ttsim.get_fabric_config() == ttsim.FabricConfig.DISABLED


@pytest.mark.parametrize("params, match", [
    ([("trace_region_size", 1)], "device_params must be a dict"),
    ({"fabric_config": "FABRIC_1D"}, "must be a ttnn.FabricConfig"),
    ({"dispatch_core_config": None, "dispatch_core_axis": ttsim.DispatchCoreAxis.COL}, "either dispatch_core_config"),
])
def test_bad_device_params_name_the_key(params, match):
    with pytest.raises(devices.DeviceParamsError, match=match):
        devices.prepare(ttsim, params, 2)


@pytest.mark.parametrize("param, shape", [(2, (1, 2)), ((1, 2), (1, 2)), (1, (1, 1)), ([2, 1], (2, 1))])
def test_mesh_shape_param(param, shape):
    assert devices.mesh_shape(ttsim, param) == ttsim.MeshShape(*shape)


@pytest.mark.parametrize("param", [0, (1, 0), "2", (1, 2, 3), True, (1.0, 2)])
def test_bad_mesh_shape_param(param):
    with pytest.raises(devices.DeviceParamsError, match="mesh_device param"):
        devices.mesh_shape(ttsim, param)


@pytest.mark.simulator_only
def test_fixtures_open_through_hil_devices(mesh_device, ttnn):
    """The suite's own mesh_device fixture (sim backend) comes up with the fabric configured."""
    assert mesh_device.get_num_devices() == 2
    assert ttnn.get_fabric_config() == ttnn.FabricConfig.FABRIC_1D
