"""Value types mirroring ttnn's: dtypes, layouts, memory configs, shapes, errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

TILE_SIZE = 32
FACE_SIZE = 16


def _tt_enum(cls):
    """Make an enum print like ttnn's nanobind enums: ``DataType.BFLOAT16`` (repr and str)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}.{self.name}"

    cls.__repr__ = cls.__str__ = __repr__
    # members compare by identity, so identity hashing is consistent with it; enum's own hash
    # (of the member name) is a Python-level call on every dict and set lookup of the hot path.
    # (Neither orders anything this package outputs: a name's hash already changes with
    # PYTHONHASHSEED.)
    cls.__hash__ = object.__hash__
    return cls


@_tt_enum
class DataType(enum.Enum):
    BFLOAT16 = 0
    FLOAT32 = 1
    UINT32 = 2
    BFLOAT8_B = 3
    BFLOAT4_B = 4
    UINT8 = 5
    UINT16 = 6
    INT32 = 7
    FP8_E4M3 = 8
    INT8 = 9
    INVALID = 10


@_tt_enum
class Layout(enum.Enum):
    ROW_MAJOR = 0
    TILE = 1
    INVALID = 2


@_tt_enum
class BufferType(enum.Enum):
    DRAM = 0
    L1 = 1
    L1_SMALL = 3
    TRACE = 4


@_tt_enum
class TensorMemoryLayout(enum.Enum):
    INTERLEAVED = 0
    HEIGHT_SHARDED = 2
    WIDTH_SHARDED = 3
    BLOCK_SHARDED = 4
    ND_SHARDED = 5


@_tt_enum
class Arch(enum.Enum):
    """ttnn.Arch (ttnn._ttnn.device.Arch): what ``MeshDevice.arch()`` returns; ttsim's chips are BLACKHOLE."""
    WORMHOLE_B0 = 2
    BLACKHOLE = 3
    QUASAR = 4


@_tt_enum
class MathFidelity(enum.Enum):
    LoFi = 0
    HiFi2 = 2
    HiFi3 = 3
    HiFi4 = 4
    Invalid = 255


@_tt_enum
class ChunkGdnWyInverse(enum.Enum):
    """ttnn.ChunkGdnWyInverse: how chunk_gated_delta_rule inverts its WY matrix (ttsim: exact either way)."""

    AUTO = 0
    HORNER = 1
    FORWARD_SUBSTITUTION = 2


bfloat16 = DataType.BFLOAT16
float32 = DataType.FLOAT32
uint32 = DataType.UINT32
uint16 = DataType.UINT16
uint8 = DataType.UINT8
int32 = DataType.INT32
bfloat8_b = DataType.BFLOAT8_B
bfloat4_b = DataType.BFLOAT4_B
ROW_MAJOR_LAYOUT = Layout.ROW_MAJOR
TILE_LAYOUT = Layout.TILE

#: bytes per element in row-major layout
ELEMENT_SIZE = {
    DataType.BFLOAT16: 2,
    DataType.FLOAT32: 4,
    DataType.UINT32: 4,
    DataType.INT32: 4,
    DataType.UINT16: 2,
    DataType.UINT8: 1,
}
#: bytes per 32x32 tile: block floats keep 64 shared exponents (one per face row) up front
TILE_BYTES = {
    DataType.BFLOAT16: 2048,
    DataType.FLOAT32: 4096,
    DataType.UINT32: 4096,
    DataType.INT32: 4096,
    DataType.BFLOAT8_B: 64 + 1024,
    DataType.BFLOAT4_B: 64 + 512,
    DataType.UINT16: 2048,
    DataType.UINT8: 1024,
}
BLOCK_FLOATS = (DataType.BFLOAT8_B, DataType.BFLOAT4_B)
INTEGER_TYPES = (DataType.UINT32, DataType.INT32)


class ShardSpecBase:
    """What a MemoryConfig takes as ``shard_spec``: ttsim.sharding.ShardSpec, the one subclass
    (it lives there because it holds a CoreRangeSet, and grid.py builds on this module)."""

    __slots__ = ()


@dataclass(frozen=True)
class MemoryConfig:
    memory_layout: TensorMemoryLayout = TensorMemoryLayout.INTERLEAVED
    buffer_type: BufferType = BufferType.DRAM
    shard_spec: object = None

    def __post_init__(self):
        if self.shard_spec is not None and not isinstance(self.shard_spec, ShardSpecBase):
            raise TypeError(f"MemoryConfig: shard_spec must be a ttnn.ShardSpec or None, got {self.shard_spec!r}")

    def is_sharded(self) -> bool:
        return self.memory_layout != TensorMemoryLayout.INTERLEAVED

    def __repr__(self) -> str:  # ttnn's C++ format
        shard = "std::nullopt" if self.shard_spec is None else repr(self.shard_spec)
        return (f"MemoryConfig(memory_layout=TensorMemoryLayout::{self.memory_layout.name},"
                f"buffer_type=BufferType::{self.buffer_type.name},shard_spec={shard},nd_shard_spec=std::nullopt,"
                f"created_with_nd_shard_spec=0,per_core_allocation=0,range_lockstep_allocation=0)")


DRAM_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.L1)
# ttnn's sharded presets carry no shard spec (ops that take them derive one); placement only in ttsim
L1_HEIGHT_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.HEIGHT_SHARDED, BufferType.L1)
L1_WIDTH_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.WIDTH_SHARDED, BufferType.L1)
L1_BLOCK_SHARDED_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.BLOCK_SHARDED, BufferType.L1)


