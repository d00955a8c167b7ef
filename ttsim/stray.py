"""A chip's memory as a kernel reaches it through an unchecked device-resident index.

A card's paged kernels and its embedding lookup index with values they read on the device and
never bound-check (ttsim/kernels/card_index.py). What they then read or write is whatever the
chip's memory holds at that address: ttsim's flat model of it (ttsim/memory.py), where a buffer
occupies ``[address, address + nbytes)`` and a TILE buffer's tile ``t`` lies at ``address + t *
tile_bytes`` (tiles in row-major tile order, as numerics.encode lays them out). Indexing past a
buffer reads the next buffer's bytes, the residue of a freed one, or the seeded junk of memory
never written, deterministically; writing there changes them.

No address faults: a card's interleaved address generator (tt-metal's ``InterleavedAddrGen``)
computes a page's bank address as a ``uint32_t`` (``bank_offset_index * aligned_page_size +
bank_base_address``), and a Blackhole bank holds 4 GB, so any page id lands somewhere in DRAM. ttsim
wraps the flat address modulo the chip's memory the same way. On a card an interleaved buffer's
pages are spread over the 8 banks; ttsim's flat model keeps them contiguous, so WHICH neighbour a
stray index hits is ttsim's layout, not a card's; THAT one is hit, silently, is the card's.
"""

from __future__ import annotations

import numpy as np
import torch

from . import numerics
from .diagnostics import Entry
from .kernels.card_index import U32, StrayIndex
from .memory import Buffer
from .types import BLOCK_FLOATS, ELEMENT_SIZE, TILE_SIZE, DataType, Layout, TTFatal

_TILE = (TILE_SIZE, TILE_SIZE)
#: tt-metal's words when the host's wait for a hung device times out (a TT_THROW in the dispatch wait)
DEVICE_TIMEOUT = "TIMEOUT: device timeout, potential hang detected, the device is unrecoverable"


class DeviceTimeout(TTFatal):
    """A kernel hung the card: tt-metal's TT_THROW once the host's wait times out (ttsim raises it
    at once instead of spinning), naming the op and what hung it."""

    def __init__(self, op: str, what: str):
        RuntimeError.__init__(self, f"TT_THROW: {DEVICE_TIMEOUT} ({op} {what}; ttsim ends it as the watchdog would)")


def _pieces(region, address: int, nbytes: int) -> list[tuple[int, int, int]]:
    """``[address, address + nbytes)`` wrapped into the region: (address, length, offset into the span)."""
    start = address % region.size
    first = min(nbytes, region.size - start)
    return [(start, first, 0)] + ([(0, nbytes - first, first)] if first < nbytes else [])


def _live_in(chip, buffer_type, lo: int, hi: int) -> list[Buffer]:
    return sorted((b for b in chip.live.values() if b.buffer_type == buffer_type and b.address < hi
                   and b.address + b.nbytes > lo), key=lambda b: b.address)


def _tile_bytes(buf: Buffer) -> int:
    return numerics.nbytes(buf.dtype, Layout.TILE, _TILE)


