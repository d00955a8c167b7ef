"""ttnn.Tile and what a tile shape changes in a TILE tensor's storage.

As 0.81.1's host path measures (tests/ttsim/test_tiles.py compares against values recorded
from the real package): a tile is ``[h, w]`` with h in 1, 2, 4, 8, 16, 32 and w in 16, 32
(anything else: "Tile size is not valid for our hardware"); a transposed tile needs h of 16 or 32
("Tile height must equal 16 or 32 in transpose mode"). A tensor's
last two dims are padded to multiples of h and w (``[2, 40, 20]`` in 16x32 tiles is stored as
``[2, 48, 32]``). bfloat16/float32 values do not depend on the tile; block floats share an
exponent over 16 consecutive values of a face row, which for a transposed tile (faces and their
rows transposed) is 16 consecutive values down a column. Two tiles compare equal on their shape
alone (measured: ``Tile([32, 32]) == Tile([32, 32], transpose_tile=True)``).
"""

from __future__ import annotations

from .types import BLOCK_FLOATS, TILE_SIZE, DataType, TTFatal

FACE = 16
_HEIGHTS = (1, 2, 4, 8, 16, 32)
_WIDTHS = (16, 32)


class Tile:
    """ttnn.Tile(tile_shape, transpose_tile=False)."""

    def __init__(self, tile_shape, transpose_tile: bool = False):
        shape = [int(d) for d in tile_shape]
        if len(shape) != 2:
            raise TypeError(f"Tile: tile_shape must be [height, width], got {tile_shape!r}")
        if shape[0] not in _HEIGHTS or shape[1] not in _WIDTHS:
            raise TTFatal("Tile size is not valid for our hardware")
        if transpose_tile and shape[0] not in (FACE, TILE_SIZE):
            raise TTFatal("Tile height must equal 16 or 32 in transpose mode")
        self._shape = shape
        self._transpose = bool(transpose_tile)

    @property
    def tile_shape(self) -> list[int]:
        return list(self._shape)

    @property
    def transpose_tile(self) -> bool:  # (ttsim's own name for the constructor argument)
        return self._transpose

    @property
    def face_shape(self) -> list[int]:
        return [min(self._shape[0], FACE), FACE]

    @property
    def num_faces(self) -> int:
        fh, fw = self.face_shape
        return (self._shape[0] // fh) * (self._shape[1] // fw)

    @property
    def partial_face(self) -> int:
        return int(self._shape[0] < TILE_SIZE)

    @property
    def narrow_tile(self) -> int:
        return int(self._shape[1] < TILE_SIZE)

    @property
    def transpose_within_face(self) -> bool:
        return self._transpose

    @property
    def transpose_of_faces(self) -> bool:
        return self._transpose

    def get_tile_size(self, dtype: DataType) -> int:
        """Bytes of one tile of ``dtype`` (measured on 0.81.1: a block float adds one exponent byte
        per face row, at least 16)."""
        n = self._shape[0] * self._shape[1]
        if dtype in BLOCK_FLOATS:
            face_rows = self.num_faces * self.face_shape[0]
            exps = -(-face_rows // 16) * 16
            return (n if dtype == DataType.BFLOAT8_B else n // 2) + exps
        return n * {DataType.FLOAT32: 4, DataType.INT32: 4, DataType.UINT32: 4, DataType.UINT8: 1}.get(dtype, 2)

    def __eq__(self, other) -> bool:
        return isinstance(other, Tile) and self._shape == other._shape

    def __hash__(self) -> int:
        return hash(tuple(self._shape))

    def __repr__(self) -> str:
        return f"Tile with shape: [{self._shape[0]}, {self._shape[1]}]"


STANDARD = Tile([TILE_SIZE, TILE_SIZE])


def is_standard(tile) -> bool:
    """None, or a plain 32x32 tile: what every ttsim op stores its TILE outputs in."""
    return tile is None or (tile.tile_shape == [TILE_SIZE, TILE_SIZE] and not tile.transpose_tile)


def hw(tile) -> tuple[int, int]:
    return (TILE_SIZE, TILE_SIZE) if tile is None else tuple(tile.tile_shape)


def check(what: str, tile) -> Tile | None:
    """A ``tile=`` argument: a ttnn.Tile (stored unless it is the plain 32x32) or None."""
    if tile is None:
        return None
    if not isinstance(tile, Tile):
        raise TypeError(f"{what}: tile must be a ttnn.Tile, got {tile!r}")
    return None if is_standard(tile) else tile