@_tt_enum
class ShardOrientation(enum.Enum):
    ROW_MAJOR = 0
    COL_MAJOR = 1


class ShardStrategy(enum.Enum):
    """ttnn.ShardStrategy: a plain Python enum in ttnn.types (it prints as ``<ShardStrategy.HEIGHT: 1>``)."""

    HEIGHT = 1
    WIDTH = 2
    BLOCK = 3


class Shape(tuple):
    """ttnn.Shape: a tuple of ints that prints like ttnn's."""

    def __new__(cls, shape):
        return tuple.__new__(cls, map(int, shape))

    @property
    def rank(self) -> int:
        return len(self)

    def to_rank(self, rank: int, /) -> "Shape":
        """Pad with leading 1s (or drop leading 1s) to ``rank`` dims."""
        dims = list(self)
        while len(dims) > rank:
            if dims[0] != 1:
                raise TTFatal(f"Shape.to_rank: cannot drop dim {dims[0]} of {self!r} to reach rank {rank}")
            dims.pop(0)
        return Shape([1] * (rank - len(dims)) + dims)

    def __eq__(self, other) -> bool:  # ttnn.Shape == [1, 2] and == (1, 2)
        return tuple.__eq__(self, tuple(other) if isinstance(other, list) else other)

    def __ne__(self, other) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = tuple.__hash__

    def __repr__(self) -> str:
        return f"Shape([{', '.join(map(str, self))}])"

    __str__ = __repr__


class MeshCoordinate:
    """ttnn.MeshCoordinate(c0, c1[, c2]) or MeshCoordinate([c0, ...]): a device's place in a mesh."""

    def __init__(self, *coords):
        if len(coords) == 1 and isinstance(coords[0], (tuple, list)):
            coords = tuple(coords[0])
        if not coords or not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in coords):
            raise TTFatal(f"MeshCoordinate needs non-negative int coordinates, got {coords!r}")
        self._coords = tuple(coords)

    def dims(self) -> int:
        return len(self._coords)

    def __getitem__(self, index: int) -> int:
        return self._coords[index]

    def __iter__(self):
        return iter(self._coords)

    def __eq__(self, other) -> bool:
        return isinstance(other, MeshCoordinate) and self._coords == other._coords

    def __hash__(self) -> int:
        return hash(self._coords)

    def __repr__(self) -> str:
        return f"MeshCoordinate([{', '.join(str(c) for c in self._coords)}])"


class MeshShape:
    """ttnn.MeshShape(rows, cols), or MeshShape([rows, cols]). Iterable and indexable; no len()."""

    def __init__(self, *dims):
        if len(dims) == 1 and isinstance(dims[0], (tuple, list)):
            dims = tuple(dims[0])
        if len(dims) != 2 or not all(isinstance(d, int) and d > 0 for d in dims):
            raise TTFatal(f"MeshShape needs two positive ints (rows, cols), got {dims!r}")
        self._dims = tuple(dims)

    def __getitem__(self, i: int) -> int:
        return self._dims[i]

    def __iter__(self):
        return iter(self._dims)

    def dims(self) -> int:
        """Number of mesh dimensions (ttsim meshes are 2-D)."""
        return len(self._dims)

    def mesh_size(self) -> int:
        return self._dims[0] * self._dims[1]

    def __eq__(self, other) -> bool:
        return tuple(self) == tuple(other) if isinstance(other, (MeshShape, tuple, list)) else NotImplemented

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        return f"MeshShape([{self._dims[0]}, {self._dims[1]}])"


@dataclass(frozen=True)
class CoreCoord:
    x: int
    y: int

    def __repr__(self) -> str:  # ttnn prints "x-y"
        return f"{self.x}-{self.y}"


class TTFatal(RuntimeError):
    """A ttnn-style fatal error: what was wrong, raised at the call that did it."""

    def __init__(self, message: str):
        super().__init__(f"TT_FATAL: {message}")


class TraceAllocationWarning(UserWarning):
    """Allocation while a trace is live: the trace may overwrite the new buffer."""


def tile_padded(shape: tuple[int, ...], hw: tuple[int, int] = (TILE_SIZE, TILE_SIZE)) -> tuple[int, ...]:
    """Storage shape in TILE layout: the last two dims round up to the tile's height and width
    (32x32 unless ``hw``; rank 1 pads its width only).

    This is ttsim's internal storage form; what ``Tensor.padded_shape`` reports is
    :func:`reported_padded_shape`.
    """
    dims = list(shape)
    if not dims:
        return tuple(hw)
    dims[-1] = -(-dims[-1] // hw[1]) * hw[1]
    if len(dims) >= 2:
        dims[-2] = -(-dims[-2] // hw[0]) * hw[0]
    return tuple(dims)


def reported_padded_shape(shape: tuple[int, ...], hw: tuple[int, int] = (TILE_SIZE, TILE_SIZE)) -> tuple[int, ...]:
    """``padded_shape`` of a TILE tensor as ttnn 0.81.1 reports it: the last two dims round up to 32.

    Rank 0 and 1 become rank 2 (``[5]`` -> ``[32, 32]``, ``[33]`` -> ``[32, 64]``); a 0-sized
    dim stays 0 (``[2, 0, 5]`` -> ``[2, 0, 32]``).
    """
    dims = list(shape)
    if len(dims) < 2:
        dims = [1] * (2 - len(dims)) + dims
    return tile_padded(tuple(dims), hw)
