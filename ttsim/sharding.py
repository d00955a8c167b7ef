"""Sharded placement: ttnn.ShardSpec, the core-range helpers tt-metal's decode tests build shard
grids with, create_sharded_memory_config, and the check a card makes before it places a tensor
with a sharded memory config.

Sharding is placement only in ttsim (a tensor's values never depend on it), but a config the card
refuses is refused here too, at the call and in tt-metal's words. Every rule and text below was
measured on the real ttnn 0.81.1 host path (``ttnn.TensorSpec`` with a ShardSpec runs the same
validation as a device placement; conformance/dump_ttnn.py records it, test_sharding.py compares).
"""

from __future__ import annotations

import functools
import math

from .grid import CoreGrid, CoreRange, CoreRangeSet
from .types import (
    TILE_SIZE,
    BufferType,
    CoreCoord,
    Layout,
    MemoryConfig,
    Shape,
    ShardOrientation,
    ShardSpecBase,
    ShardStrategy,
    TensorMemoryLayout,
    TTFatal,
)


class ShardSpec(ShardSpecBase):
    """ttnn.ShardSpec(grid, shard_shape, shard_orientation): which cores hold the shards of a
    sharded tensor, and the [height, width] of each shard (of the tensor seen as 2-D)."""

    def __init__(self, grid: CoreRangeSet, shard_shape, shard_orientation: ShardOrientation):
        # the binding's argument types: anything else is nanobind's TypeError, as in 0.81.1
        if not isinstance(grid, CoreRangeSet):
            raise TypeError(f"ShardSpec: grid must be a ttnn.CoreRangeSet, got {type(grid).__name__}")
        shape = list(shard_shape) if isinstance(shard_shape, (list, tuple)) else None
        if shape is None or len(shape) != 2 or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                       for d in shape):
            raise TypeError(f"ShardSpec: shard_shape must be [height, width] of non-negative ints, got {shard_shape!r}")
        if not isinstance(shard_orientation, ShardOrientation):
            raise TypeError(f"ShardSpec: shard_orientation must be a ttnn.ShardOrientation, got {shard_orientation!r}")
        self._grid, self._shape, self._orientation = grid, tuple(shape), shard_orientation

    @property
    def grid(self) -> CoreRangeSet:
        return self._grid

    @property
    def shape(self) -> list[int]:
        return list(self._shape)

    @property
    def orientation(self) -> ShardOrientation:
        return self._orientation

    def num_cores(self) -> int:
        return self._grid.num_cores()

    def __eq__(self, other) -> bool:
        return isinstance(other, ShardSpec) and (self._grid, self._shape, self._orientation) == (
            other._grid, other._shape, other._orientation)

    def __hash__(self) -> int:
        return hash((self._grid, self._shape, self._orientation))

    def __repr__(self) -> str:  # 0.81.1's text, including its unclosed range objects
        ranges = ", ".join('{"start":{"x":%d,"y":%d},"end":{"x":%d,"y":%d}' % (r.start.x, r.start.y, r.end.x, r.end.y)
                           for r in self._grid.ranges())
        return (f"ShardSpec{{grid=[{ranges}], shape=[{self._shape[0]}, {self._shape[1]}], "
                f"orientation=ShardOrientation::{self._orientation.name}}}")


# -- core ranges --------------------------------------------------------------------------------

