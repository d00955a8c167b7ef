"""Attention kernels of ttsim: pure torch functions on plain torch tensors.

The device layer (``ttsim.ops``) wraps these; nothing here knows about ttsim tensors,
devices, layouts or dtypes beyond torch's.

Conventions (shared by every function in this module)
-----------------------------------------------------
* Inputs may be any floating dtype (bf16 storage on the card); every kernel computes in
  float32 and returns float32. Rounding to the output dtype is the device layer's job.
* Layouts follow ttnn: prefill ``q [b, nqh, Sq, d]``, ``k``/``v`` ``[b, nkv, Sk, d]``;
  decode ``q [1, b, nqh, d]``; paged caches ``[num_blocks, nkv, block_size, d]`` with a
  ``page_table [b, max_pages]`` of block ids (virtual position ``p`` of row ``r`` lives
  in block ``page_table[r, p // block_size]`` at offset ``p % block_size``).
* GQA: ``nqh % nkv == 0``; query head ``h`` uses kv head ``h // (nqh // nkv)``. The
  kernels never repeat K/V: q is regrouped to ``[b * nkv, Sq * group, d]`` (rows ordered
  by position, then by head within the group) so one batched matmul serves a whole group.
* ``scale``: multiplies q (in float32) before ``q @ k^T``; ``None`` means ``1/sqrt(d)``.
* Causal with an offset: query row ``i`` sits at absolute position ``q_offset + i`` and
  sees keys ``j <= q_offset + i`` (bottom-right style alignment; torch's
  ``is_causal=True`` is top-left aligned and wrong for offset chunks, so it is not used).
* Sliding window ``window`` (None = off): causal row at position ``p`` sees keys
  ``p - window + 1 .. p``; non-causal rows see ``p - window // 2 .. p + window // 2``
  (tt-metal's semantics, from its SDPA unit tests' reference masks).
* Attention sink ``sink`` (None = off): one float32 LOGIT per query head (already scaled)
  that joins every row's softmax denominator and contributes no value (gpt-oss style:
  ``softmax([scores, sink])[:-1] @ v``).
* Masking: ``attn_mask`` is ADDITIVE (``[b or 1, nqh or 1, Sq, Sk]``); ``-inf`` masks a
  key out, finite values are biases. A query row that sees no key at all (every score
  ``-inf`` after the causal and additive masks, or ``Sk == 0``) is FULLY MASKED and its
  output is exactly 0.0 in every element -- never NaN. NaN in the inputs propagates.

Kernels
-------
* :func:`sdpa_streaming` -- online softmax over KV chunks of ``k_chunk_size`` (running
  max ``m``, running sum ``l``, accumulator rescaled by ``exp(m_old - m_new)``); the
  largest score buffer is ``(nqh/nkv * q_chunk_size) x k_chunk_size`` per kv head, never
  ``Sq x Sk``; with ``is_causal`` KV chunks entirely above the diagonal are skipped.
* :func:`sdpa_legacy` -- softmax materialised per query chunk
  (``q_chunk_size x visible keys`` scores).
* :func:`chunked_sdpa_paged` -- chunked prefill against a paged cache (always the
  streaming kernel, as tt-metal's chunked op; the legacy kernel stays a cross-check).
* :func:`paged_sdpa_decode` -- one query token per batch row against a paged cache;
  rows whose position is -1 are skipped (their ``out`` rows are left untouched).
* :func:`paged_update_cache` / :func:`paged_fill_cache` -- in-place paged cache writes.

Threads and determinism: the q chunks of a call (and the rows of a decode) are spread
over ``torch.get_num_threads()`` Python threads that each run single-threaded torch ops;
for the call's duration the global intra-op thread count is 1 (restored afterwards).
Every chunk is computed by the same ops whichever thread runs it, so outputs are bitwise
identical for any thread count (and the kernel is not slowed down by OpenMP barriers on a
busy machine).

Arguments: the shape rules the device layer also enforces (GQA heads, masks, sinks, page
tables, positions...) are written once in :mod:`.attention_rules` and raise its
``AttentionArgError`` (a ``ValueError``); non-float inputs raise ``TypeError``.

Bounds: chunked prefill and ``paged_fill_cache`` take their positions from the host; a
position whose page index is beyond the page table, or whose block id is not a block of the
cache, raises ``IndexError`` naming the batch row and position, before anything is written.
:func:`paged_update_cache` and :func:`paged_sdpa_decode` take device-resident positions and, given
the device layer's ``memory`` (:mod:`.card_index`), consume them as a card does: unsigned,
skipped only at exactly -1, an index past the row read from the table's memory. Without
``memory`` they refuse such a position as the other kernels do.
"""

from __future__ import annotations

import math
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Optional, Sequence, Union

import torch

from . import attention_rules as R
from .card_index import U32, DeviceHang, PagedMemory, StrayIndex, owners, unsigned

