"""ttsim only, no ttnn API: what a device's kernels did with an index they could not check.

A card consumes a garbage device-resident index silently (ttsim/stray.py says how ttsim does the
same). Unlike a card, ttsim also RECORDS each such access, per device, so that a failure can be
explained: which op, which batch row, which position, which page-table entry it read, which block
it wrote or read, and whose block that was as far as the device can tell (the rows of that call's
page table that map it). Read them with ``ttsim.diagnostics.entries(mesh)``; ``Entry.line()`` is
one printable line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Entry:
    """One stray access. ``page``/``table_index`` are None for a table lookup (embedding), whose
    ``block`` is the table row read; ``owners`` are page-table rows of the same call mapping
    ``block`` (empty: none does)."""

    op: str
    chip: int
    row: int
    position: int
    page: Optional[int]
    table_index: Optional[int]
    block: Optional[int]
    owners: tuple[int, ...]
    access: str  # "write", "read" or "hang"
    detail: str = ""

    @classmethod
    def of(cls, op: str, chip: int, stray) -> "Entry":
        """From a kernel's ``card_index.StrayIndex``."""
        return cls(op, chip, stray.row, stray.position, stray.page, stray.table_index, stray.block,
                   tuple(stray.owners), stray.access, stray.detail)

    def owner(self) -> str:
        if self.block is None:
            return "-"
        if not self.owners:
            return "no row of this call"
        if self.owners == (self.row,):
            return f"row {self.row} (its own)"
        return "row " + ",".join(map(str, self.owners))

    def line(self) -> str:
        where = "" if self.page is None else f" page {self.page} (page-table index {self.table_index})"
        block = "no block" if self.block is None else f"block {self.block}"
        extra = f"; {self.detail}" if self.detail else ""
        return (f"ttsim diagnostics: {self.op} chip {self.chip} row {self.row} position {self.position}: "
                f"{self.access}{where} {block}, owner {self.owner()}{extra}")


def entries(device) -> tuple[Entry, ...]:
    """The stray accesses recorded on ``device`` (a MeshDevice), oldest first."""
    return tuple(device._diagnostics)


def clear(device) -> None:
    """Forget ``device``'s recorded accesses (e.g. between requests)."""
    device._diagnostics.clear()
