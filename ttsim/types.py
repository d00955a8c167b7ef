"""Value types mirroring ttnn's: dtypes, layouts, memory configs, shapes, errors."""

from __future__ import annotations

import enum
from dataclasses import dataclass

TILE_SIZE = 32
FACE_SIZE = 16


class DataType(enum.Enum):
    BFLOAT16 = 0
    FLOAT32 = 1
    UINT32 = 2
    BFLOAT8_B = 3
    BFLOAT4_B = 4
    UINT8 = 5
    UINT16 = 6
    INT32 = 7
    INVALID = 8

    def __repr__(self) -> str:
        return f"DataType.{self.name}"

    __str__ = __repr__


class Layout(enum.Enum):
    ROW_MAJOR = 0
    TILE = 1
    INVALID = 2

    def __repr__(self) -> str:
        return f"Layout.{self.name}"

    __str__ = __repr__


class BufferType(enum.Enum):
    DRAM = 0
    L1 = 1
    SYSTEM_MEMORY = 2
    L1_SMALL = 3
    TRACE = 4


class TensorMemoryLayout(enum.Enum):
    INTERLEAVED = 0
    HEIGHT_SHARDED = 2
    WIDTH_SHARDED = 3
    BLOCK_SHARDED = 4


class MathFidelity(enum.Enum):
    LoFi = 0
    HiFi2 = 2
    HiFi3 = 3
    HiFi4 = 4


bfloat16 = DataType.BFLOAT16
float32 = DataType.FLOAT32
uint32 = DataType.UINT32
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
}
#: bytes per 32x32 tile: block floats keep 64 shared exponents (one per face row) up front
TILE_BYTES = {
    DataType.BFLOAT16: 2048,
    DataType.FLOAT32: 4096,
    DataType.UINT32: 4096,
    DataType.INT32: 4096,
    DataType.BFLOAT8_B: 64 + 1024,
    DataType.BFLOAT4_B: 64 + 512,
}
BLOCK_FLOATS = (DataType.BFLOAT8_B, DataType.BFLOAT4_B)
INTEGER_TYPES = (DataType.UINT32, DataType.INT32)


@dataclass(frozen=True)
class MemoryConfig:
    memory_layout: TensorMemoryLayout = TensorMemoryLayout.INTERLEAVED
    buffer_type: BufferType = BufferType.DRAM
    shard_spec: object = None

    def is_sharded(self) -> bool:
        return self.memory_layout != TensorMemoryLayout.INTERLEAVED


DRAM_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.DRAM)
L1_MEMORY_CONFIG = MemoryConfig(TensorMemoryLayout.INTERLEAVED, BufferType.L1)


class Shape(tuple):
    """ttnn.Shape: a tuple of ints that prints like ttnn's."""

    def __new__(cls, dims):
        return super().__new__(cls, (int(d) for d in dims))

    @property
    def rank(self) -> int:
        return len(self)

    def __repr__(self) -> str:
        return f"Shape([{', '.join(map(str, self))}])"

    __str__ = __repr__


class MeshShape:
    """ttnn.MeshShape(rows, cols)."""

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

    def __len__(self) -> int:
        return 2

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


class TTFatal(RuntimeError):
    """A ttnn-style fatal error: what was wrong, raised at the call that did it."""

    def __init__(self, message: str):
        super().__init__(f"TT_FATAL: {message}")


class TraceAllocationWarning(UserWarning):
    """Allocation while a trace is live: the trace may overwrite the new buffer."""


def tile_padded(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Padded shape in TILE layout: the last two dims round up to 32 (rank 1 pads width)."""
    dims = list(shape)
    if not dims:
        return (TILE_SIZE, TILE_SIZE)
    dims[-1] = -(-dims[-1] // TILE_SIZE) * TILE_SIZE
    if len(dims) >= 2:
        dims[-2] = -(-dims[-2] // TILE_SIZE) * TILE_SIZE
    return tuple(dims)
