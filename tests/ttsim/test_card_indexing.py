"""Garbage on the device side: paged_update_cache and paged SDPA decode consume a device-resident
position as a card does (tt-metal's readers: ``uint32_t`` index, skip only ``== (uint32_t)-1``,
``page_table[row][pos / block_size]`` unchecked), and ttsim records each such access.

Kernel tests drive ``ttsim.kernels.attention`` with a scripted memory (what lies past the table
and outside the cache is the test's to say); op tests run the real device layer, where it is the
chip's memory model (ttsim/stray.py) and the expectation is worked out by hand from the
allocator's addresses and the seeded junk.
"""

import os
import subprocess
import sys

import pytest
import torch

import ttsim
from ttsim import diagnostics
from ttsim.kernels import attention as K
from ttsim import numerics
from ttsim.kernels.card_index import U32, DeviceHang
from ttsim.memory import DRAM_SIZE
from ttsim.seed import junk_bytes
from ttsim.stray import read_bytes

BS, D = 32, 32
TIMEOUT = r"TT_THROW: TIMEOUT: device timeout, potential hang detected, the device is unrecoverable"


# -- kernels, with a scripted memory ----------------------------------------------------------------

class ScriptedMemory:
    """kernels.card_index.PagedMemory whose contents past the table / outside the cache are given."""

    def __init__(self, entries=None, blocks=None):
        self.entries, self.blocks = entries or {}, blocks or {}
        self.asked, self.written, self.notes = [], [], []

    def entry(self, index):
        self.asked.append(index)
        return self.entries[index]

    def read_block(self, cache, block):
        return self.blocks[block][cache]

    def write_row(self, block, offset, values):
        self.written.append((block, offset, values.clone()))

    def note(self, stray):
        self.notes.append(stray)


def _kcache(nb):
    return torch.zeros(nb, 1, BS, D)


def _x(*values):
    return torch.tensor(values, dtype=torch.float32).view(1, len(values), 1, 1).expand(1, len(values), 1, D).clone()


TABLE = torch.tensor([[0, 1], [2, 3], [4, 5]], dtype=torch.int32)  # 64 positions per row


def test_kernel_row_at_minus_one_is_skipped_and_asks_memory_nothing():
    cache, mem = _kcache(8), ScriptedMemory()
    K.paged_update_cache(cache, _x(5.0, 6.0), [-1, 3], TABLE, memory=mem)
    assert torch.count_nonzero(cache) == D and torch.all(cache[2, 0, 3] == 6.0)  # only row 1's slot (block 2)
    assert mem.notes == [] == mem.asked
    # 0xFFFFFFFF as a uint32 pattern is the same -1
    K.paged_update_cache(cache, _x(7.0, 8.0), torch.tensor([-1, U32], dtype=torch.int64), TABLE, memory=mem)
    assert torch.count_nonzero(cache) == D and torch.all(cache[2, 0, 3] == 6.0) and mem.notes == []


def test_kernel_minus_two_is_page_0xfffffffe_div_bs_not_a_skip():
    """-2 is uint32 0xFFFFFFFE: page 134217727 (far past the row), offset 30 of the block found there."""
    page = (2**32 - 2) // BS
    mem = ScriptedMemory(entries={2 * 2 + page: 6})
    cache = _kcache(8)
    K.paged_update_cache(cache, _x(1.0, 2.0, 3.0), [5, -1, -2], TABLE, memory=mem)
    assert mem.asked == [4 + page]
    assert torch.all(cache[6, 0, (2**32 - 2) % BS] == 3.0) and torch.all(cache[6, 0, :30] == 0)
    (note,) = mem.notes
    assert (note.row, note.position, note.page, note.table_index, note.block, note.owners, note.access) == (
        2, -2, page, 4 + page, 6, (), "write")


def test_kernel_position_past_the_row_writes_the_next_rows_block():
    """Row 0 at position 64 (page 2, one past its 2 pages) reads table index 2: row 1's page 0."""
    cache, mem = _kcache(8), ScriptedMemory()
    K.paged_update_cache(cache, _x(9.0, 4.0, -1.0), [64 + 7, 1, 2], TABLE, memory=mem)
    assert torch.all(cache[2, 0, 7] == 9.0)  # row 1's block, at offset 7: another request's K/V
    assert torch.all(cache[2, 0, 1] == 4.0)  # row 1's own token, in the same block
    (note,) = mem.notes
    assert (note.row, note.page, note.table_index, note.block, note.owners) == (0, 2, 2, 2, (1,))
    assert mem.asked == []  # inside the table's buffer: nothing asked of memory


