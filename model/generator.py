"""The generator: prefill, traced decode with on-device sampling, and the async-ahead merge.

It mirrors the production interface (prefill_forward, decode_forward, read_decode_output,
process_decode_output_host). Decode runs as one trace per batch bucket (1/2/4/8 rows);
each trace owns persistent device input buffers (tokens, positions, page table, slot
map) allocated with ``allocate_tensor_on_device``, so they start UNINITIALIZED. Inside
the trace, argmax writes each sampled token into the trace's own token buffer and
``plus_one`` advances its positions (rows at -1 stay -1): between batch changes the
device is authoritative and the host's inputs are ignored.

When the batch changes (``reset_batch``, or a different bucket), the generator reads
the target trace's token/position buffers (non-blocking, into persistent host mirrors)
and merges them with the host's per row (production rule): keep the device token where
``dev_pos == host_pos`` or ``dev_pos == host_pos + 1``, else take the host's. The fixes
in :mod:`model.flags` guard that merge. Nothing here knows which seed or fault is in
force: the defects come from what the buffers and mirrors really hold -- a bucket's
buffers left from an older batch, a mirror whose read had not landed, memory that was
never written.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from .flags import GeneratorFlags
from .host_ints import int32_tensor
from .merge_events import MergeEvent, MergeInputs, MergeRow
from .merge_rule import MergeDecision, decide_merge, int_list

BUCKETS = (1, 2, 4, 8)


def nearest_bucket(rows: int) -> int:
    for b in BUCKETS:
        if rows <= b:
            return b
    raise ValueError(f"a decode batch of {rows} rows exceeds the largest bucket ({BUCKETS[-1]})")


@functools.lru_cache(maxsize=64)
def _flag_dict(flags: GeneratorFlags) -> dict:
    """``asdict(flags)``, once per flag set (flags are frozen); callers copy it."""
    return asdict(flags)


@dataclass
class MergeSite:
    """One merge's inputs as read (rows of ints, padded to the bucket): what the decision
    sees, and what its event reports."""
    step: int
    bucket: int
    previous_bucket: int | None
    fresh: bool
    source_bucket: int
    max_context: int
    dev_tok: list[int]
    dev_pos: list[int]
    host_tok: list[int]
    host_pos: list[int]
    recorded: list[bool]  # slots prefilled since their last decode

    def decide(self, flags: GeneratorFlags) -> MergeDecision:
        return decide_merge(flags, self.max_context, self.dev_tok, self.dev_pos, self.host_tok, self.host_pos,
                            self.recorded)

    def event(self, d: MergeDecision, flags: GeneratorFlags) -> MergeEvent:
        cols = zip(self.host_tok, self.host_pos, self.dev_tok, d.dev_pos, d.keep, d.reasons, self.recorded)
        rows = [MergeRow(r, ht, hp, dt, dp, "device" if k else "host", why, rec)
                for r, (ht, hp, dt, dp, k, why, rec) in enumerate(cols)]
        return MergeEvent(self.step, self.bucket, self.previous_bucket, self.fresh, d.guard_rejected, rows,
                          MergeInputs(self.source_bucket, list(self.dev_tok), list(self.dev_pos),
                                      self.max_context, dict(_flag_dict(flags))))


def _rows(tokens) -> list[list[int]]:
    """Token rows as lists of ints: a [B, S] tensor (rows padded past their end) or lists."""
    return tokens.tolist() if hasattr(tokens, "tolist") else [list(r) for r in tokens]


def _int32_bits(v: int) -> int:
    """The low 32 bits of ``v`` as a signed int32 (two's complement, as a static_cast does)."""
    return ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


class _DecodeTrace:
    """One bucket's decode: persistent input buffers, host mirrors, and (once captured) a trace.

    Input buffers of every bucket are allocated before any trace is captured: a replay
    writes its intermediates at the addresses they had during capture, so a persistent
    buffer allocated later could land there and be overwritten (the hazard ttnn warns of).
    """

    def __init__(self, ttnn, device, model, bucket: int, max_pages: int, enable_trace: bool):
        self.ttnn, self.device, self.model = ttnn, device, model
        self.bucket = bucket
        self.enable_trace = enable_trace
        alloc = ttnn.allocate_tensor_on_device
        rm = ttnn.ROW_MAJOR_LAYOUT
        self.tokens = alloc(ttnn.Shape([1, bucket]), ttnn.uint32, rm, device)
        self.positions = alloc(ttnn.Shape([bucket]), ttnn.int32, rm, device)
        self.page_table = alloc(ttnn.Shape([bucket, max_pages]), ttnn.int32, rm, device)
        self.slots = alloc(ttnn.Shape([bucket]), ttnn.int32, rm, device)
        # host mirrors the merge reads the device buffers into (persistent host tensors)
        self.tok_mirror = ttnn.from_torch(torch.zeros(1, bucket, dtype=torch.int32), dtype=ttnn.uint32, layout=rm)
        self.pos_mirror = ttnn.from_torch(torch.zeros(bucket, dtype=torch.int32), dtype=ttnn.int32, layout=rm)
        self.executed = False
        self.page_table_host: tuple[tuple[int, ...], ...] | None = None  # what the device holds
        self.trace_id = None
        self.logits = None

    def capture(self) -> None:
        if self.enable_trace and self.trace_id is None:
            self.trace_id = self.ttnn.begin_trace_capture(self.device, cq_id=0)
            self.logits = self._body()
            self.ttnn.end_trace_capture(self.device, self.trace_id, cq_id=0)

    def _body(self):
        logits = self.model.decode(self.tokens, self.positions, self.page_table, self.slots)
        self.model.sample_on_device(logits, self.tokens)
        self.ttnn.plus_one(self.positions, skip_negative_entries=True)
        return logits

    def run(self) -> None:
        if self.trace_id is None:
            self.logits = self._body()
        else:
            self.ttnn.execute_trace(self.device, self.trace_id, cq_id=0, blocking=False)
        self.executed = True


@dataclass
class DecodeOutput:
    """What decode_forward hands back: the trace whose token buffer holds this step's samples."""

    trace: _DecodeTrace
    rows: int
    host: object = None
    event: object = None


class Generator:
    def __init__(
        self,
        model,
        ttnn,
        mesh_device,
        *,
        flags: GeneratorFlags,
        max_context: int,
        max_pages: int,
        max_slots: int = 8,
        enable_trace: bool = True,
        bucket_policy: Callable[[int], int] | None = None,
        on_merge: Callable[[MergeEvent], None] | None = None,
    ):
        self.model = model
        self.ttnn = ttnn
        self.mesh_device = mesh_device
        self.flags = flags
        self.max_context = max_context
        self.max_pages = max_pages
        self.max_slots = max_slots
        self.enable_trace = enable_trace
        self.bucket_policy = bucket_policy or nearest_bucket
        self.on_merge = on_merge
        self._traces: dict[int, _DecodeTrace] = {}
        self._last_bucket: int | None = None
        # slots prefilled since their last decode; the merge reads it only with the fix on
        # (production's Qwen path never consulted it); replays show it as a diagnostic
        self._slots_prefilled_since_decode: set[int] = set()
        self._step = 0
        self._last_read_event = None
        self.guard_rejects = 0

    # -- prefill ------------------------------------------------------------------------
    def prefill_forward(self, tokens, page_table=None, kv_cache=None, prompt_lens=None, empty_slots=None,
                        start_pos=None, sampling_params=None, enable_trace=False, **kwargs) -> torch.Tensor:
        """Prefill ``tokens[i, start_pos[i]:prompt_lens[i]]`` of each row into slot ``empty_slots[i]``
        (model/protocol.py); returns the greedy token after each row's chunk [B]. Every row's
        slot is marked as prefilled since its last decode (tt-metal's prefill_forward_text does
        so on every chunk; a chunk that does not end its prompt yields a token nobody reads)."""
        rows = _rows(tokens)
        n = len(rows)
        if empty_slots is None or len(empty_slots) != n:
            raise ValueError(f"prefill_forward: empty_slots must name one slot per request ({n}), got {empty_slots!r}")
        if page_table is None or len(page_table) != n:
            raise ValueError(f"prefill_forward: page_table must hold one row per request ({n})")
        ends = int_list(prompt_lens) if prompt_lens is not None else [len(r) for r in rows]
        starts = int_list(start_pos) if start_pos is not None else [0] * n
        out: list[int] = []
        for i in range(n):
            slot = int(empty_slots[i])
            if not 0 <= slot < self.max_slots:
                raise ValueError(f"prefill_forward: slot {slot} is outside 0..{self.max_slots - 1}")
            if not 0 <= starts[i] < ends[i] <= len(rows[i]):
                raise ValueError(f"prefill_forward: row {i} asks for tokens [{starts[i]}, {ends[i]}) of "
                                 f"{len(rows[i])}")
            if starts[i] == 0:
                self.model.reset_slot(slot)
            logits = self.model.prefill(rows[i][starts[i]:ends[i]], slot=slot, page_table_row=page_table[i],
                                        start_pos=starts[i])
            out.append(int(torch.argmax(logits)))
            self._slots_prefilled_since_decode.add(slot)
        return torch.tensor(out, dtype=torch.int64)

    # -- decode -------------------------------------------------------------------------
    def decode_forward(self, tokens, start_pos, page_table, kv_cache=None, enable_trace=True,
                       read_from_device=True, sampling_params=None, reset_batch=False,
                       slot_remap=None) -> DecodeOutput:
        """One decode step for rows = slots 0..len(start_pos)-1 (position -1 = inactive row).

        ``tokens`` [B, 1] / ``start_pos`` [B] are the host's view; the device's own buffers win
        between resets. Returns a DecodeOutput, or with ``read_from_device`` the sampled tokens
        [B, 1] (model/protocol.py).
        """
        # the host's rows as plain ints: a batch is at most 8 rows, and torch ops on tensors
        # that small cost more than the bookkeeping itself
        host_pos, host_tok = int_list(start_pos), [t[0] if isinstance(t, list) else t for t in int_list(tokens)]
        active = [r for r, p in enumerate(host_pos) if p >= 0]
        if not active:
            raise ValueError("decode_forward: no active row (every start_pos is -1)")
        needed = max(active) + 1
        if reset_batch or self._last_bucket is None or self._last_bucket < needed:
            bucket = self.bucket_policy(needed)  # the bucket is chosen when the batch is (re)set
        else:
            bucket = self._last_bucket
        if bucket < needed or bucket not in BUCKETS:
            raise ValueError(f"decode_forward: bucket {bucket} cannot hold {needed} rows")
        host_tok, host_pos = self._pad(host_tok, bucket, 0), self._pad(host_pos, bucket, -1)
        gaps = {r for r, p in enumerate(host_pos) if p < 0}
        given = int_list(page_table)  # one row of page ids per host row ([rows, max_pages])
        if any(len(row) != self.max_pages for row in given[:bucket]):
            raise ValueError(f"decode_forward: page_table rows must hold max_pages={self.max_pages} page ids")
        zero = (0,) * self.max_pages  # gaps and rows past the host's are neutral
        pt = tuple(zero if r in gaps or r >= len(given) else tuple(given[r]) for r in range(bucket))
        slots = list(range(bucket)) if slot_remap is None else self._pad(int_list(slot_remap), bucket, -1)
        for r in gaps:
            slots[r] = -1

        self._allocate_inputs()
        trace = self._traces[bucket]
        trace.capture()
        fresh = not trace.executed
        changed = reset_batch or bucket != self._last_bucket or fresh
        self._write_if_changed(trace, pt, slots)
        if not self.flags.merge:
            self._write_inputs(trace, host_tok, host_pos)
        elif changed:
            # production reads the buffers of the trace it is about to run; after a bucket
            # change they hold that bucket's last batch (or, never run, whatever memory held)
            source = trace
            if self.flags.merge_from_last_run and self._last_bucket is not None:
                source = self._traces[self._last_bucket]
            tok, pos = self._merge(source, bucket, not source.executed, host_tok, host_pos)
            self._write_inputs(trace, tok, pos)
        trace.run()
        self._last_bucket = bucket
        # a slot stops being "prefilled since the last decode" once it has decoded
        self._slots_prefilled_since_decode.difference_update(active)
        self._step += 1
        out = DecodeOutput(trace, bucket)
        if read_from_device:
            host, events = self.read_decode_output(out, async_read=True)
            for event in events:
                self.ttnn.event_synchronize(event)
            return self.process_decode_output_host(host, is_tokens=True)
        return out

    def read_decode_output(self, out: DecodeOutput, async_read: bool = False):
        """Enqueue the read of this step's sampled tokens: with ``async_read`` non-blocking,
        returning ``(host_output, [event])``; else blocking, returning the host output."""
        out.host = out.trace.tokens.cpu(blocking=not async_read)
        out.event = self.ttnn.record_event(self.mesh_device, 0) if async_read else None
        self._last_read_event = out.event
        return (out, [out.event]) if async_read else out

    def process_decode_output_host(self, out: DecodeOutput, is_tokens: bool = True) -> torch.Tensor:
        """The sampled token per row [B, 1] (the caller has waited on the read's events)."""
        if not is_tokens:
            raise ValueError("process_decode_output_host: this generator samples on the device (is_tokens=True)")
        if out.host is None:
            self.read_decode_output(out, async_read=False)
        if out.event is not None:
            self.ttnn.event_synchronize(out.event)
        return torch.tensor(self._host_ints(out.host)[: out.rows], dtype=torch.int64).reshape(-1, 1)

    # -- internals ----------------------------------------------------------------------
    @staticmethod
    def _pad(x: list[int], n: int, fill: int) -> list[int]:
        return x[:n] + [fill] * (n - min(n, len(x)))

    def _host_ints(self, t) -> list[int]:
        """A host tensor's values (chip 0's shard of a mesh tensor), flattened, as ints."""
        ttnn = self.ttnn
        if self.mesh_device.get_num_devices() > 1:
            t = ttnn.get_device_tensors(t)[0]
        return ttnn.to_torch(t).reshape(-1).tolist()

    def _upload(self, values: torch.Tensor, like, dtype) -> None:
        """Write int32 ``values`` into device tensor ``like`` (same number of elements)."""
        ttnn = self.ttnn
        host = ttnn.from_torch(values.reshape(tuple(like.shape)), dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT)
        ttnn.copy_host_to_device_tensor(host, like)

    def _write_if_changed(self, trace: _DecodeTrace, page_table: tuple, slots: list[int]) -> None:
        if trace.page_table_host != page_table:
            self._upload(int32_tensor(page_table, rows=True), trace.page_table, self.ttnn.int32)
            trace.page_table_host = page_table
        self._upload(int32_tensor(slots), trace.slots, self.ttnn.int32)

    def _write_inputs(self, trace: _DecodeTrace, tokens: list[int], positions: list[int]) -> None:
        # staged as int32 bit patterns: a uint32 token of 2**31 or more wraps, as production's
        # int32 staging does
        self._upload(int32_tensor(map(_int32_bits, tokens)), trace.tokens, self.ttnn.uint32)
        self._upload(int32_tensor(map(_int32_bits, positions)), trace.positions, self.ttnn.int32)

    def _read_device_state(self, trace: _DecodeTrace, bucket: int) -> tuple[list[int], list[int]]:
        """Read the trace's token/position buffers into its host mirrors.

        As in production, the reads are non-blocking and the merge synchronises on the event
        of the last decode output read: that event covers the device work being read, not
        these two reads. If the device lags, a mirror still holds what the previous read
        left there (an older batch)."""
        ttnn = self.ttnn
        ttnn.copy_device_to_host_tensor(trace.tokens, trace.tok_mirror, blocking=False)
        ttnn.copy_device_to_host_tensor(trace.positions, trace.pos_mirror, blocking=False)
        if self.flags.synced_merge_reads:
            ttnn.event_synchronize(ttnn.record_event(self.mesh_device, 0))
        elif self._last_read_event is not None:
            ttnn.event_synchronize(self._last_read_event)
        dev_tok = [t & 0xFFFFFFFF for t in self._host_ints(trace.tok_mirror)[:bucket]]
        dev_pos = self._host_ints(trace.pos_mirror)[:bucket]
        return dev_tok, dev_pos

    def _merge(self, trace, bucket, fresh, host_tok, host_pos) -> tuple[list[int], list[int]]:
        """The production merge of device and host inputs, with the switchable fixes."""
        dev_tok, dev_pos = self._read_device_state(trace, bucket)
        missing = bucket - trace.bucket  # rows the source trace never had: no device state
        dev_tok, dev_pos = dev_tok + [0] * missing, dev_pos + [-1] * missing
        recorded = [slot in self._slots_prefilled_since_decode for slot in range(bucket)]
        site = MergeSite(self._step, bucket, self._last_bucket, fresh, trace.bucket, self.max_context,
                         dev_tok, dev_pos, host_tok, host_pos, recorded)
        return self._decide(site).merged(dev_tok, host_tok, host_pos)

    def _decide(self, site: MergeSite) -> MergeDecision:
        """Decide under this generator's flags; count a guard rejection and report the event.
        (The hook a sweep's shared-arms generator overrides to decide several arms at once.)"""
        d = site.decide(self.flags)
        self.guard_rejects += d.guard_rejected
        if self.on_merge is not None:
            self.on_merge(site.event(d, self.flags))
        return d

    def _allocate_inputs(self) -> None:
        if not self._traces:
            for bucket in BUCKETS:
                self._traces[bucket] = _DecodeTrace(self.ttnn, self.mesh_device, self.model, bucket,
                                                    self.max_pages, self.enable_trace)

    def warm_up(self) -> int:
        """Allocate every bucket's inputs and capture every trace now (instead of at first use);
        returns how many decode traces are captured."""
        self._allocate_inputs()
        for trace in self._traces.values():
            trace.capture()
        return len(self._traces)

    def release(self) -> None:
        """Release every captured trace (a served model's shutdown); the buffers stay allocated."""
        for trace in self._traces.values():
            if trace.trace_id is not None:
                self.ttnn.release_trace(self.mesh_device, trace.trace_id)
                trace.trace_id = None