__all__ = [
    "SKIP_POSITION",
    "sdpa_streaming",
    "sdpa_legacy",
    "chunked_sdpa_paged",
    "paged_sdpa_decode",
    "paged_update_cache",
    "paged_fill_cache",
]

#: The position value that marks an inactive decode row / skipped cache update.
SKIP_POSITION = -1
#: a page-table entry of -1 (uint32 0xFFFFFFFF) is an unmapped page: tt-metal's fill-cache
#: writer consumes that block's input tiles and writes nothing (SKIP_PAGE_TABLE_ENTRY)
SKIP_PAGE_TABLE_ENTRY = -1

_F32 = torch.float32
_NEG_INF = float("-inf")

IntSeq = Union[torch.Tensor, Sequence[int]]


# ----------------------------------------------------------------------------- helpers


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _resolve_scale(scale: Optional[float], d: int) -> float:
    return 1.0 / math.sqrt(d) if scale is None else float(scale)


def _check_float(name: str, t: torch.Tensor) -> None:
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if not t.is_floating_point():
        raise TypeError(f"{name} must be a floating tensor, got {t.dtype}")


def _check_qkv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    for name, t in (("q", q), ("k", k), ("v", v)):
        _check_float(name, t)
    R.qkv(q.shape, k.shape, v.shape, names=("q", "k", "v"))
    b, nqh, sq, d = q.shape
    _, nkv, sk, _ = k.shape
    return b, nqh, nkv, sq, sk, d, v.shape[3]


