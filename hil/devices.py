"""Opening and closing devices the way tt-metal's root conftest does, for ANY ttnn-like module.

The same path serves ttsim and the real ttnn, so a green simulator run has opened its meshes
exactly as a card run will. What tt-metal does (conftest.py ``mesh_device`` / ``set_fabric`` /
``reset_fabric`` and tests/scripts/common.py ``get_updated_device_params``):

- ``device_params`` is split: the fabric keys (``fabric_config``, ``fabric_tensix_config``,
  ``reliability_mode``, ``fabric_manager``) are popped, because ``open_mesh_device`` has no such
  keywords, and the fabric is configured with ``set_fabric_config`` BEFORE the mesh opens.
  Default here: FABRIC_1D for a multi-chip mesh, no fabric for one chip (initialising a fabric
  for one chip of a multi-card box can time out).
- ``dispatch_core_axis`` / ``dispatch_core_type`` become a ``DispatchCoreConfig``. On Blackhole a
  ROW axis is forced to COL unless a fabric is set with fabric tensix MUX (the real runtime throws "ROW dispatch core axis is not supported for blackhole arch unless fabric
  tensix MUX is enabled"); the type defaults to WORKER, as qwen36 uses on P150.
- ``trace_region_size`` / ``num_command_queues`` / ``l1_small_size`` / ``worker_l1_size`` pass
  through untouched (0.81.1's defaults are 0 and 1: whoever traces must ask for a region).
- Teardown: submeshes close before their parent, then the mesh, then the fabric is reset to
  DISABLED (only if one was set), even when a close fails.

Imports neither torch nor ttnn: the module is handed the ttnn-like module to use.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

FABRIC_KEYS = ("fabric_config", "fabric_tensix_config", "reliability_mode", "fabric_manager")
_UNSET = object()


class DeviceParamsError(ValueError):
    """device_params that cannot be turned into an open call (names the key)."""


@dataclass
class Prepared:
    """What to configure and what to pass, derived from ``device_params`` for one mesh."""

    fabric: tuple | None  # positional args of set_fabric_config, or None for no fabric
    open_kwargs: dict = field(default_factory=dict)


@dataclass
class Opened:
    mesh: object
    fabric: tuple | None


def is_blackhole(ttnn) -> bool:
    return "blackhole" in str(ttnn.get_arch_name()).lower()


def prepare(ttnn, device_params: dict, num_chips: int) -> Prepared:
    """Split ``device_params`` for a mesh of ``num_chips`` chips (see the module docstring)."""
    if not isinstance(device_params, dict):
        raise DeviceParamsError(f"device_params must be a dict, got {type(device_params).__name__}")
    p = dict(device_params)
    fabric_config = p.pop("fabric_config", _UNSET)
    tensix = p.pop("fabric_tensix_config", None)
    reliability = p.pop("reliability_mode", None)
    manager = p.pop("fabric_manager", None)
    if fabric_config is _UNSET:
        fabric_config = ttnn.FabricConfig.FABRIC_1D if num_chips > 1 else None
    if fabric_config == ttnn.FabricConfig.DISABLED:
        fabric_config = None
    if fabric_config is not None and num_chips == 1:
        # tt-metal's model conftests drop the fabric for a single device
        fabric_config = None
    if fabric_config is not None and not isinstance(fabric_config, ttnn.FabricConfig):
        raise DeviceParamsError(f"device_params['fabric_config'] must be a ttnn.FabricConfig, got {fabric_config!r}")

    if "dispatch_core_config" not in p:
        axis = p.pop("dispatch_core_axis", None)
        core_type = p.pop("dispatch_core_type", None)
        if is_blackhole(ttnn):
            if axis == ttnn.DispatchCoreAxis.ROW and not (fabric_config is not None
                                                           and tensix == ttnn.FabricTensixConfig.MUX):
                warnings.warn("Blackhole does not support DispatchCoreAxis.ROW without fabric tensix MUX; using COL",
                              stacklevel=3)
                axis = ttnn.DispatchCoreAxis.COL
            if core_type is None:
                core_type = ttnn.DispatchCoreType.WORKER
        p["dispatch_core_config"] = ttnn.DispatchCoreConfig(core_type, axis, tensix)
    elif "dispatch_core_axis" in p or "dispatch_core_type" in p:
        raise DeviceParamsError("device_params: give either dispatch_core_config or dispatch_core_axis/_type, not both")

    fabric = None
    if fabric_config is not None:
        fabric = (fabric_config,
                  reliability if reliability is not None else ttnn.FabricReliabilityMode.STRICT_INIT,
                  None,  # num_planes: the runtime's choice (the live link count)
                  tensix if tensix is not None else ttnn.FabricTensixConfig.DISABLED,
                  ttnn.FabricUDMMode.DISABLED,
                  manager if manager is not None else ttnn.FabricManagerMode.DEFAULT)
    return Prepared(fabric, p)


def mesh_shape(ttnn, param):
    """tt-metal's mesh_device param: an int n (a 1 x n mesh) or a (rows, cols) tuple."""
    if isinstance(param, bool) or not (isinstance(param, int) or (isinstance(param, (tuple, list)) and len(param) == 2
                                                                  and all(isinstance(x, int) for x in param))):
        raise DeviceParamsError(f"mesh_device param must be an int or (rows, cols), got {param!r}")
    rows, cols = (1, param) if isinstance(param, int) else param
    if rows <= 0 or cols <= 0:
        raise DeviceParamsError(f"mesh_device param must be positive, got {param!r}")
    return ttnn.MeshShape(rows, cols)


def open_mesh(ttnn, shape, device_params: dict | None = None, physical_device_ids=None) -> Opened:
    """Configure the fabric, then open ``shape`` (a MeshShape) with the remaining parameters."""
    prep = prepare(ttnn, device_params or {}, shape.mesh_size())
    kwargs = dict(prep.open_kwargs)
    if physical_device_ids is not None:
        kwargs["physical_device_ids"] = list(physical_device_ids)
    if prep.fabric is not None:
        ttnn.set_fabric_config(*prep.fabric)
    try:
        mesh = ttnn.open_mesh_device(mesh_shape=shape, **kwargs)
    except BaseException:
        if prep.fabric is not None:
            ttnn.set_fabric_config(ttnn.FabricConfig.DISABLED)
        raise
    return Opened(mesh, prep.fabric)


def open_device(ttnn, device_id: int = 0, device_params: dict | None = None) -> Opened:
    """One chip, as a 1x1 mesh (0.81.1's device IS a MeshDevice; this form also takes
    ``num_command_queues``, which ``ttnn.open_device`` does not)."""
    return open_mesh(ttnn, ttnn.MeshShape(1, 1), device_params, physical_device_ids=[device_id])


def close(ttnn, opened: Opened) -> None:
    """Submeshes, then the mesh, then the fabric back to DISABLED (even if a close raised)."""
    mesh = opened.mesh
    try:
        get_submeshes = getattr(mesh, "get_submeshes", None)
        for sub in (get_submeshes() if get_submeshes else []):
            ttnn.close_mesh_device(sub)
        ttnn.close_mesh_device(mesh)
    finally:
        if opened.fabric is not None:
            ttnn.set_fabric_config(ttnn.FabricConfig.DISABLED)
