"""A chip's memory: a first-fit allocator plus what freed memory still holds.

Buffers keep their live contents as torch tensors (fast ops); the allocator keeps, for
every freed range, a reference to the data last written there. A buffer allocated
uninitialized gets the byte image of that residue, and deterministic junk (keyed by
seed, chip and address) where nothing was ever written.
"""

from __future__ import annotations

import bisect
import operator
from dataclasses import dataclass

import numpy as np
import torch

from . import numerics
from .seed import junk_bytes
from .types import BufferType, DataType, Layout, TTFatal

DRAM_SIZE = 32 * 1024**3  # a p150a: one Blackhole chip with 32 GB GDDR6
L1_SIZE = 130 * 1536 * 1024  # 13x10 worker cores x 1.5 MB
ALIGNMENT = {BufferType.DRAM: 64, BufferType.L1: 16}


@dataclass(eq=False)
class Buffer:
    """One chip's storage of a tensor: an address range and its current contents."""

    chip: "object"
    buffer_type: BufferType
    address: int
    nbytes: int
    dtype: DataType
    layout: Layout
    padded: tuple[int, ...]
    data: torch.Tensor | None = None
    freed: bool = False
    #: the data object last known to hold no NaN but the canonical bf16 one (see ops/base.py's
    #: canonical_bf16); stale as soon as ``data`` is another object, cleared by in-place writers
    canon: torch.Tensor | None = None

    def __repr__(self) -> str:
        return (
            f"Buffer(chip={self.chip.id}, {self.buffer_type.name} 0x{self.address:x}+{self.nbytes}, "
            f"{self.dtype!r}, {self.layout!r}, {list(self.padded)}{', freed' if self.freed else ''})"
        )


@dataclass
class _Residue:
    """[start, end) still holds what freed buffer ``buf`` last had there."""

    start: int
    end: int
    buf: Buffer

    def image(self) -> np.ndarray:
        # memo keyed on the data object: a trace replay may still rewrite a freed buffer
        buf = self.buf
        memo = getattr(buf, "_image", None)
        if memo is None or memo[0] is not buf.data:
            memo = (buf.data, numerics.encode(buf.data, buf.dtype, buf.layout))
            buf._image = memo
        return memo[1]


_start = operator.attrgetter("start")  # bisect keys (C-level: no Python frame per probe)
_end = operator.attrgetter("end")


class Region:
    """One address space (a chip's DRAM or L1): first-fit allocation and residue."""

    def __init__(self, name: str, size: int, alignment: int, junk_key: int):
        self.name = name
        self.size = size
        self.alignment = alignment
        self.junk_key = junk_key
        self._free: list[tuple[int, int]] = [(0, size)]  # sorted (start, length)
        self._residue: list[_Residue] = []  # sorted, non-overlapping
        self.allocated_bytes = 0

    # -- allocation ------------------------------------------------------------
    def allocate(self, nbytes: int, what: str, top_down: bool = False) -> int:
        """First fit from the bottom; ``top_down``: the highest address that fits (tt-metal's
        placement for trace buffers without a trace region)."""
        need = -(-max(nbytes, 1) // self.alignment) * self.alignment
        order = range(len(self._free) - 1, -1, -1) if top_down else range(len(self._free))
        for i in order:
            start, length = self._free[i]
            if length >= need:
                addr = start + length - need if top_down else start
                if length == need:
                    del self._free[i]
                else:
                    self._free[i] = (start, length - need) if top_down else (start + need, length - need)
                self.allocated_bytes += need
                return addr
        largest = max((length for _, length in self._free), default=0)
        raise TTFatal(
            f"Out of Memory: Not enough space to allocate {nbytes} B {self.name} buffer for {what}; "
            f"{self.allocated_bytes} B of {self.size} B in use, largest free block is {largest} B"
        )

    def free(self, address: int, nbytes: int) -> None:
        need = -(-max(nbytes, 1) // self.alignment) * self.alignment
        self.allocated_bytes -= need
        i = bisect.bisect_left(self._free, (address, 0))
        self._free.insert(i, (address, need))
        # coalesce with neighbours
        if i + 1 < len(self._free) and address + need == self._free[i + 1][0]:
            self._free[i] = (address, need + self._free[i + 1][1])
            del self._free[i + 1]
        if i > 0 and self._free[i - 1][0] + self._free[i - 1][1] == self._free[i][0]:
            self._free[i - 1] = (self._free[i - 1][0], self._free[i - 1][1] + self._free[i][1])
            del self._free[i]

    # -- contents of freed memory ---------------------------------------------
    def leave_residue(self, buf: Buffer) -> None:
        """``buf`` was freed: its last contents stay at its addresses."""
        # by reference: commands still queued before the free may yet write buf.data
        self.claim(buf.address, buf.nbytes)
        bisect.insort(self._residue, _Residue(buf.address, buf.address + buf.nbytes, buf), key=_start)

    def read_bytes(self, start: int, nbytes: int) -> np.ndarray:
        """What [start, start+nbytes) holds now: residue, else junk."""
        out = junk_bytes(self.junk_key, start, nbytes)
        end = start + nbytes
        i, j = self._window(start, end)
        for r in self._residue[i:j]:
            lo, hi = max(r.start, start), min(r.end, end)
            if r.buf.data is not None:
                out[lo - start : hi - start] = r.image()[lo - r.buf.address : hi - r.buf.address]
        return out

    def claim(self, start: int, nbytes: int) -> None:
        """Forget residue in [start, start+nbytes): newer contents are about to cover it."""
        end = start + nbytes
        i, j = self._window(start, end)
        if i == j:
            return
        pieces = []
        first, last = self._residue[i], self._residue[j - 1]
        if first.start < start:
            pieces.append(_Residue(first.start, start, first.buf))
        if last.end > end:
            pieces.append(_Residue(end, last.end, last.buf))
        self._residue[i:j] = pieces

    def _window(self, start: int, end: int) -> tuple[int, int]:
        """Indices [i, j) of the residue overlapping [start, end) (the list is sorted and
        disjoint, so both its starts and its ends ascend)."""
        i = bisect.bisect_right(self._residue, start, key=_end)
        j = bisect.bisect_left(self._residue, end, lo=i, key=_start)
        return i, j
