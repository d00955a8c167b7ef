"""The sweep model: the cheapest model that keeps the serving path's fidelity.

Same interface as :class:`model.qwen36.Qwen36Model` (prefill / decode / sample_on_device /
reset_slot), same ttnn ops on the same device objects, so the generator, its per-bucket
traces, their uninitialized persistent input buffers, on-device argmax into the trace's
token buffer, ``plus_one`` on positions, the allocator's residue and vLLM's scheduler all
behave exactly as with the real model. What it drops is the transformer: the next token
is a fixed function of (current token, position) — logits are the sum of two table rows
(small integers, exact in bf16) — so any wrong input token or position at any step
changes the continuation and is caught by the serial-answer check. Prefill embeds the
whole prompt on device (bf16 activations that are freed, leaving realistic residue).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch

from .host_ints import int32_tensor
from .slot_remap import check_remap


@dataclass(frozen=True)
class MarkovConfig:
    vocab_size: int = 256
    max_context: int = 1024
    prefill_chunk: int = 128
    block_size: int = 32


MARKOV = MarkovConfig()


@functools.lru_cache(maxsize=8)
def _table(rows: int, cols: int, salt: int) -> torch.Tensor:
    """Integers 0..63 from a multiplicative hash: exact in bf16, sums of two stay exact."""
    r = torch.arange(rows, dtype=torch.int64).unsqueeze(1)
    c = torch.arange(cols, dtype=torch.int64).unsqueeze(0)
    h = (r * 0x9E3779B1 + c * 0x85EBCA77 + salt * 0xC2B2AE3D) & 0xFFFFFFFF
    h = (h ^ (h >> 15)) * 0x2C1B3C6D & 0xFFFFFFFF
    return ((h ^ (h >> 12)) % 64).to(torch.float32)


@functools.lru_cache(maxsize=8)
def _table_bf16(rows: int, cols: int, salt: int) -> torch.Tensor:
    """:func:`_table` in bf16 (exact: integers 0..63), the host form a model uploads each run:
    from_torch stores exactly these values either way, and copies them onto the device."""
    return _table(rows, cols, salt).to(torch.bfloat16)


@functools.lru_cache(maxsize=None)
def _successors(p: int, config: MarkovConfig) -> list[int]:
    """The greedy next token after each token at position ``p``: one row-wise argmax over
    every token at once (the same sums and the same first-index ties as one token at a time)."""
    tok = _table(config.vocab_size, config.vocab_size, 1)
    pos = _table(config.max_context, config.vocab_size, 2)
    return torch.argmax(tok + pos[p], dim=1).tolist()


def greedy_reference(prompt, max_tokens: int, config: MarkovConfig = MARKOV) -> list[int]:
    """The model's greedy answer computed on the host. The device math is exact (integer
    table values in bf16, argmax ties to the first index), so this equals a serial run on
    the device bit for bit; tests/serving checks that on seeds."""
    out: list[int] = []
    t, p = prompt[-1], len(prompt) - 1
    while len(out) < max_tokens:
        t = _successors(p, config)[t]
        out.append(t)
        p += 1
    return out  # the tables are cached and never mutated (from_torch copies them)


class MarkovModel:
    def __init__(self, ttnn, mesh_device, config: MarkovConfig = MARKOV, weights=None, *, max_slots: int = 8,
                 num_blocks: int = 0):
        self.ttnn = ttnn
        self.mesh_device = mesh_device
        self.config = config
        self.max_slots = max_slots
        rm = ttnn.ROW_MAJOR_LAYOUT
        self.tok_table = ttnn.from_torch(_table_bf16(config.vocab_size, config.vocab_size, 1), dtype=ttnn.bfloat16,
                                         layout=rm, device=mesh_device)
        self.pos_table = ttnn.from_torch(_table_bf16(config.max_context, config.vocab_size, 2), dtype=ttnn.bfloat16,
                                         layout=rm, device=mesh_device)

    def reset_slot(self, slot: int) -> None:
        if not 0 <= slot < self.max_slots:
            raise ValueError(f"slot {slot} is outside 0..{self.max_slots - 1}")

    def gather_slots(self, remap) -> None:
        """New slot ``i`` takes old slot ``remap[i]`` (a permutation of 0..max_slots-1). This
        model keeps no per-slot state (the next token is a function of token and position), so
        only the remap is checked: ValueError for a wrong length or a non-permutation, with the
        same message as the hybrid's."""
        check_remap(remap, self.max_slots)

    def _logits(self, token_ids, position_ids):
        """[1, B] uint32 ids -> [1, 1, B, vocab] bf16 logits (device ops only)."""
        ttnn = self.ttnn
        a = ttnn.embedding(token_ids, self.tok_table, layout=ttnn.TILE_LAYOUT)
        b = ttnn.embedding(position_ids, self.pos_table, layout=ttnn.TILE_LAYOUT)
        s = ttnn.add(a, b)
        out = ttnn.reshape(s, [1, 1, s.shape[1], self.config.vocab_size])
        for t in (a, b, s):
            ttnn.deallocate(t)
        return out

    #: ``prefill(rows=k)`` gives the logits of the last ``k`` tokens (tt_transformers' prefill tile)
    PREFILL_ROWS = True

    def prefill(self, tokens, *, slot: int, page_table_row: torch.Tensor, start_pos: int = 0,
                rows: int = 1) -> torch.Tensor:
        """The last token's logits, float32 [vocab] on host; ``rows=k``: the last ``k`` tokens'
        logits [k, vocab] (each row is that token's own next-token logits)."""
        ttnn, c = self.ttnn, self.config
        self.reset_slot(slot)
        if start_pos % c.prefill_chunk:
            raise ValueError(f"start_pos={start_pos} must be a multiple of prefill_chunk={c.prefill_chunk}")
        n = len(tokens)
        if n == 0 or start_pos + n > c.max_context:
            raise ValueError(f"tokens: {n} tokens at start_pos {start_pos} do not fit max_context {c.max_context}")
        if not 1 <= rows <= n:
            raise ValueError(f"rows={rows} must be in 1..{n} (the tokens prefilled)")
        rm = ttnn.ROW_MAJOR_LAYOUT
        ids = ttnn.from_torch(int32_tensor(tokens).unsqueeze(0), dtype=ttnn.uint32, layout=rm,
                              device=self.mesh_device)
        pos = ttnn.from_torch(torch.arange(start_pos, start_pos + n, dtype=torch.int32).unsqueeze(0),
                              dtype=ttnn.uint32, layout=rm, device=self.mesh_device)
        logits = self._logits(ids, pos)
        host = ttnn.to_torch(logits if self.mesh_device.get_num_devices() == 1
                             else ttnn.get_device_tensors(logits)[0])
        for t in (ids, pos, logits):
            ttnn.deallocate(t)
        last = host.reshape(n, c.vocab_size)[n - rows:].to(torch.float32)
        return last[0] if rows == 1 else last

    def decode(self, tokens, positions, page_table, slots):
        ttnn = self.ttnn
        b = positions.shape[0]
        # inactive rows hold -1: gather row 0 for them (their result is never used)
        f = ttnn.typecast(positions, ttnn.float32)
        r = ttnn.relu(f)
        p = ttnn.typecast(r, ttnn.uint32)
        p2 = ttnn.reshape(p, [1, b])
        out = self._logits(tokens, p2)
        for t in (f, r, p, p2):
            ttnn.deallocate(t)
        return out

    def sample_on_device(self, logits, out_tokens) -> None:
        ttnn = self.ttnn
        b = logits.shape[2]
        flat = ttnn.to_layout(logits, ttnn.ROW_MAJOR_LAYOUT)
        rm = ttnn.reshape(flat, [1, b, self.config.vocab_size])
        ttnn.argmax(rm, dim=-1, output_tensor=out_tokens)
        ttnn.deallocate(flat)
        ttnn.deallocate(rm)
