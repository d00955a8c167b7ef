"""The fabric: ttnn.set_fabric_config / get_fabric_config and their enums (ttnn._ttnn.fabric),
plus the dispatch-core config and arch name real ttnn takes before a mesh opens.

On a card the fabric is process-wide state that ``open_mesh_device`` reads to bring up the
ethernet routers; collectives need it. ttsim keeps the same state and the same rules, with
tt-metal's words (found in the 0.81.1 libtt_metal.so and tt-metal's source):

- changing from one enabled config to another without DISABLED in between is a TT_FATAL
  (``MetalEnvImpl::set_fabric_config``; checked against the real package by conformance);
- enabling a fabric while devices are open is a TT_FATAL;
- a 1-chip mesh cannot open with a fabric enabled (checked by ``api.open_*``);
- a collective on a multi-chip mesh opened without a fabric, or whose fabric was torn down
  since, is a TT_FATAL (``ControlPlane::get_fabric_context``; checked by ``ops.base.run_collective``).
"""

from __future__ import annotations

import enum

from . import chips
from .types import TTFatal, _tt_enum


@_tt_enum
class FabricConfig(enum.Enum):
    DISABLED = 0
    FABRIC_1D_NEIGHBOR_EXCHANGE = 1
    FABRIC_1D = 2
    FABRIC_1D_RING = 3
    FABRIC_2D = 4
    FABRIC_2D_TORUS_X = 5
    FABRIC_2D_TORUS_Y = 6
    FABRIC_2D_TORUS_XY = 7
    CUSTOM = 8


@_tt_enum
class FabricReliabilityMode(enum.Enum):
    STRICT_INIT = 0
    RELAXED_INIT = 1
    DYNAMIC_RECONFIG = 2


@_tt_enum
class FabricTensixConfig(enum.Enum):
    DISABLED = 0
    MUX = 1


@_tt_enum
class FabricUDMMode(enum.Enum):
    DISABLED = 0
    ENABLED = 1


@_tt_enum
class FabricManagerMode(enum.Enum):
    ENABLED = 0
    INIT_FABRIC = 1
    TERMINATE_FABRIC = 2
    DEFAULT = 3


class FabricRouterConfig:
    """ttnn.FabricRouterConfig: router overrides (accepted, not modelled)."""

    def __init__(self):
        self.max_packet_payload_size_bytes = None

    def __repr__(self) -> str:  # the real object's repr, without its address
        return "<ttnn._ttnn.fabric.FabricRouterConfig object>"


_config = FabricConfig.DISABLED


def get_fabric_config() -> FabricConfig:
    return _config


def set_fabric_config(
    config: FabricConfig,
    reliability_mode: FabricReliabilityMode = FabricReliabilityMode.STRICT_INIT,
    num_planes: int | None = None,
    fabric_tensix_config: FabricTensixConfig = FabricTensixConfig.DISABLED,
    fabric_udm_mode: FabricUDMMode = FabricUDMMode.DISABLED,
    fabric_manager_mode: FabricManagerMode = FabricManagerMode.DEFAULT,
    router_config: FabricRouterConfig = FabricRouterConfig(),
) -> None:
    """Set the process-wide fabric config; call it BEFORE ``open_mesh_device`` (tt-metal's rule)."""
    global _config
    if not isinstance(config, FabricConfig):
        raise TypeError(f"set_fabric_config(): config must be a ttnn.FabricConfig, got {config!r}")
    if config == FabricConfig.DISABLED or _config == FabricConfig.DISABLED:
        if config != FabricConfig.DISABLED and config != _config:
            chips.refuse_fabric_while_open(config.name)
        _config = config
    elif config != _config:
        raise TTFatal(f"Tried to override previous value of fabric config: {_config.name}, with: {config.name}")


def check_open(n_chips: int, what: str) -> FabricConfig:
    """The fabric a mesh of ``n_chips`` opens with; a 1-chip mesh cannot open with one enabled."""
    if n_chips < 2 and _config != FabricConfig.DISABLED:
        raise TTFatal(
            f"{what}: Fabric config {_config.name} requires at least 2 participating chips, but the opened mesh has "
            f"{n_chips} local device(s) on a single host. Either open a larger mesh (e.g. a MeshShape with >= 2 "
            "devices) or call SetFabricConfig(FabricConfig::DISABLED) before opening a 1-chip mesh."
        )
    return _config


def check_collective(device, op: str) -> None:
    """A collective across chips needs the fabric the mesh opened with, still up."""
    if device.get_num_devices() < 2:
        return
    if device.fabric_config == FabricConfig.DISABLED or _config == FabricConfig.DISABLED:
        why = ("it opened with FabricConfig.DISABLED: call ttnn.set_fabric_config(ttnn.FabricConfig.FABRIC_1D) "
               "before open_mesh_device" if device.fabric_config == FabricConfig.DISABLED
               else "the fabric was set to DISABLED while it was open")
        raise TTFatal(f"Trying to get un-initialized fabric context ({op} on {device!r}: {why})")


@_tt_enum
class DispatchCoreType(enum.Enum):
    WORKER = 0
    ETH = 1


@_tt_enum
class DispatchCoreAxis(enum.Enum):
    ROW = 0
    COL = 1


class DispatchCoreConfig:
    """Which cores run dispatch. Defaults resolve as the real one does on a P150 cluster."""

    def __init__(self, type=None, axis=None, fabric_tensix_config=None):  # noqa: A002 - ttnn's names
        if type is not None and not isinstance(type, DispatchCoreType):
            raise TTFatal(f"DispatchCoreConfig: type must be a DispatchCoreType, got {type!r}")
        if axis is not None and not isinstance(axis, DispatchCoreAxis):
            raise TTFatal(f"DispatchCoreConfig: axis must be a DispatchCoreAxis, got {axis!r}")
        if axis is DispatchCoreAxis.ROW and fabric_tensix_config is not FabricTensixConfig.MUX:
            # the real text (ttnn/core/device.cpp create_cluster_aware_dispatch_config, 0.81.1)
            raise TTFatal("ROW dispatch core axis is not supported for blackhole arch unless fabric tensix MUX "
                          "is enabled")
        self.type = DispatchCoreType.WORKER if type is None else type
        self.axis = DispatchCoreAxis.COL if axis is None else axis

    def __repr__(self) -> str:
        return f"DispatchCoreConfig(type={self.type}, axis={self.axis})"

    def __eq__(self, other) -> bool:
        return isinstance(other, DispatchCoreConfig) and (self.type, self.axis) == (other.type, other.axis)

    __hash__ = None


def get_arch_name() -> str:
    """The simulated chips are Blackhole (p150a)."""
    return "blackhole"
