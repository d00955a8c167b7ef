"""ttnn's matmul program configs, and what ttsim takes from them.

A program config mostly schedules the kernel (core grid, blocking, multicast): those fields
are hints (ttsim/hints.py CONFIG_FIELDS). Two change what the op produces:

- ``fused_activation``: the card's kernel applies it to ``a @ b (+ bias)`` before packing
  the output (tt-metal's matmul program factories); ttsim applies it the same way.
- ``untilize_out`` (1D config): the output comes out ROW_MAJOR. Not modelled: refused.

Any other object passed as a matmul ``program_config`` is refused (tt-metal's
MatmulProgramConfig is a closed variant of these classes).
"""

from __future__ import annotations

from ..grid import CoreRangeSet
from ..types import CoreCoord, TTFatal
from .activation import UnaryOpType, UnaryWithParam


def _grid(value) -> CoreCoord:
    if isinstance(value, CoreCoord):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return CoreCoord(*value)  # nanobind converts an (x, y) tuple implicitly
    raise TTFatal(f"compute_with_storage_grid_size must be a ttnn.CoreCoord, got {value!r}")


def _activation(value) -> UnaryWithParam | None:
    """None, a UnaryOpType, an (op, param) tuple or a UnaryWithParam, as nanobind converts them."""
    if value is None or isinstance(value, UnaryWithParam):
        return value
    if isinstance(value, (UnaryOpType, tuple)):
        return UnaryWithParam(value)
    raise TTFatal(f"fused_activation must be a ttnn.UnaryWithParam (or UnaryOpType), got {value!r}")


class _MatmulProgramConfig:
    _FIELDS: tuple[str, ...] = ()

    def __repr__(self) -> str:  # ttnn prints the fields in declaration order
        return f"{type(self).__name__}(" + ",".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS) + ")"

    def __eq__(self, other) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self._FIELDS)

    __hash__ = None  # mutable, as ttnn's (its fields are read-write)


class MatmulMultiCoreReuseProgramConfig(_MatmulProgramConfig):
    _FIELDS = ("compute_with_storage_grid_size", "in0_block_w", "out_subblock_h", "out_subblock_w", "per_core_M",
               "per_core_N", "allowed_worker_cores")

    def __init__(self, *, compute_with_storage_grid_size, in0_block_w: int, out_subblock_h: int, out_subblock_w: int,
                 per_core_M: int, per_core_N: int, allowed_worker_cores=None):
        self.compute_with_storage_grid_size = _grid(compute_with_storage_grid_size)
        self.in0_block_w, self.out_subblock_h, self.out_subblock_w = in0_block_w, out_subblock_h, out_subblock_w
        self.per_core_M, self.per_core_N = per_core_M, per_core_N
        self.allowed_worker_cores = allowed_worker_cores


class MatmulMultiCoreReuseMultiCastProgramConfig(_MatmulProgramConfig):
    _FIELDS = ("compute_with_storage_grid_size", "in0_block_w", "out_subblock_h", "out_subblock_w", "out_block_h",
               "out_block_w", "per_core_M", "per_core_N", "transpose_mcast", "fused_activation", "fuse_batch",
               "allowed_worker_cores")

    def __init__(self, *, compute_with_storage_grid_size, in0_block_w: int, out_subblock_h: int, out_subblock_w: int,
                 out_block_h: int | None = None, out_block_w: int | None = None, per_core_M: int, per_core_N: int,
                 transpose_mcast: bool, fused_activation=None, fuse_batch: bool = True, allowed_worker_cores=None):
        self.compute_with_storage_grid_size = _grid(compute_with_storage_grid_size)
        self.in0_block_w, self.out_subblock_h, self.out_subblock_w = in0_block_w, out_subblock_h, out_subblock_w
        # unset output blocks default to the per-core block, as ttnn's constructor does
        self.out_block_h = per_core_M if out_block_h is None else out_block_h
        self.out_block_w = per_core_N if out_block_w is None else out_block_w
        self.per_core_M, self.per_core_N = per_core_M, per_core_N
        self.transpose_mcast = transpose_mcast
        self.fused_activation = _activation(fused_activation)
        self.fuse_batch = fuse_batch
        self.allowed_worker_cores = allowed_worker_cores


