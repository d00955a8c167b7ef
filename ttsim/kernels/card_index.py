"""How a card's paged kernels index with a device-resident position: unsigned and unchecked.

tt-metal's ``paged_update_cache`` reader (and paged SDPA decode's) reads the position as a
``uint32_t``, skips the row only when it equals ``(uint32_t)-1``, and otherwise takes
``page_table[row][pos / block_size]`` with no bound check. So -2 is position 0xFFFFFFFE, a page
far past the row, and an index past the row reads whatever the table's memory holds there.

The pure kernels see only torch tensors; what lies past the page table or outside the cache is
the device layer's to say. It hands the kernels a :class:`PagedMemory`; without one (``None``,
the kernels used on their own) an access outside the given tensors is refused with IndexError,
as before: there is nothing there to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Sequence

import torch

#: a card holds positions and DRAM page-table entries as uint32; -1 is this value
U32 = 0xFFFFFFFF


def unsigned(value: int) -> int:
    """``value`` as the card's ``uint32_t`` sees it (an int32 bit pattern, or a Python int)."""
    return int(value) & U32


class DeviceHang(RuntimeError):
    """The kernel would not finish on a card; the device layer reports tt-metal's timeout."""


@dataclass(frozen=True)
class StrayIndex:
    """One row whose position a kernel consumed past the row's own pages (or through an entry
    naming a block outside the cache): what the device layer records.

    ``block`` is the entry read at ``table_index`` (flat element index into the page table's
    buffer; ``None`` when the kernel hung before reading it); ``owners`` the rows of this
    call's page table whose pages map that block (empty: no row of the call owns it)."""

    row: int
    position: int
    page: int
    table_index: int
    block: Optional[int]
    owners: tuple[int, ...]
    access: str  # "write", "read" or "hang"
    detail: str = ""


class PagedMemory(Protocol):
    """One chip's memory around a paged call, as the device layer models it."""

    def entry(self, index: int) -> int:
        """The page table's (unsigned) element at flat ``index``, past the end of its buffer."""

    def read_block(self, cache: int, block: int) -> torch.Tensor:
        """Block ``block`` (outside the cache) of cache ``cache`` (0: k, 1: v) as float32
        ``[nkv, block_size, d]``: the bytes at that block's address read in the cache's format."""

    def write_row(self, block: int, offset: int, values: torch.Tensor) -> None:
        """Write ``values [nkv, d]`` at ``offset`` of block ``block`` (outside the cache)."""

    def note(self, stray: StrayIndex) -> None:
        """Record a stray access."""


def owners(flat: Sequence[int], width: int, block: int) -> tuple[int, ...]:
    """Rows of a ``[rows, width]`` page table (flattened, unsigned) that map ``block``."""
    return tuple(sorted({i // width for i, b in enumerate(flat) if b == block})) if width else ()
