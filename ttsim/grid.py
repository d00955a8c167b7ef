"""ttnn.CoreGrid (a rectangle of Tensix cores, x columns by y rows), CoreRange and CoreRangeSet."""

from __future__ import annotations

from .types import CoreCoord, TTFatal


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


class CoreRange:
    """ttnn.CoreRange: the inclusive rectangle of cores from ``start`` to ``end``."""

    def __init__(self, start: CoreCoord, end: CoreCoord):
        for name, c in (("start", start), ("end", end)):
            if not isinstance(c, CoreCoord):
                raise TTFatal(f"CoreRange: {name} must be a ttnn.CoreCoord, got {c!r}")
        if end.x < start.x or end.y < start.y:
            raise TTFatal(f"CoreRange: invalid core range for start: {start!r}, end: {end!r}")
        self._start, self._end = start, end

    @property
    def start(self) -> CoreCoord:
        return self._start

    @property
    def end(self) -> CoreCoord:
        return self._end

    def grid_size(self) -> CoreCoord:
        return CoreCoord(self._end.x - self._start.x + 1, self._end.y - self._start.y + 1)

    def _cores(self) -> set[tuple[int, int]]:
        return {(x, y) for x in range(self._start.x, self._end.x + 1) for y in range(self._start.y, self._end.y + 1)}

    def contains(self, other) -> bool:
        if isinstance(other, CoreCoord):
            return (other.x, other.y) in self._cores()
        if isinstance(other, CoreRange):
            return other._cores() <= self._cores()
        raise TTFatal(f"CoreRange.contains: expected a CoreCoord or CoreRange, got {other!r}")

    def __eq__(self, other) -> bool:
        return isinstance(other, CoreRange) and (self._start, self._end) == (other._start, other._end)

    def __hash__(self) -> int:
        return hash((self._start.x, self._start.y, self._end.x, self._end.y))

    def __repr__(self) -> str:  # as ttnn prints it
        return f"[{self._start!r} - {self._end!r}]"


class CoreRangeSet:
    """ttnn.CoreRangeSet: disjoint core ranges (a placement: ttsim never runs on cores)."""

    def __init__(self, core_ranges):
        ranges = list(core_ranges)
        if not all(isinstance(r, CoreRange) for r in ranges):
            raise TTFatal(f"CoreRangeSet: core_ranges must hold ttnn.CoreRange, got {core_ranges!r}")
        for i, r in enumerate(ranges):
            for other in ranges[:i]:
                if other._cores() & r._cores():  # tt-metal's words (core_coord.cpp)
                    raise TTFatal(f"Cannot create CoreRangeSet with specified core ranges because core ranges "
                                  f"{other!r} and {r!r} overlap!")
        # a list keeps its order (it shows in reprs and equality); a set comes out sorted by start
        # then end, x before y, as the binding's std::set (measured on 0.81.1)
        if isinstance(core_ranges, (set, frozenset)):
            ranges.sort(key=lambda r: (r.start.x, r.start.y, r.end.x, r.end.y))
        self._ranges = ranges

    def ranges(self) -> list[CoreRange]:
        return list(self._ranges)

    def size(self) -> int:
        return len(self._ranges)

    def empty(self) -> bool:
        return not self._ranges

    def num_cores(self) -> int:
        return sum(len(r._cores()) for r in self._ranges)

    def bounding_box(self) -> CoreRange:
        if not self._ranges:
            raise TTFatal("CoreRangeSet.bounding_box: the set is empty")
        xs = [c for r in self._ranges for c in (r.start.x, r.end.x)]
        ys = [c for r in self._ranges for c in (r.start.y, r.end.y)]
        return CoreRange(CoreCoord(min(xs), min(ys)), CoreCoord(max(xs), max(ys)))

    def contains(self, other) -> bool:
        cores = {c for r in self._ranges for c in r._cores()}
        if isinstance(other, CoreCoord):
            return (other.x, other.y) in cores
        if isinstance(other, CoreRange):
            return other._cores() <= cores
        if isinstance(other, CoreRangeSet):
            return all(self.contains(r) for r in other._ranges)
        raise TTFatal(f"CoreRangeSet.contains: expected a CoreCoord, CoreRange or CoreRangeSet, got {other!r}")

    def __eq__(self, other) -> bool:
        return isinstance(other, CoreRangeSet) and self._ranges == other._ranges

    def __hash__(self) -> int:
        return hash(tuple(self._ranges))

    def __repr__(self) -> str:  # as ttnn prints it: {[0-0 - 1-2], ...}
        return "{" + ", ".join(repr(r) for r in self._ranges) + "}"