class MatmulMultiCoreReuseMultiCast1DProgramConfig(_MatmulProgramConfig):
    _FIELDS = ("compute_with_storage_grid_size", "in0_block_w", "out_subblock_h", "out_subblock_w", "out_block_h",
               "out_block_w", "per_core_M", "per_core_N", "fuse_batch", "fused_activation", "mcast_in0", "gather_in0",
               "hop_cores", "num_global_cb_receivers", "untilize_out", "allowed_worker_cores", "stream_in1")

    def __init__(self, *, compute_with_storage_grid_size, in0_block_w: int, out_subblock_h: int, out_subblock_w: int,
                 out_block_h: int | None = None, out_block_w: int | None = None, per_core_M: int, per_core_N: int,
                 fuse_batch: bool, fused_activation=None, mcast_in0: bool, gather_in0: bool = False,
                 hop_cores: CoreRangeSet = CoreRangeSet([]), num_global_cb_receivers: int = 1,  # noqa: B008 - immutable
                 untilize_out: bool = False, allowed_worker_cores=None, stream_in1: bool = False):
        self.compute_with_storage_grid_size = _grid(compute_with_storage_grid_size)
        self.in0_block_w, self.out_subblock_h, self.out_subblock_w = in0_block_w, out_subblock_h, out_subblock_w
        self.out_block_h = per_core_M if out_block_h is None else out_block_h
        self.out_block_w = per_core_N if out_block_w is None else out_block_w
        self.per_core_M, self.per_core_N = per_core_M, per_core_N
        self.fuse_batch = fuse_batch
        self.fused_activation = _activation(fused_activation)
        self.mcast_in0, self.gather_in0 = mcast_in0, gather_in0
        self.hop_cores = hop_cores
        self.num_global_cb_receivers = num_global_cb_receivers
        self.untilize_out = untilize_out
        self.allowed_worker_cores = allowed_worker_cores
        self.stream_in1 = stream_in1


class MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(_MatmulProgramConfig):
    _FIELDS = ("in0_block_w", "per_core_M", "per_core_N", "fused_activation", "num_workers_per_dram_bank")

    def __init__(self, *, in0_block_w: int, per_core_M: int, per_core_N: int, fused_activation=None,
                 num_workers_per_dram_bank: int = 1):
        self.in0_block_w, self.per_core_M, self.per_core_N = in0_block_w, per_core_M, per_core_N
        self.fused_activation = _activation(fused_activation)
        self.num_workers_per_dram_bank = num_workers_per_dram_bank


PROGRAM_CONFIGS = (MatmulMultiCoreReuseProgramConfig, MatmulMultiCoreReuseMultiCastProgramConfig,
                   MatmulMultiCoreReuseMultiCast1DProgramConfig, MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig)

#: fields that would change the result and ttsim does not model: refused when set (not default)
REFUSED_FIELDS = {"untilize_out": False}


def fused_activation_of(op: str, program_config) -> UnaryWithParam | None:
    """The activation a program config fuses into the kernel (validated), or None. Refuses a
    non-matmul config and any set field in REFUSED_FIELDS."""
    if program_config is None:
        return None
    if not isinstance(program_config, PROGRAM_CONFIGS):
        raise TTFatal(f"{op}: program_config must be one of ttnn's Matmul*ProgramConfig, got {program_config!r}")
    for name, default in REFUSED_FIELDS.items():
        value = getattr(program_config, name, default)
        if value != default:
            raise TTFatal(f"{op}: program_config.{name}={value!r} is not modelled by ttsim")
    return _activation(getattr(program_config, "fused_activation", None))  # attributes are writable: re-validate


__all__ = [c.__name__ for c in PROGRAM_CONFIGS]