def _q_block(q: torch.Tensor, qs: int, qe: int, scale: float, nkv: int) -> torch.Tensor:
    """Query chunk ``[qs, qe)`` as float32 ``[b*nkv, group*(qe-qs), d]`` scaled by ``scale``.

    ``[b, nqh, qc, d]`` is already ``[b*nkv, group*qc, d]`` once contiguous: the rows of
    kv head ``h`` are query heads ``h*group .. h*group+group-1`` (each ``qc`` positions),
    so one batched matmul per kv head serves its whole group without repeating K/V.
    """
    b, nqh, _, d = q.shape
    blk = torch.empty((b, nqh, qe - qs, d), dtype=_F32)
    blk.copy_(q[:, :, qs:qe])
    blk.mul_(scale)
    return blk.view(b * nkv, (nqh // nkv) * (qe - qs), d)


def _kv_f32(t: torch.Tensor) -> torch.Tensor:
    b, h, s, d = t.shape
    return t.to(_F32).reshape(b * h, s, d)


def _apply_masks(s, *, b, nqh, qs, qe, ks, ke, causal, q_offset, attn_mask, scratch, window=None) -> bool:
    """Apply the additive mask and the causal mask to a score block ``s``
    (``[b*nkv, group*(qe-qs), ke-ks]``) in place. Returns True if -inf may have been
    introduced (so rows may be fully masked in this block)."""
    qc, kc = qe - qs, ke - ks
    masked = False
    if attn_mask is not None:
        blk = attn_mask[:, :, qs:qe, ks:ke]
        if blk.dtype != _F32:  # widened (exactly) into a reused buffer: a mixed-dtype add_ is 4x slower
            blk = scratch.take("mask", blk.numel()).view(blk.shape).copy_(blk)
        s.view(b, nqh, qc, kc).add_(blk)  # broadcasts a batch / head dim of 1
        masked = True
    # Causal: the block needs masking only if its last key lies beyond the position of
    # the chunk's first query row (q_offset + qs).
    if causal and ke - 1 > q_offset + qs:
        qpos = torch.arange(q_offset + qs, q_offset + qe).view(qc, 1)
        kpos = torch.arange(ks, ke).view(1, kc)
        s.view(b * nqh, qc, kc).masked_fill_(kpos > qpos, _NEG_INF)
        masked = True
    if window is not None:
        qpos = torch.arange(q_offset + qs, q_offset + qe).view(qc, 1)
        kpos = torch.arange(ks, ke).view(1, kc)
        if causal:
            outside = kpos < qpos - (window - 1)
        else:
            half = window // 2
            outside = (kpos < qpos - half) | (kpos > qpos + half)
        if bool(outside.any()):
            s.view(b * nqh, qc, kc).masked_fill_(outside, _NEG_INF)
            masked = True
    return masked


def _sink_rows(sink: torch.Tensor, b: int, nkv: int, qc: int) -> torch.Tensor:
    """Per-head sink logits ``[nqh]`` laid out like a q block's rows: ``[b*nkv, group*qc]``."""
    group = sink.numel() // nkv
    rows = sink.to(_F32).view(1, nkv, group, 1).expand(b, nkv, group, qc)
    return rows.reshape(b * nkv, group * qc)


def _causal_key_end(sk: int, causal: bool, q_offset: int, qe: int) -> int:
    """Number of keys (from 0) any row of the q chunk ending at ``qe`` may see."""
    return min(sk, q_offset + qe) if causal else sk


def _validate_common(q, k, v, scale, q_offset, q_chunk_size, k_chunk_size, attn_mask):
    dims = _check_qkv(q, k, v)
    b, nqh, nkv, sq, sk, d, dv = dims
    _positive_int("q_chunk_size", q_chunk_size)
    _positive_int("k_chunk_size", k_chunk_size)
    if isinstance(q_offset, bool) or not isinstance(q_offset, int) or q_offset < 0:
        raise ValueError(f"q_offset must be a non-negative int, got {q_offset!r}")
    if attn_mask is not None:
        _check_float("attn_mask", attn_mask)
        R.mask(attn_mask.shape, b, nqh, sq, sk)
    return dims, _resolve_scale(scale, d)


# ----------------------------------------------------------------------------- cores


class _Scratch(threading.local):
    """Score buffers reused by the q chunks one thread runs in one call. A fresh multi-MB tensor
    per chunk is fresh pages, faulted in on first touch (at 32k keys that doubled the score
    bmm and tripled the softmax); the same ops writing the same values elsewhere change no bit."""

    def take(self, slot: str, n: int) -> torch.Tensor:
        buf = self.__dict__.get(slot)
        if buf is None or buf.numel() < n:
            buf = self.__dict__[slot] = torch.empty(n, dtype=_F32)
        return buf[:n]


def _rescale(m_old: torch.Tensor, m_new: torch.Tensor) -> torch.Tensor:
    """The online softmax's rescale of the running state, ``exp(m_old - m_new)``: its own
    function so the mutation tests can break exactly this step (tests/model, tests/kernels)."""
    return torch.exp(m_old - m_new)


def _streaming_chunk(qb, kT, vf, *, b, nqh, qs, qe, causal, q_offset, attn_mask, k_chunk, out, scratch, window=None,
                     sink=None):
    """Online softmax of one q chunk over KV chunks; writes ``out`` ``[b, nqh, qc, dv]``.

    Per KV chunk: scores ``s`` (the only score buffer, ``[b*nkv, group*qc, kc]``), the
    chunk's softmax ``p = exp(s - m_blk) / l_blk`` (torch's fused row softmax), then

        m_new = max(m, m_blk)
        alpha = exp(m - m_new)                 # rescales the old state
        beta  = l_blk * exp(m_blk - m_new)     # weight of this chunk
        l     = l * alpha + beta               # running sum of exp(s - m_new)
        acc   = acc * alpha + (p @ v) * beta   # running sum of exp(s - m_new) v

    ``l_blk`` is recovered from the softmax itself: at the row's arg-max
    ``p = exp(0) / l_blk``, so ``l_blk = 1 / max(p)`` (any rounding there scales the
    chunk's ``beta`` and ``p @ v`` alike, so it cancels in ``acc / l``). This is the
    textbook recurrence with the chunk-local work fused into torch's row softmax; it
    passes over the score block four times instead of seven.
    """
    bb, rows, _ = qb.shape
    sk, dv = kT.shape[2], vf.shape[2]
    k_end = _causal_key_end(sk, causal, q_offset, qe)
    m = torch.full((bb, rows), _NEG_INF, dtype=_F32)  # running max
    l = torch.zeros((bb, rows), dtype=_F32)  # running sum
    acc = torch.zeros((bb, rows, dv), dtype=_F32)  # unnormalised output
    # Workspace reused by every KV chunk: the score block and its softmax.
    width = min(k_chunk, k_end)
    s_buf = scratch.take("s", bb * rows * width)
    p_buf = scratch.take("p", bb * rows * width)
    pv = torch.empty((bb, rows, dv), dtype=_F32)
    seen_mask = False
    # KV chunks entirely above the diagonal (ks >= q_offset + qe) are never visited.
    for ks in range(0, k_end, k_chunk):
        # The chunk's columns past k_end (the last key any row of this q chunk sees)
        # would all be masked to -inf, contributing exactly 0: they are not computed.
        ke = min(k_end, ks + k_chunk)
        n = bb * rows * (ke - ks)
        s = torch.bmm(qb, kT[:, :, ks:ke], out=s_buf[:n].view(bb, rows, ke - ks))
        masked = _apply_masks(s, b=b, nqh=nqh, qs=qs, qe=qe, ks=ks, ke=ke, causal=causal,
                              q_offset=q_offset, attn_mask=attn_mask, scratch=scratch, window=window)
        seen_mask |= masked
        m_blk = s.amax(dim=-1)  # chunk row max
        p = torch.softmax(s, dim=-1, out=p_buf[:n].view(bb, rows, ke - ks))
        p_max = p.amax(dim=-1)  # = exp(0) / l_blk: the chunk's row sum, inverted
        torch.bmm(p, vf[:, ks:ke], out=pv)
        m_new = torch.maximum(m, m_blk)
        # A row that has seen only -inf keeps m = -inf: subtract 0 instead of -inf so
        # exp gives 0, not NaN (exp(-inf - -inf)).
        m_sub = m_new.masked_fill(m_new == _NEG_INF, 0.0) if seen_mask else m_new
        alpha = _rescale(m, m_sub)  # exp(m_old - m_new); 0 on the first chunk
        beta = torch.exp(m_blk - m_sub).div_(p_max)
        if masked:
            # rows fully masked within this chunk: softmax gave NaN; they contribute 0
            dead = m_blk == _NEG_INF
            beta.masked_fill_(dead, 0.0)
            pv.masked_fill_(dead.unsqueeze(-1), 0.0)
        l.mul_(alpha).add_(beta)
        acc.mul_(alpha.unsqueeze(-1)).addcmul_(pv, beta.unsqueeze(-1))
        m = m_new
    qc = qe - qs
    if sink is not None:
        # the sink is one more key whose value is zero: it only joins the denominator
        s_rows = _sink_rows(sink, b, bb // b, qc)
        m_new = torch.maximum(m, s_rows)
        alpha = torch.exp(m - m_new)
        l.mul_(alpha).add_(torch.exp(s_rows - m_new))
        acc.mul_(alpha.unsqueeze(-1))
    # Fully masked rows have l == 0 and acc == 0: divide by 1 to return exactly 0.
    l.masked_fill_(l == 0, 1.0)
    torch.div(acc.view(b, nqh, qc, dv), l.view(b, nqh, qc, 1), out=out)


def _legacy_chunk(qb, kT, vf, *, b, nqh, qs, qe, causal, q_offset, attn_mask, k_chunk, out, scratch, window=None,
                  sink=None):
    """Materialised softmax of one q chunk over all its visible keys."""
    sk, dv = kT.shape[2], vf.shape[2]
    qc = qe - qs
    ke = _causal_key_end(sk, causal, q_offset, qe)
    if ke == 0:
        out.zero_()
        return
    bb, rows, _ = qb.shape
    n = bb * rows * ke
    s = torch.bmm(qb, kT[:, :, :ke], out=scratch.take("s", n).view(bb, rows, ke))  # [b*nkv, group*qc, keys]
    masked = _apply_masks(s, b=b, nqh=nqh, qs=qs, qe=qe, ks=0, ke=ke, causal=causal,
                          q_offset=q_offset, attn_mask=attn_mask, scratch=scratch, window=window)
    if sink is not None:  # one more score column (the sink); its weight multiplies no value
        s = torch.cat([s, _sink_rows(sink, b, s.shape[0] // b, qc).unsqueeze(-1)], dim=-1)
        masked = False  # a finite sink means no row is fully masked
    dead = (s.amax(dim=-1, keepdim=True) == _NEG_INF) if masked else None
    if sink is not None:
        p = torch.softmax(s, dim=-1)[..., :-1]
    else:
        p = torch.softmax(s, dim=-1, out=scratch.take("p", n).view(bb, rows, ke))
    del s
    o = torch.bmm(p, vf[:, :ke])
    if dead is not None:
        o.masked_fill_(dead, 0.0)  # softmax of an all -inf row is NaN: define 0
    out.copy_(o.view(b, nqh, qc, dv))


def _for_each(items, fn) -> None:
    """Run ``fn(item)`` for every item, spread over ``torch.get_num_threads()`` Python
    threads, each running single-threaded torch ops (the ops release the GIL).

    Why not torch's own intra-op threads: a chunk is ~10 small ops, each an OpenMP
    parallel region with a barrier; on a busy 2-core box every barrier waits for a
    descheduled thread and the kernel runs several times slower than on one thread.
    Independent chunks per thread have no barrier. Every chunk is computed by the same
    single-threaded ops whichever thread runs it, so results are bitwise identical for
    any thread count. The global intra-op thread count is set to 1 for the duration of
    the call and restored afterwards.
    """
    workers = min(torch.get_num_threads(), len(items))
    if workers <= 1:
        for it in items:
            fn(it)
        return
    inference = torch.is_inference_mode_enabled()

    def run(item) -> None:  # torch's inference mode is per thread: run in the caller's
        with torch.inference_mode(inference):
            fn(item)

    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ttsim-sdpa") as ex:
            for _ in ex.map(run, items):  # re-raises the first exception
                pass
    finally:
        torch.set_num_threads(prev)


def _run(chunk_fn, q, k, v, *, scale, is_causal, attn_mask, q_offset, q_chunk_size, k_chunk_size, window=None,
         sink=None):
    (b, nqh, nkv, sq, sk, d, dv), scale = _validate_common(
        q, k, v, scale, q_offset, q_chunk_size, k_chunk_size, attn_mask
    )
    R.window(window)
    if sink is not None:
        _check_float("attention_sink", sink)
        R.sink(sink.shape, nqh, "logits")
    kf, vf = _kv_f32(k), _kv_f32(v)
    kT = kf.transpose(1, 2)  # view [b*nkv, d, sk]
    out = torch.empty((b, nqh, sq, dv), dtype=_F32)
    causal = bool(is_causal)
    scratch = _Scratch()  # per thread, freed with the call

    def one_chunk(qs: int) -> None:
        qe = min(sq, qs + q_chunk_size)
        chunk_fn(_q_block(q, qs, qe, scale, nkv), kT, vf, b=b, nqh=nqh, qs=qs, qe=qe,
                 causal=causal, q_offset=q_offset, attn_mask=attn_mask,
                 k_chunk=k_chunk_size, out=out[:, :, qs:qe], scratch=scratch, window=window, sink=sink)

    # Heaviest (causal: last) chunks first, so the pool's tail is short.
    starts = list(range(0, sq, q_chunk_size))
    _for_each(starts[::-1] if causal else starts, one_chunk)
    return out


# ----------------------------------------------------------------------------- public


def sdpa_streaming(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: Optional[float],
    is_causal: bool,
    attn_mask: Optional[torch.Tensor] = None,
    q_offset: int = 0,
    q_chunk_size: int,
    k_chunk_size: int,
    window: Optional[int] = None,
    sink: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Streaming (flash-style) SDPA: online softmax over KV chunks of ``k_chunk_size``.

    ``q [b, nqh, Sq, d]``, ``k``/``v`` ``[b, nkv, Sk, d]`` -> float32 ``[b, nqh, Sq, dv]``.
    For each q chunk the running max ``m``, running sum ``l`` and accumulator are updated
    chunk by chunk, the accumulator rescaled by ``exp(m_old - m_new)``; only
    ``(group*q_chunk) x k_chunk`` score blocks exist. With ``is_causal`` (row ``i`` at
    absolute position ``q_offset + i``) chunks entirely above the diagonal are skipped.
    Fully masked rows return 0.
    """
    return _run(_streaming_chunk, q, k, v, scale=scale, is_causal=is_causal, attn_mask=attn_mask,
                q_offset=q_offset, q_chunk_size=q_chunk_size, k_chunk_size=k_chunk_size, window=window,
                sink=sink)


def sdpa_legacy(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    scale: Optional[float],
    is_causal: bool,
    attn_mask: Optional[torch.Tensor] = None,
    q_offset: int = 0,
    q_chunk_size: int,
    k_chunk_size: int,
    window: Optional[int] = None,
    sink: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Legacy SDPA: per q chunk the full ``(group*q_chunk) x visible-keys`` score matrix is
    materialised and soft-maxed in one go. Same signature and semantics as
    :func:`sdpa_streaming`; ``k_chunk_size`` is validated but does not change the math."""
    return _run(_legacy_chunk, q, k, v, scale=scale, is_causal=is_causal, attn_mask=attn_mask,
                q_offset=q_offset, q_chunk_size=q_chunk_size, k_chunk_size=k_chunk_size, window=window,
                sink=sink)


# ----------------------------------------------------------------------------- paged


def _as_int_list(name: str, t: IntSeq) -> list:
    if isinstance(t, torch.Tensor):
        if t.is_floating_point() or t.is_complex():
            raise TypeError(f"{name} must be an integer tensor, got {t.dtype}")
        return [int(x) for x in t.reshape(-1).tolist()]
    return [int(x) for x in t]


def _page_table_rows_check(page_table: torch.Tensor, batch: Optional[int] = None) -> None:
    R.page_table("page_table", getattr(page_table, "shape", ()), batch)
    if page_table.is_floating_point():
        raise TypeError(f"page_table must be an integer tensor, got {page_table.dtype}")


def _page_table_rows(page_table: torch.Tensor, batch: Optional[int] = None) -> list:
    _page_table_rows_check(page_table, batch)
    return page_table.tolist()


def _check_paged_qkv(q, k_cache, v_cache, decode: bool) -> None:
    for name, t in (("q", q), ("k_cache", k_cache), ("v_cache", v_cache)):
        _check_float(name, t)
    R.qkv(q.shape, k_cache.shape, v_cache.shape, decode=decode, paged=True, names=("q", "k_cache", "v_cache"))


def _check_cache_write(cache: torch.Tensor, x: torch.Tensor) -> None:
    _check_float("cache", cache)
    _check_float("x", x)
    R.rank4("cache", cache.shape)


def _block_of(pt_row: list, row: int, pos: int, block_size: int, num_blocks: int) -> int:
    """Block id holding virtual position ``pos`` of batch row ``row``; IndexError if out of
    range of the page table or of the cache."""
    if pos < 0:
        raise IndexError(f"batch row {row}: position {pos} is negative (only {SKIP_POSITION} means skip)")
    page = pos // block_size
    if page >= len(pt_row):
        raise IndexError(
            f"batch row {row}: position {pos} is in page {page}, beyond the page table's "
            f"{len(pt_row)} pages (block_size {block_size})"
        )
    blk = int(pt_row[page])
    if not 0 <= blk < num_blocks:
        raise IndexError(
            f"batch row {row}: position {pos} maps to block {blk} (page_table[{row}, {page}]), "
            f"outside the cache's {num_blocks} blocks"
        )
    return blk


def _pages_for(pt_row: list, row: int, length: int, block_size: int, num_blocks: int) -> list:
    """Validated block ids covering positions ``0 .. length-1`` of one batch row."""
    n_pages = -(-length // block_size)
    if n_pages > len(pt_row):
        first_bad = len(pt_row) * block_size
        _block_of(pt_row, row, first_bad, block_size, num_blocks)  # raises with the message
    return [_block_of(pt_row, row, p * block_size, block_size, num_blocks) for p in range(n_pages)]


def _gather(cache: torch.Tensor, blocks: list, length: int) -> torch.Tensor:
    """Contiguous ``[nkv, length, d]`` view of the paged positions 0..length-1."""
    nb, nkv, bs, d = cache.shape
    if not blocks:
        return cache.new_empty((nkv, 0, d))
    sel = cache[torch.tensor(blocks, dtype=torch.long)]  # [pages, nkv, bs, d]
    return sel.permute(1, 0, 2, 3).reshape(nkv, len(blocks) * bs, d)[:, :length]


def chunked_sdpa_paged(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    chunk_start_idx: int,
    *,
    scale: Optional[float],
    q_chunk_size: int,
    k_chunk_size: int,
    window: Optional[int] = None,
    sink: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Chunked-prefill attention against a paged K/V cache (the online-softmax kernel).

    ``q [b, nqh, Sq, d]`` holds the queries at absolute positions
    ``chunk_start_idx .. chunk_start_idx + Sq - 1``; keys/values ``0 .. chunk_start_idx +
    Sq - 1`` of each row are read through ``page_table [b, max_pages]`` from
    ``k_cache``/``v_cache`` ``[num_blocks, nkv, block_size, d]``; causal with offset.
    ``chunk_start_idx`` must be a multiple of both chunk sizes (ttnn requires it).
    Returns float32 ``[b, nqh, Sq, dv]``.
    """
    _positive_int("q_chunk_size", q_chunk_size)
    _positive_int("k_chunk_size", k_chunk_size)
    if isinstance(chunk_start_idx, torch.Tensor):
        chunk_start_idx = int(chunk_start_idx.item())
    R.chunk_start(chunk_start_idx, q_chunk_size, k_chunk_size)
    _check_paged_qkv(q, k_cache, v_cache, decode=False)
    b, _, sq, _ = q.shape
    rows = _page_table_rows(page_table, b)
    nb, _, bs, _ = k_cache.shape
    length = chunk_start_idx + sq
    ks, vs = [], []
    for r in range(b):
        blocks = _pages_for(rows[r], r, length, bs, nb)
        ks.append(_gather(k_cache, blocks, length))
        vs.append(_gather(v_cache, blocks, length))
    k = torch.stack(ks) if b else k_cache.new_empty((0, k_cache.shape[1], length, k_cache.shape[3]))
    v = torch.stack(vs) if b else v_cache.new_empty((0, v_cache.shape[1], length, v_cache.shape[3]))
    return sdpa_streaming(q, k, v, scale=scale, is_causal=True, q_offset=chunk_start_idx,
              q_chunk_size=q_chunk_size, k_chunk_size=k_chunk_size, window=window, sink=sink)


def _flat_table(page_table: torch.Tensor) -> list:
    """The page table's entries in buffer order (row-major), unsigned as the card reads them."""
    return (page_table.reshape(-1).to(torch.int64) & U32).tolist()


def _decode_span(memory: PagedMemory, flat: list, width: int, nb: int, r: int, p: int, bs: int):
    """Row ``r``'s block ids for positions ``0 .. p`` as a card's decode reader takes them: page
    ``j`` is table entry ``r * width + j`` whether or not it is still row ``r``'s.

    The watchdog stand-in: a span reaching past the END of the page table's buffer is a hang.
    Every position a live request can have lies in its own row's pages, so a position that far
    is garbage, and a garbage 32-bit position is 10^5 to 10^8 K chunks (1206993233 at block size
    32: 37.7 million), each through a block id read from memory that is no page table: a card does
    not come back from that within any watchdog (the issue's "in effect a hang"), and computing it
    would only make ttsim spin. Spans that walk into the following rows' pages are computed, with
    those rows' K/V."""
    u = unsigned(p)
    page = u // bs
    start, last = r * width, r * width + page
    if last >= len(flat):
        why = (f"spans {page + 1} pages from page-table index {start}; the table's buffer holds "
               f"{len(flat)} entries: the reader walks past it")
        memory.note(StrayIndex(r, p, page, last, None, (), "hang", why))
        raise DeviceHang(f"batch row {r}: position {p} {why}")
    blocks = flat[start:last + 1]
    if page >= width or any(b >= nb for b in blocks):
        memory.note(StrayIndex(r, p, page, last, blocks[-1], owners(flat, width, blocks[-1]), "read",
                               f"{max(0, page + 1 - width)} pages past the row"))
    return blocks


def _outside_blocks(memory: PagedMemory, blocks: list, nb: int) -> dict:
    """K and V of the blocks outside the cache a decode row reads, fetched in row order."""
    return {b: (memory.read_block(0, b), memory.read_block(1, b)) for b in dict.fromkeys(blocks) if b >= nb}


def _gather_any(cache: torch.Tensor, blocks: list, length: int, outside: dict, which: int) -> torch.Tensor:
    """:func:`_gather`, with blocks outside the cache taken from ``outside`` (see _outside_blocks)."""
    if not outside:
        return _gather(cache, blocks, length)
    nkv, d = cache.shape[1], cache.shape[3]
    sel = torch.stack([outside[b][which].to(cache.dtype) if b in outside else cache[b] for b in blocks])
    return sel.permute(1, 0, 2, 3).reshape(nkv, len(blocks) * cache.shape[2], d)[:, :length]


def paged_sdpa_decode(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    page_table: torch.Tensor,
    cur_pos: Optional[IntSeq],
    *,
    scale: Optional[float],
    k_chunk_size: int,
    streaming: bool = True,
    out: Optional[torch.Tensor] = None,
    window: Optional[int] = None,
    sink: Optional[torch.Tensor] = None,
    attn_mask: Optional[torch.Tensor] = None,
    memory: Optional[PagedMemory] = None,
) -> torch.Tensor:
    """Paged decode attention: one query token per batch row.

    ``q [1, b, nqh, d]``. Causal (``cur_pos`` given): row ``r`` attends keys
    ``0 .. cur_pos[r]`` inclusive of its pages (with ``window``, only the last ``window``
    of them). Rows with ``cur_pos == -1`` are skipped: their rows of ``out`` are not
    written at all (left exactly as given). Non-causal (``cur_pos`` None): every row
    attends all ``max_pages * block_size`` positions of its page table plus the additive
    ``attn_mask [b, 1, nqh, L]`` (tt-metal's decode mask layout). ``sink``: per-head
    logits joining the softmax denominator. Results are written into ``out``
    (``[1, b, nqh, dv]``, any float dtype: values are cast to it) and ``out`` is
    returned; if ``out`` is None a float32 zero tensor is allocated (skipped rows are then
    0). Any other position: with ``memory`` as a card takes it (:func:`_decode_span`; a span
    past the table's buffer raises :class:`DeviceHang`), without it a negative or out-of-range
    position raises IndexError naming the row.
    """
    _positive_int("k_chunk_size", k_chunk_size)
    R.window(window)
    _check_paged_qkv(q, k_cache, v_cache, decode=True)
    _, b, nqh, d = q.shape
    nb, nkv, bs, _ = k_cache.shape
    dv = v_cache.shape[3]
    # non-causal decode reads every row; causal rows at -1 need no page table row
    causal_card = memory is not None and cur_pos is not None  # rows resolved from the flat table
    if causal_card:
        _page_table_rows_check(page_table)
    else:
        rows = _page_table_rows(page_table, b if cur_pos is None else None)
    if out is None:
        out = torch.zeros((1, b, nqh, dv), dtype=_F32)
    elif tuple(out.shape) != (1, b, nqh, dv):
        raise ValueError(f"out must be [1, {b}, {nqh}, {dv}], got {tuple(out.shape)}")
    # Resolve every active row before computing anything: (row, blocks, first key, length, outside)
    plan = []
    if cur_pos is None:
        length = page_table.shape[1] * bs
        R.decode_mask(None if attn_mask is None else attn_mask.shape, b, nqh, length)
        for r in range(b):
            plan.append((r, _pages_for(rows[r], r, length, bs, nb), 0, length, {}))
    else:
        pos = _as_int_list("cur_pos", cur_pos)
        R.positions("cur_pos", (len(pos),), b)
        flat = _flat_table(page_table) if causal_card else None
        width = page_table.shape[1]
        for r, p in enumerate(pos):
            if unsigned(p) == U32:  # the only position a card skips
                continue
            if memory is None:
                if r >= len(rows):
                    raise ValueError(f"page_table has {len(rows)} rows, batch row {r} is active")
                _block_of(rows[r], r, p, bs, nb)  # the last position must be addressable
                blocks, outside, length = _pages_for(rows[r], r, p + 1, bs, nb), {}, p + 1
            else:
                blocks = _decode_span(memory, flat, width, nb, r, p, bs)
                length = unsigned(p) + 1
                outside = _outside_blocks(memory, blocks, nb)
            first = 0 if window is None else max(0, length - window)
            plan.append((r, blocks, first, length, outside))
    fn = sdpa_streaming if streaming else sdpa_legacy

    def one_row(item) -> None:
        r, blocks, first, length, outside = item
        k = _gather_any(k_cache, blocks, length, outside, 0)[:, first:].unsqueeze(0)  # [1, nkv, L, d]
        v = _gather_any(v_cache, blocks, length, outside, 1)[:, first:].unsqueeze(0)
        qr = q[0, r].reshape(1, nqh, 1, d)
        mask = None if cur_pos is not None else attn_mask[r, 0].reshape(1, nqh, 1, length)
        o = fn(qr, k, v, scale=scale, is_causal=False, attn_mask=mask, q_chunk_size=1, k_chunk_size=k_chunk_size,
               sink=sink)
        out[0, r].copy_(o[0, :, 0, :])

    _for_each(plan, one_row)  # rows are independent; each writes only its own out row
    return out


def paged_update_cache(
    cache: torch.Tensor,
    x: torch.Tensor,
    update_idxs: IntSeq,
    page_table: torch.Tensor,
    *,
    memory: Optional[PagedMemory] = None,
) -> torch.Tensor:
    """Write one new token per batch row into a paged cache, in place.

    ``x [1, b, nkv, d]``: ``x[0, r]`` goes to virtual position ``update_idxs[r]`` of row
    ``r`` (block ``page_table[r, pos // block_size]``, offset ``pos % block_size``), cast
    to the cache dtype. Rows with index -1 are skipped; rows are written in row order, so if
    two rows address the same slot the later row wins. Returns ``cache``.

    With ``memory`` (the device layer) every other index is consumed as a card's reader does:
    the position unsigned, page ``pos // block_size`` read at flat index ``row * max_pages +
    page`` of the table's buffer (the following rows' entries, then whatever memory holds), the
    token written into the block found there, inside the cache or not (``memory.write_row``).
    Each such row is noted. Without ``memory`` all rows are validated first (IndexError naming
    row and position).
    """
    _check_cache_write(cache, x)
    R.update_input("x", x.shape, cache.shape)
    nb, nkv, bs, d = cache.shape
    b = x.shape[1]
    idxs = _as_int_list("update_idxs", update_idxs)
    R.positions("update_idxs", (len(idxs),), b)
    if memory is None:
        rows = _page_table_rows(page_table)
        plan = []
        for r, p in enumerate(idxs):
            if p == SKIP_POSITION:
                continue
            if r >= len(rows):
                raise ValueError(f"page_table has {len(rows)} rows, batch row {r} is active")
            plan.append((r, _block_of(rows[r], r, p, bs, nb), p % bs))
        for r, blk, off in plan:
            cache[blk, :, off, :].copy_(x[0, r])
        return cache
    _page_table_rows_check(page_table)
    flat, width = _flat_table(page_table), page_table.shape[1]
    for r, p in enumerate(idxs):
        u = unsigned(p)
        if u == U32:  # the only index a card skips
            continue
        page, off = divmod(u, bs)
        index = r * width + page
        blk = flat[index] if index < len(flat) else memory.entry(index)
        if blk < nb:
            cache[blk, :, off, :].copy_(x[0, r])
        else:
            memory.write_row(blk, off, x[0, r])
        if page >= width or blk >= nb:
            memory.note(StrayIndex(r, p, page, index, blk, owners(flat, width, blk), "write"))
    return cache


def paged_fill_cache(
    cache: torch.Tensor,
    x: torch.Tensor,
    page_table_row_or_table: torch.Tensor,
    batch_idx: int,
) -> torch.Tensor:
    """Fill positions ``0 .. S-1`` of batch row ``batch_idx`` from ``x [1, nkv, S, d]``.

    ``page_table_row_or_table`` is either the full ``[b, max_pages]`` table (row
    ``batch_idx`` is used) or one row ``[max_pages]``. Validates first (IndexError naming
    the row and the first position beyond the page table), then writes in place; slots of
    the last page past ``S`` are left untouched, and so are pages whose entry is
    ``SKIP_PAGE_TABLE_ENTRY`` (their input is dropped). Returns ``cache``.
    """
    _check_cache_write(cache, x)
    R.fill_input("x", x.shape, cache.shape)
    nb, nkv, bs, d = cache.shape
    pt = page_table_row_or_table
    if not isinstance(pt, torch.Tensor) or pt.is_floating_point():
        raise TypeError("page table must be an integer tensor")
    if pt.dim() == 2:
        R.batch_index(batch_idx, pt.shape[0])
        row = pt[batch_idx].tolist()
    elif pt.dim() == 1:
        row = pt.tolist()
    else:
        raise ValueError(f"page table must be 1-D or 2-D, got shape {tuple(pt.shape)}")
    s = x.shape[2]
    mapped = [SKIP_PAGE_TABLE_ENTRY if int(b) == SKIP_PAGE_TABLE_ENTRY else b for b in row]
    valid = [0 if b == SKIP_PAGE_TABLE_ENTRY else b for b in mapped]  # validate the mapped pages only
    blocks = _pages_for(valid, batch_idx, s, bs, nb)
    for j, blk in enumerate(blocks):
        if mapped[j] == SKIP_PAGE_TABLE_ENTRY:
            continue
        lo = j * bs
        n = min(bs, s - lo)
        cache[blk, :, :n, :].copy_(x[0, :, lo : lo + n, :])
    return cache
