"""ttnn.WormholeComputeKernelConfig (the compute-kernel config Blackhole code passes too) and
ttnn.ThrottleLevel. A placement/precision hint for ttsim (see ttsim/hints.py): ops validate
that it is one, and compute in fp32 whatever it asks for."""

from __future__ import annotations

import enum

from .types import MathFidelity, TTFatal, _tt_enum


@_tt_enum
class ThrottleLevel(enum.Enum):
    NO_THROTTLE = 0
    LEVEL_1 = 1
    LEVEL_2 = 2
    LEVEL_3 = 3
    LEVEL_4 = 4
    LEVEL_5 = 5


class WormholeComputeKernelConfig:
    def __init__(self, *, math_fidelity: MathFidelity = MathFidelity.Invalid, math_approx_mode: bool = True,
                 fp32_dest_acc_en: bool = False, packer_l1_acc: bool = False, dst_full_sync_en: bool = False,
                 throttle_level: ThrottleLevel = ThrottleLevel.NO_THROTTLE):
        if not isinstance(math_fidelity, MathFidelity):
            raise TTFatal(f"WormholeComputeKernelConfig: math_fidelity must be a ttnn.MathFidelity, got {math_fidelity!r}")
        if not isinstance(throttle_level, ThrottleLevel):
            raise TTFatal(f"WormholeComputeKernelConfig: throttle_level must be a ttnn.ThrottleLevel, "
                          f"got {throttle_level!r}")
        self.math_fidelity = math_fidelity
        self.math_approx_mode = bool(math_approx_mode)
        self.fp32_dest_acc_en = bool(fp32_dest_acc_en)
        self.packer_l1_acc = bool(packer_l1_acc)
        self.dst_full_sync_en = bool(dst_full_sync_en)
        self.throttle_level = throttle_level

    def __repr__(self) -> str:  # as ttnn prints it (no fields)
        return "<ttnn._ttnn.operations.core.WormholeComputeKernelConfig object>"


def init_device_compute_kernel_config(arch, device_kernel_config: WormholeComputeKernelConfig | None = None, *,
                                      math_fidelity: MathFidelity = MathFidelity.LoFi, math_approx_mode: bool = True,
                                      fp32_dest_acc_en: bool = False, packer_l1_acc: bool = False,
                                      dst_full_sync_en: bool = False,
                                      throttle_level: ThrottleLevel = ThrottleLevel.NO_THROTTLE
                                      ) -> WormholeComputeKernelConfig:
    """tt-metal's init_device_compute_kernel_config: ``device_kernel_config`` when given, else a
    config of the keyword defaults (Wormhole and Blackhole both take WormholeComputeKernelConfig)."""
    if device_kernel_config is not None:
        if not isinstance(device_kernel_config, WormholeComputeKernelConfig):
            raise TTFatal(f"init_device_compute_kernel_config: device_kernel_config must be a "
                          f"ttnn.WormholeComputeKernelConfig, got {device_kernel_config!r}")
        return device_kernel_config
    return WormholeComputeKernelConfig(math_fidelity=math_fidelity, math_approx_mode=math_approx_mode,
                                       fp32_dest_acc_en=fp32_dest_acc_en, packer_l1_acc=packer_l1_acc,
                                       dst_full_sync_en=dst_full_sync_en, throttle_level=throttle_level)