def test_kernel_page_boundary_last_valid_page_vs_first_past_the_row():
    cache, mem = _kcache(8), ScriptedMemory(entries={4: 5})
    K.paged_update_cache(cache, _x(1.0, 2.0), [2 * BS - 1, 2 * BS], TABLE[:2], memory=mem)
    assert torch.all(cache[1, 0, BS - 1] == 1.0)  # row 0's last slot of its own last page
    assert torch.all(cache[5, 0, 0] == 2.0) and torch.count_nonzero(cache) == 2 * D
    (note,) = mem.notes  # row 1 at 64: table index 1*2+2 = 4, past the 2-row table's buffer
    assert (note.row, note.page, note.table_index) == (1, 2, 4) and mem.asked == [4]


def test_kernel_block_outside_the_cache_goes_to_memory_and_the_row_order_holds():
    mem = ScriptedMemory()
    table = torch.tensor([[0, 99], [0, 99]], dtype=torch.int32)
    cache = _kcache(4)
    K.paged_update_cache(cache, _x(1.0, 2.0), [40, 3], table, memory=mem)
    assert torch.all(cache[0, 0, 3] == 2.0) and torch.count_nonzero(cache) == D
    ((block, offset, values),) = mem.written
    assert (block, offset) == (99, 8) and torch.all(values == 1.0)
    assert [(n.row, n.page, n.block, n.owners, n.access) for n in mem.notes] == [(0, 1, 99, (0, 1), "write")]


def _decode_inputs(g, nb=8):
    q = torch.randn(1, 3, 2, D, generator=g).bfloat16()
    k = torch.randn(nb, 1, BS, D, generator=g).bfloat16()
    v = torch.randn(nb, 1, BS, D, generator=g).bfloat16()
    return q, k, v


def _ref_row(q, k, v, blocks, length, r):
    kk = torch.cat([k[b, 0] for b in blocks])[:length].float()
    vv = torch.cat([v[b, 0] for b in blocks])[:length].float()
    s = (q[0, r].float() @ kk.T) / D**0.5
    return torch.softmax(s, dim=-1) @ vv


