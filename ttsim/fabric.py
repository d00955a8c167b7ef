"""System configuration that real ttnn takes BEFORE a mesh opens: fabric, dispatch cores, arch.

Mirrors ttnn 0.81.1 (names, enum members and signatures from the conformance dump):
``set_fabric_config(config, reliability_mode=STRICT_INIT, num_planes=None, fabric_tensix_config=DISABLED,
fabric_udm_mode=DISABLED, fabric_manager_mode=DEFAULT, router_config=FabricRouterConfig())`` stores the
fabric the NEXT ``open_mesh_device`` comes up with (``get_fabric_config`` reads it back), and
``DispatchCoreConfig(type=None, axis=None, fabric_tensix_config=None)`` resolves its defaults the way
the real one does for a P150 cluster (measured under the mock cluster: WORKER / COL), refusing the ROW
axis on Blackhole unless fabric tensix MUX is enabled, with the real error text.
"""

from __future__ import annotations

import enum

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
    """Router tuning; ttsim keeps the one field real ttnn exposes (None = the runtime's choice)."""

    def __init__(self) -> None:
        self.max_packet_payload_size_bytes = None

    def __repr__(self) -> str:  # the real nanobind repr (the conformance dump drops the address)
        return "<ttnn._ttnn.fabric.FabricRouterConfig object>"


_DEFAULT_ROUTER = FabricRouterConfig()


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


class _SystemState:
    """What was configured for the next mesh to open (module-level, as in the real runtime)."""

    fabric_config: FabricConfig = FabricConfig.DISABLED
    reliability_mode: FabricReliabilityMode = FabricReliabilityMode.STRICT_INIT
    fabric_tensix_config: FabricTensixConfig = FabricTensixConfig.DISABLED


state = _SystemState()


def set_fabric_config(
    config: FabricConfig,
    reliability_mode: FabricReliabilityMode = FabricReliabilityMode.STRICT_INIT,
    num_planes: int | None = None,
    fabric_tensix_config: FabricTensixConfig = FabricTensixConfig.DISABLED,
    fabric_udm_mode: FabricUDMMode = FabricUDMMode.DISABLED,
    fabric_manager_mode: FabricManagerMode = FabricManagerMode.DEFAULT,
    router_config: FabricRouterConfig = _DEFAULT_ROUTER,
) -> None:
    """Configure the fabric the next ``open_mesh_device`` brings up (call BEFORE opening)."""
    for name, value, kind in (("config", config, FabricConfig), ("reliability_mode", reliability_mode, FabricReliabilityMode),
                              ("fabric_tensix_config", fabric_tensix_config, FabricTensixConfig),
                              ("fabric_udm_mode", fabric_udm_mode, FabricUDMMode),
                              ("fabric_manager_mode", fabric_manager_mode, FabricManagerMode)):
        if not isinstance(value, kind):
            raise TypeError(f"set_fabric_config: {name} must be a {kind.__name__}, got {value!r}")
    if not isinstance(router_config, FabricRouterConfig):
        raise TypeError(f"set_fabric_config: router_config must be a FabricRouterConfig, got {router_config!r}")
    if num_planes is not None and (not isinstance(num_planes, int) or num_planes <= 0):
        raise TypeError(f"set_fabric_config: num_planes must be a positive int or None, got {num_planes!r}")
    state.fabric_config = config
    state.reliability_mode = reliability_mode
    state.fabric_tensix_config = fabric_tensix_config


def get_fabric_config() -> FabricConfig:
    return state.fabric_config


def get_arch_name() -> str:
    """The simulated chips are Blackhole (p150a)."""
    return "blackhole"