def _count(n, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise TypeError(f"{what}: target_num_cores must be a non-negative int, got {n!r}")
    return n


def _coord(c, what: str, name: str) -> CoreCoord:
    if isinstance(c, CoreCoord):
        return c
    if isinstance(c, (tuple, list)) and len(c) == 2 and all(isinstance(v, int) for v in c):
        return CoreCoord(*c)  # nanobind converts a pair implicitly
    raise TypeError(f"{what}: {name} must be a ttnn.CoreCoord, got {c!r}")


def _take(rng: CoreRange, start: CoreCoord, n: int, row_wise: bool) -> tuple[list[CoreRange], int]:
    """Up to ``n`` cores of ``rng`` from ``start`` on, walked along rows (``row_wise``) or columns,
    as tt-metal groups them: the rest of the start's line, then whole lines as one range, then a
    partial line. Returns the ranges and how many cores they hold."""
    # (line, pos): line is the row (row-wise) or column; pos runs along it
    def at(line: int, pos: int) -> CoreCoord:
        return CoreCoord(pos, line) if row_wise else CoreCoord(line, pos)

    lo, hi = (rng.start.x, rng.end.x) if row_wise else (rng.start.y, rng.end.y)
    last = rng.end.y if row_wise else rng.end.x
    line, pos = (start.y, start.x) if row_wise else (start.x, start.y)
    length = hi - lo + 1
    avail = (hi - pos + 1) + (last - line) * length
    left = taken = min(n, avail)
    out = []
    if pos != lo and left > hi - pos + 1:
        out.append(CoreRange(at(line, pos), at(line, hi)))
        left -= hi - pos + 1
        line, pos = line + 1, lo
    if pos == lo and left >= length:
        full = left // length
        out.append(CoreRange(at(line, lo), at(line + full - 1, hi)))
        left -= full * length
        line += full
    if left:
        out.append(CoreRange(at(line, pos), at(line, pos + left - 1)))
    return out, taken


def num_cores_to_corerangeset(target_num_cores: int, grid_size: CoreCoord, row_wise: bool = False) -> CoreRangeSet:
    """The first ``target_num_cores`` cores of a ``grid_size`` grid, walked row by row
    (``row_wise``) or column by column (the default), as tt-metal's work split groups them."""
    what = "num_cores_to_corerangeset"
    n = _count(target_num_cores, what)
    grid = _coord(grid_size, what, "grid_size")
    if grid.x <= 0 or grid.y <= 0:
        raise TTFatal("Start core must be within grid size")
    total = grid.x * grid.y
    if n > total:
        raise TTFatal(f"Target number of cores {n} is greater than total number of available cores {total}")
    if n == 0:
        return CoreRangeSet([])
    ranges, _ = _take(CoreRange(CoreCoord(0, 0), CoreCoord(grid.x - 1, grid.y - 1)), CoreCoord(0, 0), n, row_wise)
    return CoreRangeSet(ranges)


def num_cores_to_corerangeset_in_subcoregrids(start_core: CoreCoord, target_num_cores: int,
                                              sub_core_grids: CoreRangeSet, row_wise: bool = False) -> CoreRangeSet:
    """``target_num_cores`` cores of ``sub_core_grids`` from ``start_core`` on: the rest of the range
    holding it, then the later ranges in the set's order, each walked as num_cores_to_corerangeset."""
    what = "num_cores_to_corerangeset_in_subcoregrids"
    n = _count(target_num_cores, what)
    start = _coord(start_core, what, "start_core")
    if not isinstance(sub_core_grids, CoreRangeSet):
        raise TypeError(f"{what}: sub_core_grids must be a ttnn.CoreRangeSet, got {sub_core_grids!r}")
    if n == 0:
        raise TTFatal("Target number of cores must be greater than 0")
    total = sub_core_grids.num_cores()
    if n > total:
        raise TTFatal(f"Target number of cores {n} is greater than total available cores {total}")
    ranges = sub_core_grids.ranges()
    first = next((i for i, r in enumerate(ranges) if r.contains(start)), None)
    if first is None:
        raise TTFatal("Start core must be inside sub_core_grids")
    out, left = [], n
    for i, rng in enumerate(ranges[first:]):
        got, taken = _take(rng, start if i == 0 else rng.start, left, row_wise)
        out += got
        left -= taken
        if not left:
            return CoreRangeSet(out)
    raise TTFatal(f"Failed to assign all {n} requested cores")


# -- create_sharded_memory_config -------------------------------------------------------------------

_LAYOUT_OF = {ShardStrategy.HEIGHT: TensorMemoryLayout.HEIGHT_SHARDED,
              ShardStrategy.WIDTH: TensorMemoryLayout.WIDTH_SHARDED,
              ShardStrategy.BLOCK: TensorMemoryLayout.BLOCK_SHARDED}


def _grid_of(core_grid: CoreGrid) -> CoreRange:
    return CoreRange(CoreCoord(0, 0), CoreCoord(core_grid.x - 1, core_grid.y - 1))


def _split(size: int, parts: int) -> int:
    if size % parts:
        raise RuntimeError(f"Invalid sharding core_grid: {size} does not split evenly over {parts}")
    return size // parts


def create_sharded_memory_config(shape, core_grid, strategy: ShardStrategy, orientation: ShardOrientation | None = None,
                                 use_height_and_width_as_shard_shape: bool = False) -> MemoryConfig:
    """An L1 sharded MemoryConfig for a tensor of ``shape`` (seen as [prod(leading dims), width]) on
    ``core_grid``: ttnn 0.81.1's Python helper, its shard shapes and its RuntimeErrors. A
    CoreRangeSet grid, or a pair of CoreGrids, needs ``use_height_and_width_as_shard_shape``."""
    if not isinstance(shape, (list, tuple, Shape)):
        raise RuntimeError("Invalid input shape")
    if not isinstance(core_grid, (CoreGrid, tuple, list, CoreRangeSet)):
        raise RuntimeError("Invalid core_grid type")
    if strategy not in _LAYOUT_OF:  # a TensorMemoryLayout is not a strategy here (measured)
        raise RuntimeError(f"Invalid sharding strategy: {strategy!r}")
    if orientation is not None and not isinstance(orientation, ShardOrientation):
        raise RuntimeError(f"Invalid shard orientation: {orientation!r}")
    orientation = orientation or ShardOrientation.ROW_MAJOR
    if isinstance(core_grid, CoreGrid):
        grid = CoreRangeSet([_grid_of(core_grid)])
    elif isinstance(core_grid, CoreRangeSet):
        grid = core_grid
        if not use_height_and_width_as_shard_shape:
            raise RuntimeError("height and width must be shard shape with CoreRangeSet")
    else:  # a (CoreGrid, CoreGrid) pair: the first grid, then one more row as wide as the second
        if len(core_grid) != 2:
            raise RuntimeError("Invalid core_grid")
        if not all(isinstance(g, CoreGrid) for g in core_grid):
            raise RuntimeError("Invalid core_grid type")
        if not use_height_and_width_as_shard_shape:  # 0.81.1 fails with an AttributeError here
            raise RuntimeError("Invalid core_grid: a (CoreGrid, CoreGrid) pair needs use_height_and_width_as_shard_shape")
        a, b = core_grid
        grid = CoreRangeSet([_grid_of(a), CoreRange(CoreCoord(0, a.y), CoreCoord(b.x - 1, a.y))])
    *lead, height, width = (int(d) for d in shape)
    if use_height_and_width_as_shard_shape:
        shard = (height, width) if orientation == ShardOrientation.ROW_MAJOR else (width, height)
    else:
        rows = math.prod(lead) * height
        if strategy == ShardStrategy.HEIGHT:
            shard = (_split(rows, core_grid.num_cores), width)
        elif strategy == ShardStrategy.WIDTH:
            shard = (rows, _split(width, core_grid.num_cores))
        elif orientation == ShardOrientation.ROW_MAJOR:
            shard = (_split(rows, core_grid.y), _split(width, core_grid.x))
        else:
            shard = (_split(rows, core_grid.x), _split(width, core_grid.y))
    return MemoryConfig(_LAYOUT_OF[strategy], BufferType.L1, ShardSpec(grid, list(shard), orientation))


# -- the card's placement check ---------------------------------------------------------------------

def _round_up(v: int, m: int) -> int:
    return -(-v // m) * m


@functools.lru_cache(maxsize=1024)
def _misfit(shape: tuple, layout: Layout, memory_config: MemoryConfig) -> str | None:
    """Why a card refuses this placement (tt-metal's words), or None."""
    spec = memory_config.shard_spec
    sh, sw = spec.shape
    if sh <= 0 or sw <= 0:
        return f"Shard shape must be greater than 0 in each sharded dim, got [{sh}, {sw}]"
    dims = list(shape) if len(shape) >= 2 else [1] * (2 - len(shape)) + list(shape)
    if layout == Layout.TILE:
        if sh % TILE_SIZE or sw % TILE_SIZE:
            return f"Physical shard shape ({sh}, {sw}) must be tile {{{TILE_SIZE}, {TILE_SIZE}}} sized!"
        height = math.prod(dims[:-2]) * _round_up(dims[-2], TILE_SIZE)
        width = _round_up(dims[-1], TILE_SIZE)
    else:  # row-major pages are rows: the width is laid out in whole shards (measured)
        height, width = math.prod(dims[:-1]), _round_up(dims[-1], sw)
    across_h, across_w = -(-height // sh), -(-width // sw)
    kind = memory_config.memory_layout
    cores = spec.num_cores()
    if kind == TensorMemoryLayout.HEIGHT_SHARDED:
        if sw != width:
            return f"Shard width {sw} must match physical width {width} for height sharded"
        if across_h > cores:
            return f"Number of shards along height {across_h} must not exceed number of cores {cores}"
    elif kind == TensorMemoryLayout.WIDTH_SHARDED:
        if sh != height:
            return f"Shard height {sh} must match physical height {height} for width sharded"
        if across_w > cores:
            return f"Number of shards along width {across_w} must not exceed number of cores {cores}"
    elif kind == TensorMemoryLayout.BLOCK_SHARDED:
        if spec.grid.size() != 1:  # even ranges that tile a rectangle (measured)
            return "Shard grid must be one full rectangular grid for block sharded!"
        size = spec.grid.ranges()[0].grid_size()
        rows, cols = size.y, size.x
        if spec.orientation == ShardOrientation.ROW_MAJOR:
            if across_h > rows:
                return (f"Number of shards along height {across_h} must not exceed number of rows {rows} "
                        f"for row major orientation!")
            if across_w > cols:
                return (f"Number of shards along width {across_w} must not exceed number of columns {cols} "
                        f"for row major orientation!")
        else:
            if across_h > cols:
                return (f"Number of shards along height {across_h} must not exceed number of columns {cols} "
                        f"for column major orientation!")
            if across_w > rows:
                return (f"Number of shards along width {across_w} must not exceed number of rows {rows} "
                        f"for column major orientation!")
    return None


def check_placement(what: str, shape, layout: Layout, memory_config: MemoryConfig | None) -> None:
    """Refuse, as the card does, a sharded ``memory_config`` whose shard spec does not fit a tensor
    of logical ``shape`` in ``layout`` (``what`` names the call). An interleaved config ignores any
    shard spec it carries; a sharded one without a spec (the ``L1_*_SHARDED_MEMORY_CONFIG``
    presets) lets the op derive one."""
    if memory_config is None or memory_config.shard_spec is None or not memory_config.is_sharded():
        return
    if memory_config.memory_layout == TensorMemoryLayout.ND_SHARDED:
        return
    why = _misfit(tuple(shape), layout, memory_config)
    if why is not None:
        raise TTFatal(f"{what}: {why}")


__all__ = ["ShardSpec", "num_cores_to_corerangeset", "num_cores_to_corerangeset_in_subcoregrids",
           "create_sharded_memory_config", "check_placement"]
