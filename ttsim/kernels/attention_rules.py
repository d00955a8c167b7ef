"""Attention argument rules, each written once, for both layers that enforce them.

A rule looks at plain shapes and values and raises :class:`AttentionArgError` (a
``ValueError``) saying what is wrong. The torch kernels (``ttsim.kernels.attention``) let it
propagate; the device layer (``ttsim.ops.attention``) calls the same rule at the call, as
ttnn validates on the host, and re-raises it as ``TTFatal`` naming the op. Argument names
are the caller's: the ops quote ttnn's (``input_tensor_q``...), the kernels their own
parameters (``q``, ``k_cache``...).

Rules only one layer has stay there: ttnn's dtypes, layouts and tile alignment in the ops;
torch dtypes and positions met while running (``IndexError`` naming the row) in the kernels.
"""

from __future__ import annotations

import math
from typing import NoReturn, Sequence

Shape = Sequence[int]
TTNN_QKV = ("input_tensor_q", "input_tensor_k", "input_tensor_v")


class AttentionArgError(ValueError):
    """An attention argument breaks one of the rules below."""


class AttentionIndexError(AttentionArgError, IndexError):
    """A batch index outside the page table: an IndexError too, as the kernels always raised."""


def _fail(message: str) -> NoReturn:
    raise AttentionArgError(message)


def rank4(name: str, shape: Shape) -> None:
    if len(shape) != 4:
        _fail(f"{name} must be rank 4, got shape {list(shape)}")


def qkv(q: Shape, k: Shape, v: Shape, *, decode: bool = False, paged: bool = False,
        names: tuple[str, str, str] = TTNN_QKV) -> None:
    """q/k/v shapes: q ``[b, nqh, Sq, d]`` (``decode``: ``[1, b, nqh, d]``), k and v
    ``[b, nkv, Sk, d]`` (``paged``: cache blocks ``[num_blocks, nkv, block_size, d]``, no
    batch). GQA: query head h reads kv head h // (nqh // nkv). v's head dim may differ."""
    qn, kn, vn = names
    for name, shape in zip(names, (q, k, v)):
        rank4(name, shape)
    if decode and q[0] != 1:
        _fail(f"{qn} must be [1, batch, heads, head_dim], got shape {list(q)}")
    b, nqh = (q[1], q[2]) if decode else (q[0], q[1])
    if not paged and k[0] != b:
        _fail(f"batch differs: {qn} has {b}, {kn} has {k[0]}")
    if tuple(v[:3]) != tuple(k[:3]):
        _fail(f"{vn} {list(v)} does not match {kn} {list(k)} (all but the head dim)")
    if k[1] == 0 or nqh % k[1]:
        _fail(f"query heads ({nqh}) must be a multiple of key/value heads ({k[1]})")
    if q[3] != k[3]:
        _fail(f"head dims differ: {qn} has {q[3]}, {kn} has {k[3]}")


def mask(shape: Shape, b: int, nqh: int, sq: int, sk: int) -> None:
    """Prefill's additive mask broadcasts over batch and heads, never over positions."""
    s = tuple(shape)
    if len(s) != 4 or s[0] not in (1, b) or s[1] not in (1, nqh) or s[2:] != (sq, sk):
        _fail(f"attn_mask must be [{b} or 1, {nqh} or 1, {sq}, {sk}], got shape {list(s)}")


def decode_mask(shape: Shape | None, b: int, nqh: int, length: int) -> None:
    """Non-causal decode masks every cache position of every row: tt-metal's [b, 1, nqh, L]."""
    want = [b, 1, nqh, length]
    if shape is None:
        _fail(f"is_causal=False needs attn_mask {want}")
    if list(shape) != want:
        _fail(f"attn_mask must be {want} (batch, 1, heads, cache positions), got shape {list(shape)}")


def window(size) -> None:
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size <= 0):
        _fail(f"sliding_window_size must be a positive int or None, got {size!r}")


def sink(shape: Shape, nqh: int, layout: str) -> None:
    """One sink per query head, in the caller's layout: ttnn's prefill ``[1, nqh, 1, 1]``,
    ttnn's decode ``[nqh, W]`` (the sink in column 0; a card tile-pads W to 32), or the
    kernels' ``logits`` (nqh values)."""
    s = tuple(shape)
    want, ok = {
        "prefill": (f"[1, {nqh}, 1, 1]", s == (1, nqh, 1, 1)),
        "decode": (f"[{nqh}, 1 or 32]", len(s) == 2 and s[0] == nqh and s[1] >= 1),
        "logits": (f"{nqh} logits", math.prod(s) == nqh),
    }[layout]
    if not ok:
        _fail(f"attention_sink must be {want} (one sink per query head), got shape {list(s)}")


def chunk_start(idx, q_chunk: int, k_chunk: int) -> None:
    """Chunked prefill starts on both chunk grids (ttnn requires it)."""
    if isinstance(idx, bool) or not isinstance(idx, int) or idx < 0 or idx % q_chunk or idx % k_chunk:
        _fail(f"chunk_start_idx={idx!r} must be a non-negative multiple of q_chunk_size={q_chunk} "
              f"and k_chunk_size={k_chunk}")


def page_table(name: str, shape: Shape, batch: int | None = None) -> None:
    """``[batch, max_pages]``; with ``batch``, a row for every batch row."""
    if len(shape) != 2:
        _fail(f"{name} must be [batch, max_pages], got shape {list(shape)}")
    if batch is not None and shape[0] < batch:
        _fail(f"{name} has {shape[0]} rows, the batch has {batch}")


def positions(name: str, shape: Shape, batch: int) -> None:
    """Decode positions / cache update indices: one per batch row."""
    if tuple(shape) != (batch,):
        _fail(f"{name} must be [{batch}] (one position per batch row), got shape {list(shape)}")


def update_input(name: str, shape: Shape, cache: Shape, padded_heads: int | None = None) -> None:
    """One token per batch row, ``[1, b, nkv, d]`` for a cache ``[blocks, nkv, block_size, d]``.
    With ``padded_heads`` the head axis may also be padded to a multiple of it (>= nkv)."""
    rank4(name, shape)
    nkv, d = cache[1], cache[3]
    heads = shape[2] == nkv or (padded_heads is not None and shape[2] % padded_heads == 0 and shape[2] >= nkv)
    if shape[0] != 1 or not heads or shape[3] != d:
        _fail(f"{name} must be [1, batch, {nkv}{' (or tile-padded)' if padded_heads else ''}, {d}] for cache "
              f"{list(cache)}, got shape {list(shape)}")


def fill_input(name: str, shape: Shape, cache: Shape) -> None:
    """One batch row's sequence, ``[1, nkv, S, d]`` for a cache ``[blocks, nkv, block_size, d]``."""
    if len(shape) != 4 or shape[0] != 1 or shape[1] != cache[1] or shape[3] != cache[3]:
        _fail(f"{name} must be [1, {cache[1]}, S, {cache[3]}] for cache {list(cache)}, got shape {list(shape)}")


def batch_index(idx, rows: int) -> None:
    if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < rows:
        raise AttentionIndexError(f"batch_idx={idx!r} is outside the page table's {rows} rows")