def _tile_view(buf: Buffer, data: torch.Tensor, t: int) -> torch.Tensor:
    """Tile ``t`` of a TILE buffer's data, as a view."""
    rows, cols = numerics.physical_2d(tuple(buf.padded))[-2:]
    flat = data.reshape(-1, cols)
    tr, tc = divmod(t, cols // TILE_SIZE)
    return flat[tr * TILE_SIZE:(tr + 1) * TILE_SIZE, tc * TILE_SIZE:(tc + 1) * TILE_SIZE]


def _image(buf: Buffer, lo: int, hi: int) -> np.ndarray:
    """Bytes ``[lo, hi)`` (offsets into the buffer) of a live buffer's image, encoding only the
    tiles they touch (a KV cache is hundreds of MB)."""
    data = buf.data
    if buf.layout == Layout.ROW_MAJOR:
        return data.contiguous().view(torch.uint8).reshape(-1)[lo:hi].numpy().copy()
    tb = _tile_bytes(buf)
    t0, t1 = lo // tb, -(-hi // tb)
    img = np.concatenate([numerics.encode(_tile_view(buf, data, t).contiguous(), buf.dtype, Layout.TILE)
                          for t in range(t0, t1)])
    return img[lo - t0 * tb:hi - t0 * tb]


def read_bytes(chip, buffer_type, address: int, nbytes: int) -> np.ndarray:
    """What ``[address, address + nbytes)`` of a chip's memory (wrapped into it) holds now."""
    region = chip.region(buffer_type)
    pieces = _pieces(region, address, nbytes)
    if len(pieces) > 1:
        return np.concatenate([read_bytes(chip, buffer_type, a, n) for a, n, _ in pieces])
    address = pieces[0][0]
    out = region.read_bytes(address, nbytes)  # residue, else junk; a live buffer never written shows it too
    for buf in _live_in(chip, buffer_type, address, address + nbytes):
        if buf.data is not None:
            lo, hi = max(address, buf.address), min(address + nbytes, buf.address + buf.nbytes)
            out[lo - address:hi - address] = _image(buf, lo - buf.address, hi - buf.address)
    return out


def _patch(buf: Buffer, lo: int, raw: np.ndarray) -> None:
    """Write ``raw`` at offset ``lo`` of a live buffer, in place (the op running holds its data)."""
    data = buf.chip.contents(buf)
    buf.canon = None
    with torch.inference_mode():  # buffers made under inference mode allow in-place writes only there
        if buf.layout == Layout.ROW_MAJOR:
            data.view(torch.uint8).reshape(-1)[lo:lo + len(raw)] = torch.from_numpy(raw.copy())
            return
        tb = _tile_bytes(buf)
        hi = lo + len(raw)
        for t in range(lo // tb, -(-hi // tb)):
            view = _tile_view(buf, data, t)
            img = numerics.encode(view.contiguous(), buf.dtype, Layout.TILE)
            a, b = max(lo, t * tb), min(hi, (t + 1) * tb)
            img[a - t * tb:b - t * tb] = raw[a - lo:b - lo]
            view.copy_(numerics.decode(img, buf.dtype, Layout.TILE, _TILE))


def write_bytes(chip, buffer_type, address: int, raw: np.ndarray) -> None:
    """Write ``raw`` at ``address`` (wrapped into the chip's memory): into the live buffers there,
    and into free memory (which keeps it for the next buffer allocated there, as residue does)."""
    region = chip.region(buffer_type)
    pieces = _pieces(region, address, len(raw))
    if len(pieces) > 1:
        for a, n, off in pieces:
            write_bytes(chip, buffer_type, a, raw[off:off + n])
        return
    address = pieces[0][0]
    end = address + len(raw)
    cursor = address
    for buf in _live_in(chip, buffer_type, address, end):
        lo, hi = max(address, buf.address), min(end, buf.address + buf.nbytes)
        if lo > cursor:
            _scribble(chip, region, buffer_type, cursor, raw[cursor - address:lo - address])
        _patch(buf, lo - buf.address, raw[lo - address:hi - address])
        cursor = max(cursor, hi)
    if cursor < end:
        _scribble(chip, region, buffer_type, cursor, raw[cursor - address:])


def _scribble(chip, region, buffer_type, address: int, raw: np.ndarray) -> None:
    """Bytes written to memory no live buffer holds: kept as the residue of a freed byte buffer."""
    holder = Buffer(chip, buffer_type, address, len(raw), DataType.UINT8, Layout.ROW_MAJOR, (len(raw),),
                    data=torch.from_numpy(raw.copy()), freed=True)
    region.leave_residue(holder)


class PagedView:
    """One chip's memory around one paged call (kernels.card_index.PagedMemory): the page
    table's buffer and the cache buffers (0: k or the updated cache, 1: v)."""

    def __init__(self, op: str, device, chip_index: int, table: Buffer, caches: list[Buffer]):
        self.op, self.device, self.chip_index = op, device, chip_index
        self.table, self.caches = table, caches
        self.chip = table.chip

    def entry(self, index: int) -> int:
        if self.table.layout != Layout.ROW_MAJOR:
            raise TTFatal(f"{self.op}: a TILE page table read past its row is not modelled by ttsim (tt-metal's "
                          f"page tables are ROW_MAJOR)")
        size = ELEMENT_SIZE[self.table.dtype]
        raw = read_bytes(self.chip, self.table.buffer_type, self.table.address + index * size, size)
        return int.from_bytes(raw.tobytes(), "little") & U32

    def _tiles(self, cache: Buffer, block: int, head: int, row_tile: int) -> list[tuple[int, int]]:
        """(address, column tile) of the tiles holding tile-row ``row_tile`` of ``head`` in block
        ``block``: the card's tile id ``block * nkv * block_size_t * Wt + ...`` in uint32."""
        nb, nkv, bs, d = cache.padded
        wt, bst = d // TILE_SIZE, bs // TILE_SIZE
        first = ((block * nkv * bst * wt) + (head * bst + row_tile) * wt) & U32
        tb = _tile_bytes(cache)
        return [(cache.address + ((first + c) & U32) * tb, c) for c in range(wt)]

    def _check_tiled(self, cache: Buffer) -> None:
        if cache.layout != Layout.TILE:
            raise TTFatal(f"{self.op}: a ROW_MAJOR paged cache reached outside its blocks is not modelled by ttsim")

    def read_block(self, cache: int, block: int) -> torch.Tensor:
        buf = self.caches[cache]
        self._check_tiled(buf)
        _, nkv, bs, d = buf.padded
        tb = _tile_bytes(buf)
        out = torch.empty((nkv, bs, d), dtype=torch.float32)
        for h in range(nkv):
            for rt in range(bs // TILE_SIZE):
                for addr, c in self._tiles(buf, block, h, rt):
                    raw = read_bytes(self.chip, buf.buffer_type, addr, tb)
                    tile = numerics.decode(raw, buf.dtype, Layout.TILE, _TILE).to(torch.float32)
                    out[h, rt * TILE_SIZE:(rt + 1) * TILE_SIZE, c * TILE_SIZE:(c + 1) * TILE_SIZE] = tile
        return out

    def write_row(self, block: int, offset: int, values: torch.Tensor) -> None:
        """The card's writer reads the tile, replaces one row, writes the tile back: the other rows'
        bytes stay as they were (a bf16 NaN payload too; a block float's other face rows keep
        their own shared exponents, so re-quantising the tile leaves them as they were)."""
        buf = self.caches[0]
        self._check_tiled(buf)
        tb = _tile_bytes(buf)
        rt, ro = divmod(offset, TILE_SIZE)
        block_float = buf.dtype in BLOCK_FLOATS
        for h in range(values.shape[0]):
            for addr, c in self._tiles(buf, block, h, rt):
                tile = numerics.decode(read_bytes(self.chip, buf.buffer_type, addr, tb), buf.dtype, Layout.TILE, _TILE)
                part = values[h, c * TILE_SIZE:(c + 1) * TILE_SIZE].to(torch.float32)
                tile[ro, :part.shape[0]] = part if block_float else numerics.quantize(part, buf.dtype)
                if block_float:
                    tile = numerics.quantize(tile, buf.dtype)
                write_bytes(self.chip, buf.buffer_type, addr, numerics.encode(tile, buf.dtype, Layout.TILE))

    def note(self, stray: StrayIndex) -> None:
        self.device._diagnostics.append(Entry.of(self.op, self.chip.id, stray))
