"""ttnn.CoreGrid: a rectangle of Tensix cores (x columns by y rows)."""

from __future__ import annotations

from .types import TTFatal


class CoreGrid:
    def __init__(self, *, x: int, y: int):
        for name, v in (("x", x), ("y", y)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise TTFatal(f"CoreGrid: {name} must be a positive int, got {v!r}")
        self._x, self._y = x, y

    @property
    def x(self) -> int:
        return self._x

    @property
    def y(self) -> int:
        return self._y

    @property
    def num_cores(self) -> int:
        return self._x * self._y

    def __eq__(self, other) -> bool:
        return isinstance(other, CoreGrid) and (self._x, self._y) == (other._x, other._y)

    def __hash__(self) -> int:
        return hash((self._x, self._y))

    def __repr__(self) -> str:
        return f"ttnn.CoreGrid(x={self._x}, y={self._y})"