def test_kernel_decode_past_the_row_attends_the_next_rows_keys():
    g = torch.Generator().manual_seed(3)
    q, k, v = _decode_inputs(g)
    mem = ScriptedMemory()
    out = K.paged_sdpa_decode(q, k, v, TABLE, [70, -1, 10], scale=None, k_chunk_size=32, memory=mem)
    torch.testing.assert_close(out[0, 0], _ref_row(q, k, v, [0, 1, 2], 71, 0), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(out[0, 2], _ref_row(q, k, v, [4], 11, 2), rtol=2e-3, atol=2e-3)
    assert torch.all(out[0, 1] == 0)
    (note,) = mem.notes
    assert (note.row, note.position, note.block, note.owners, note.access) == (0, 70, 2, (1,), "read")


def test_kernel_decode_hangs_when_the_span_walks_past_the_table_and_computes_nothing():
    g = torch.Generator().manual_seed(4)
    q, k, v = _decode_inputs(g)
    mem = ScriptedMemory()
    out = torch.full((1, 3, 2, D), 7.0)
    for bad in (1206993233, -2, 3 * 64 - 2 * 64):  # the last: row 2 at 64, one page past the table's end
        with pytest.raises(DeviceHang, match=rf"batch row 2: position {bad} spans"):
            K.paged_sdpa_decode(q, k, v, TABLE, [3, -1, bad], scale=None, k_chunk_size=32, out=out, memory=mem)
        assert torch.all(out == 7.0)  # nothing computed: the card never finishes
    assert [n.access for n in mem.notes] == ["hang"] * 3 and mem.asked == []
    # the last position inside the table's buffer is computed (row 1's span reaches row 2's pages)
    K.paged_sdpa_decode(q, k, v, TABLE, [-1, 127, 63], scale=None, k_chunk_size=32, out=out, memory=mem)
    torch.testing.assert_close(out[0, 1], _ref_row(q, k, v, [2, 3, 4, 5], 128, 1), rtol=2e-3, atol=2e-3)


def test_kernel_decode_reads_a_block_outside_the_cache_from_memory():
    g = torch.Generator().manual_seed(5)
    q, k, v = _decode_inputs(g)
    kb, vb = torch.randn(1, BS, D, generator=g), torch.randn(1, BS, D, generator=g)
    mem = ScriptedMemory(blocks={8: (kb, vb)})  # block 8 of an 8-block cache: the first one outside
    table = torch.tensor([[0, 8]], dtype=torch.int32)
    out = K.paged_sdpa_decode(q[:, :1], k, v, table, [40], scale=None, k_chunk_size=32, memory=mem)
    kk, vv = torch.cat([k[0, 0].float(), kb[0].bfloat16().float()])[:41], torch.cat([v[0, 0].float(),
                                                                                       vb[0].bfloat16().float()])[:41]
    want = torch.softmax((q[0, 0].float() @ kk.T) / D**0.5, dim=-1) @ vv
    torch.testing.assert_close(out[0, 0], want, rtol=2e-3, atol=2e-3)
    assert [(n.block, n.access) for n in mem.notes] == [(8, "read")]


# -- the device layer: the chip's memory -------------------------------------------------------------

def _ints(rows, device, dtype=ttsim.int32):
    return ttsim.from_torch(torch.tensor(rows, dtype=torch.int32), dtype=dtype, device=device)


def _cache(device, nb):
    return ttsim.from_torch(torch.zeros(nb, 1, BS, D), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)


def _tokens(device, *values):
    x = torch.tensor(values, dtype=torch.float32).view(1, len(values), 1, 1).expand(1, len(values), 1, D)
    return ttsim.from_torch(x.contiguous(), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)


def _update(device, cache, table, positions, *values, pos_dtype=ttsim.int32):
    ttsim.experimental.paged_update_cache(cache, _tokens(device, *values), page_table=table,
                                          update_idxs_tensor=_ints(positions, device, pos_dtype))
    return ttsim.to_torch(cache).float()


def _written(c):
    """(block, slot) -> value of every nonzero slot of a [nb, 1, BS, D] cache."""
    out = {}
    for blk, slot in torch.nonzero(c[:, 0, :, 0] != 0).tolist():
        out[(blk, slot)] = c[blk, 0, slot, 0].item()
    return out


def test_op_row_at_minus_one_untouched_and_no_entry(device):
    cache, table = _cache(device, 6), _ints([[0, 1], [2, 3], [4, 5]], device)
    c = _update(device, cache, table, [-1, 5, -1], 1.0, 2.0, 3.0)
    assert _written(c) == {(2, 5): 2.0} and diagnostics.entries(device) == ()
    c = _update(device, cache, table, [-1, 6, -1], 1.0, 4.0, 3.0, pos_dtype=ttsim.uint32)  # 0xFFFFFFFF
    assert _written(c) == {(2, 5): 2.0, (2, 6): 4.0} and diagnostics.entries(device) == ()


def test_op_position_past_the_row_lands_in_another_requests_block(device):
    cache, table = _cache(device, 6), _ints([[0, 1], [2, 3], [4, 5]], device)
    c = _update(device, cache, table, [64 + 4, 4, 1], 7.0, 2.0, 3.0)  # row 0 one page past its two
    assert _written(c) == {(2, 4): 2.0, (4, 1): 3.0}  # row 0's token wrote row 1's slot 4, row 1 won (row order)
    c = _update(device, cache, table, [64 + 9, -1, -1], 7.0, 0.0, 0.0)
    assert c[2, 0, 9, 0] == 7.0
    (e, e2) = diagnostics.entries(device)
    assert (e.op, e.chip, e.row, e.position, e.page, e.table_index, e.block, e.owners, e.access) == (
        "paged_update_cache", 0, 0, 68, 2, 2, 2, (1,), "write")
    assert e.line() == ("ttsim diagnostics: paged_update_cache chip 0 row 0 position 68: write page 2 "
                        "(page-table index 2) block 2, owner row 1")
    assert e2.position == 73 and e2.owners == (1,)


def _modulo_update(device, position, modulo):
    """tt-metal #57364's call: a 64-block cache, one row of 8 page-table entries (256 positions), and
    the buffer after the table holding block id 37 where page-table index 28 falls."""
    table = _ints([[0, 1, 2, 3, 4, 5, 6, 7]], device)  # 32 bytes in a 64-byte allocation
    after = [0] * 32
    after[28 - 16] = 37  # index 28 is 112 bytes into the table: element 12 of the next buffer
    neighbour = _ints([after], device)
    assert neighbour.buffer_address() == table.buffer_address() + 64
    cache = _cache(device, 64)
    ttsim.experimental.paged_update_cache(cache, _tokens(device, 5.0), page_table=table, cache_position_modulo=modulo,
                                          update_idxs_tensor=_ints([position], device))
    return ttsim.to_torch(cache).float()


def test_op_cache_position_modulo_is_bounded_by_the_cache_not_the_row_as_0_81_1(device):
    """The card accepts a modulo past the row (1024 > 8 pages x 32) because 1024 / 32 <= 64 cache blocks;
    position 900 wraps to itself, page 28: the reader takes entry 28 of an 8-entry row, i.e. the next
    buffer's bytes, and writes block 37 (tt-metal #57364, silently on a card; recorded here)."""
    c = _modulo_update(device, 900, 1024)
    assert _written(c) == {(37, 900 % BS): 5.0}
    (e,) = diagnostics.entries(device)
    assert (e.op, e.row, e.position, e.page, e.table_index, e.block, e.owners, e.access) == (
        "paged_update_cache", 0, 900, 28, 28, 37, (), "write")
    assert e.line() == ("ttsim diagnostics: paged_update_cache chip 0 row 0 position 900: write page 28 "
                        "(page-table index 28) block 37, owner no row of this call")


def test_op_cache_position_modulo_wraps_before_the_unchecked_lookup(device):
    """1024 + 900 wraps to 900 with the modulo (the same stray page 28); without it the same position
    is page 60, past the neighbour; a modulo that fits the row (256) keeps it in the row."""
    assert _written(_modulo_update(device, 1024 + 900, 1024)) == {(37, 900 % BS): 5.0}
    (e,) = diagnostics.entries(device)
    assert (e.position, e.page, e.table_index) == (900, 28, 28)  # the kernel's index, after the wrap
    diagnostics.clear(device)
    bounded = _modulo_update(device, 900, 256)  # 900 % 256 = 132: page 4 of the row, block 4
    assert _written(bounded) == {(4, 132 % BS): 5.0} and diagnostics.entries(device) == ()
    diagnostics.clear(device)
    _modulo_update(device, 1024 + 900, None)
    (e,) = diagnostics.entries(device)
    assert (e.page, e.table_index) == (60, 60)


def test_op_cache_position_modulo_refusals_speak_0_81_1s_words(device):
    with pytest.raises(ttsim.TTFatal, match=r"^TT_FATAL: cache_position_modulo \(48\) must be a positive multiple of "
                                            r"effective block_size \(32\)"):
        _modulo_update(device, 900, 48)
    with pytest.raises(ttsim.TTFatal, match=r"^TT_FATAL: cache_position_modulo/block_size \(65\) must be <= "
                                            r"max_num_blocks \(64\)$"):
        _modulo_update(device, 900, 65 * BS)


def test_op_last_row_past_its_pages_reads_the_buffer_after_the_table(device):
    """A 4x4 int32 table fills its 64-byte allocation exactly, so the next buffer starts where the
    table ends: row 3 at page 4 reads that neighbour's first element as its block id."""
    table = _ints([[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]], device)
    neighbour = _ints([[17, 16]], device)
    assert neighbour.buffer_address() == table.buffer_address() + 64
    cache = _cache(device, 18)
    c = _update(device, cache, table, [-1, -1, -1, 4 * BS + 3], 0.0, 0.0, 0.0, 5.0)
    assert _written(c) == {(17, 3): 5.0}
    (e,) = diagnostics.entries(device)
    assert (e.row, e.page, e.table_index, e.block, e.owners) == (3, 4, 16, 17, ())
    assert e.line().endswith("block 17, owner no row of this call")
    c = _update(device, cache, table, [-1, -1, -1, 5 * BS], 0.0, 0.0, 0.0, 6.0)  # the neighbour's second element
    assert c[16, 0, 0, 0] == 6.0


def test_op_page_boundary(device):
    cache, table = _cache(device, 6), _ints([[0, 1], [2, 3], [4, 5]], device)
    c = _update(device, cache, table, [2 * BS - 1, -1, -1], 1.0, 0.0, 0.0)
    assert _written(c) == {(1, BS - 1): 1.0} and diagnostics.entries(device) == ()
    c = _update(device, cache, table, [2 * BS, -1, -1], 2.0, 0.0, 0.0)
    assert c[2, 0, 0, 0] == 2.0 and [e.page for e in diagnostics.entries(device)] == [2]


def _untouched(chip, address, nbytes):
    return all(b.address + b.nbytes <= address or b.address >= address + nbytes for b in chip.live.values())


def test_op_minus_two_is_consumed_not_skipped(device):
    """-2 in row 1: the entry at page 0xFFFFFFFE // 32 is never-written memory (the chip's seeded
    junk, worked out by hand here), a block id far outside the cache; the card's tile address for it
    (uint32 tile id, then the 32 GB of DRAM wrapped as the bank addresses wrap) gets the token in row
    (2**32 - 2) % 32 = 30 of that tile."""
    cache, table = _cache(device, 6), _ints([[0, 1], [2, 3], [4, 5]], device)
    chip = device.chips[0]
    index = 1 * 2 + (2**32 - 2) // BS
    addr = table.buffer_address() + 4 * index
    assert _untouched(chip, addr, 4)
    block = int.from_bytes(junk_bytes(chip.dram.junk_key, addr, 4).tobytes(), "little")
    target = (cache.buffer_address() + (block & U32) * 2048) % DRAM_SIZE  # one tile per block here
    assert block >= 6 and _untouched(chip, target, 2048)
    c = _update(device, cache, table, [-1, -2, 3], 0.0, 8.0, 9.0)
    assert _written(c) == {(4, 3): 9.0}  # row 2's token; row 1's is not in the cache
    tile = numerics.decode(read_bytes(chip, ttsim.BufferType.DRAM, target, 2048), ttsim.bfloat16, ttsim.TILE_LAYOUT,
                           (32, 32))
    assert torch.all(tile[30].float() == 8.0)
    (e,) = diagnostics.entries(device)
    assert (e.row, e.position, e.page, e.table_index, e.block, e.owners, e.access) == (
        1, -2, (2**32 - 2) // BS, index, block, (), "write")


def test_op_decode_hang_names_op_row_and_position(device):
    q = ttsim.from_torch(torch.ones(1, 3, 2, D), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    cache, table = _cache(device, 6), _ints([[0, 1], [2, 3], [4, 5]], device)
    for bad in (1206993233, -2):
        out = ttsim.transformer.paged_scaled_dot_product_attention_decode(
            q, cache, cache, table, cur_pos_tensor=_ints([5, bad, -1], device))
        with pytest.raises(ttsim.TTFatal, match=TIMEOUT + rf" \(paged_scaled_dot_product_attention_decode batch row 1: "
                                                          rf"position {bad} spans"):
            ttsim.to_torch(out)
    assert [(e.op, e.row, e.position, e.access) for e in diagnostics.entries(device)] == [
        ("paged_scaled_dot_product_attention_decode", 1, 1206993233, "hang"),
        ("paged_scaled_dot_product_attention_decode", 1, -2, "hang")]
    assert "no block, owner -" in diagnostics.entries(device)[0].line()


def test_op_decode_span_reaching_the_tables_end_is_the_hang(device):
    """The last row's last own position is computed; one more walks past the page table's buffer."""
    q = ttsim.from_torch(torch.ones(1, 2, 2, D), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    cache, table = _cache(device, 4), _ints([[0, 1], [2, 3]], device)
    decode = ttsim.transformer.paged_scaled_dot_product_attention_decode
    ttsim.to_torch(decode(q, cache, cache, table, cur_pos_tensor=_ints([-1, 2 * BS - 1], device)))
    assert diagnostics.entries(device) == ()
    with pytest.raises(ttsim.TTFatal, match=TIMEOUT + r" \(paged_scaled_dot_product_attention_decode batch row 1: "
                                                      r"position 64 spans 3 pages from page-table index 2"):
        ttsim.to_torch(decode(q, cache, cache, table, cur_pos_tensor=_ints([-1, 2 * BS], device)))
    (e,) = diagnostics.entries(device)
    assert (e.row, e.position, e.page, e.table_index, e.block, e.access) == (1, 64, 2, 4, None, "hang")


def test_op_decode_past_the_row_reads_the_next_rows_keys(device):
    g = torch.Generator().manual_seed(6)
    kv = torch.randn(6, 1, BS, D, generator=g)
    qv = torch.randn(1, 3, 2, D, generator=g)
    cache = ttsim.from_torch(kv, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    q = ttsim.from_torch(qv, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    table = _ints([[0, 1], [2, 3], [4, 5]], device)
    out = ttsim.transformer.paged_scaled_dot_product_attention_decode(
        q, cache, cache, table, cur_pos_tensor=_ints([2 * BS - 1, 2 * BS, -1], device))
    got = ttsim.to_torch(out).float()
    kb = kv.bfloat16()
    torch.testing.assert_close(got[0, 0], _ref_row(qv.bfloat16(), kb, kb, [0, 1], 64, 0), rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(got[0, 1], _ref_row(qv.bfloat16(), kb, kb, [2, 3, 4], 65, 1), rtol=2e-2, atol=2e-2)
    (e,) = diagnostics.entries(device)  # row 0 at its last valid position is not an entry; row 1 one past is
    assert (e.row, e.position, e.page, e.block, e.owners, e.access) == (1, 64, 2, 4, (2,), "read")


def test_op_block_outside_the_cache_writes_the_buffer_after_it(device):
    """A table entry naming block 2 of a 2-block cache: the card writes the tile after the cache's
    last one, which is the next buffer (here a bf16 tile the test then reads back)."""
    cache = _cache(device, 2)
    after = ttsim.from_torch(torch.full((32, 32), -1.0), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    assert after.buffer_address() == cache.buffer_address() + 2 * 2048
    table = _ints([[0, 2]], device)
    _update(device, cache, table, [BS + 5], 4.0)
    a = ttsim.to_torch(after).float()
    assert torch.all(a[5] == 4.0) and torch.all(a[:5] == -1.0) and torch.all(a[6:] == -1.0)
    (e,) = diagnostics.entries(device)
    assert (e.row, e.page, e.block, e.owners, e.access) == (0, 1, 2, (0,), "write")
    # decode reads it back from there too
    q = ttsim.from_torch(torch.ones(1, 1, 2, D), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    out = ttsim.transformer.paged_scaled_dot_product_attention_decode(q, cache, cache, table,
                                                                      cur_pos_tensor=_ints([BS + 5], device))
    vals = torch.cat([torch.zeros(BS), torch.full((5,), -1.0), torch.tensor([4.0])])  # keys = values here
    want = torch.softmax(vals * D / D**0.5, dim=-1)  # q is all ones: score = key value * D / sqrt(D)
    torch.testing.assert_close(ttsim.to_torch(out).float()[0, 0, 0], (want @ vals).expand(D), rtol=2e-2, atol=2e-2)


def test_op_block_outside_the_cache_in_free_memory_is_what_the_next_buffer_there_holds(device):
    """Nothing lives after the cache: the card's write lands in free memory, and a buffer allocated
    there later, uninitialized, shows it (the rest of that tile: the seeded junk it held before)."""
    table, x = _ints([[0, 2]], device), _tokens(device, 3.0)
    positions = _ints([BS + 5], device)
    cache = _cache(device, 2)
    end = cache.buffer_address() + 2 * 2048
    before = ttsim.allocate_tensor_on_device(ttsim.Shape([32, 32]), ttsim.bfloat16, ttsim.TILE_LAYOUT, device)
    assert before.buffer_address() == end
    junk = ttsim.to_torch(before)
    ttsim.deallocate(before)
    ttsim.experimental.paged_update_cache(cache, x, update_idxs_tensor=positions, page_table=table)
    ttsim.synchronize_device(device)
    later = ttsim.allocate_tensor_on_device(ttsim.Shape([32, 32]), ttsim.bfloat16, ttsim.TILE_LAYOUT, device)
    assert later.buffer_address() == end
    got = ttsim.to_torch(later)
    assert torch.all(got[5].float() == 3.0)
    rest = torch.ones(32, dtype=torch.bool)
    rest[5] = False
    assert torch.equal(got[rest].view(torch.int16), junk[rest].view(torch.int16))


def test_op_block_outside_the_cache_is_addressed_by_the_cards_tile_id(device):
    """Two heads of 64 channels: a block is 4 tiles (head-major, then column tile), so block 1 of a
    1-block cache is tiles 4..7 counted from the cache's first: tiles 0..3 of the buffer after it.
    Head 1's token lands in that buffer's tiles 2 and 3, at row 9."""
    cache = ttsim.from_torch(torch.zeros(1, 2, BS, 64), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    after = ttsim.from_torch(torch.zeros(32, 4 * 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    assert after.buffer_address() == cache.buffer_address() + 4 * 2048
    x = torch.zeros(1, 1, 2, 64)
    x[0, 0, 0], x[0, 0, 1] = torch.arange(64) + 1.0, -(torch.arange(64) + 1.0)
    ttsim.experimental.paged_update_cache(
        cache, ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device),
        update_idxs_tensor=_ints([9], device), page_table=_ints([[1]], device))
    a = ttsim.to_torch(after).float()
    assert torch.equal(a[9, :64], torch.arange(64) + 1.0) and torch.equal(a[9, 64:], -(torch.arange(64) + 1.0))
    assert torch.count_nonzero(a) == 128 and torch.count_nonzero(ttsim.to_torch(cache).float()) == 0
    (e,) = diagnostics.entries(device)
    assert (e.block, e.owners, e.access) == (1, (0,), "write")  # the page is the row's own; its entry is not


def test_embedding_past_the_table_reads_the_next_buffer_and_stores_its_nans_canonical(device):
    """A 16 x 2 bf16 table fills its 64 bytes: id 16 reads the first row of the buffer after it
    (here two non-canonical bf16 NaN patterns, stored 0x7FC0 like every bf16 value ttsim stores);
    id 17 its second; both are recorded."""
    table = ttsim.from_torch(torch.arange(32, dtype=torch.float32).reshape(16, 2), dtype=ttsim.bfloat16,
                             layout=ttsim.ROW_MAJOR_LAYOUT, device=device)
    after = ttsim.from_torch(torch.tensor([[0xFFC1, 0x7F81, 0x3F80, 0x4000]], dtype=torch.int32), dtype=ttsim.uint16,
                             device=device)
    assert after.buffer_address() == table.buffer_address() + 64
    ids = ttsim.from_torch(torch.tensor([[16, 2, 17]], dtype=torch.int32), dtype=ttsim.uint32, device=device)
    out = ttsim.to_torch(ttsim.embedding(ids, table)).reshape(3, 2)
    assert out.view(torch.int16)[0].tolist() == [0x7FC0, 0x7FC0]
    assert out[1].float().tolist() == [4.0, 5.0] and out[2].float().tolist() == [1.0, 2.0]
    assert [(e.op, e.row, e.position, e.block, e.access) for e in diagnostics.entries(device)] == [
        ("embedding", 0, 16, 16, "read"), ("embedding", 2, 17, 17, "read")]


WORKLOAD = r"""
import torch, ttsim
from ttsim import diagnostics
dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
ints = lambda rows: ttsim.from_torch(torch.tensor(rows, dtype=torch.int32), dtype=ttsim.int32, device=dev)
cache = ttsim.from_torch(torch.zeros(6, 1, 32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=dev)
x = ttsim.from_torch(torch.ones(1, 3, 1, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=dev)
table = ints([[0, 1], [2, 3], [4, 5]])
for pos in ([70, -1, 3], [-1, 1206993233, 2], [-7, 5, -1]):
    try:
        ttsim.experimental.paged_update_cache(cache, x, update_idxs_tensor=ints(pos), page_table=table)
        ttsim.synchronize_device(dev)
    except ttsim.TTFatal as e:
        print(e)
for e in diagnostics.entries(dev):
    print(e.line())
print(ttsim.digest_state([dev]))
"""


def _run(hashseed: str) -> str:
    env = {**os.environ, "TTSIM_SEED": "5", "PYTHONHASHSEED": hashseed}
    return subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, text=True,
                          check=True).stdout


def test_same_seed_same_bytes_and_same_diagnostics_across_processes():
    a, b = _run("1"), _run("2")
    assert a == b
    lines = a.splitlines()
    assert sum("ttsim diagnostics:" in ln for ln in lines) >= 4  # both chips of the mesh record
    assert any("position 70: write page 2" in ln and "owner row 1" in ln for ln in lines)
