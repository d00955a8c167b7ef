"""Crafted merges: chosen bytes in a decode trace's persistent buffers, one batch change.

Shared by the merge-rule tests and the fidelity ledger's flag-switch test. No seed or knob
decides anything here: the buffers hold exactly what a case writes (an older batch's
rows, never-written garbage), unless the case asks the device to lag.
"""

from __future__ import annotations

import torch

import ttsim
from model.flags import ARMS, GeneratorFlags
from model.generator import BUCKETS, Generator, MergeEvent
from model.markov import MARKOV, MarkovModel
from model.protocol import GREEDY

MAX_CTX = MARKOV.max_context
Rows = list[tuple[int, int]]  # (token, position) per row; position -1 = inactive


def merge_once(flags: GeneratorFlags | str, dev: Rows | None, host: Rows, *, prefilled: tuple[int, ...] = (),
               last_run: Rows | None = None, lag: float = 0.0, errors: list | None = None,
               remap: list[int] | None = None, out: list | None = None, **options) -> MergeEvent | None:
    """Decode ``host`` with ``reset_batch=True`` into bucket ``len(host)``, whose trace buffers
    hold ``dev`` (an earlier batch's, so not never-run). ``prefilled`` slots were prefilled
    since their last decode. ``last_run``: rows of another bucket's trace that ran last
    (default: the target trace ran last). ``lag``: the device's lag while the merge reads
    (0 = every read lands). ``dev=None``: the target bucket was never run and nothing was
    written to it (what its inputs were created holding). ``remap``: the decode's
    ``slot_remap``. ``options``: more generator keywords. Returns the reported merge event
    (None if no merge ran); a device error in the decode that follows goes to ``errors`` when
    given, else raises; ``out``, when given, gets the decode's sampled token per row."""
    flags = ARMS[flags] if isinstance(flags, str) else flags
    bucket = len(host)
    assert (dev is None or len(dev) == bucket) and (last_run is None or len(last_run) != bucket)
    ttsim.set_seed(11)
    device = ttsim.open_device(device_id=0)
    device.lag = 0.0
    events: list[MergeEvent] = []
    try:
        model = MarkovModel(ttsim, device, MARKOV, max_slots=8)
        max_pages = MAX_CTX // MARKOV.block_size
        gen = Generator(model, ttsim, device, flags=flags, max_context=MAX_CTX, max_pages=max_pages,
                        enable_trace=False, on_merge=events.append, bucket_policy=lambda rows: bucket, **options)
        row = torch.zeros(max_pages, dtype=torch.int32)
        for slot in prefilled:
            gen.prefill_forward([[1, 2, 3]], [row], empty_slots=[slot], sampling_params=GREEDY)
        for b in BUCKETS:  # every width's store, created from an idle batch (no capture: untraced)
            gen._store(b, [0] * b, [-1] * b, ((0,) * max_pages,) * b, (-1,) * b)
        for rows in (dev, last_run):
            if rows is not None:
                trace = gen._traces[len(rows)]
                gen._write_tokens(trace, [t for t, _ in rows], [p for _, p in rows])
                trace.executed = True
        ttsim.synchronize_device(device)
        gen._last_bucket = len(last_run) if last_run is not None else bucket
        device.lag = lag
        try:
            sampled = gen.decode_forward([t for t, _ in host], [p for _, p in host], row.repeat(bucket, 1),
                                         reset_batch=True, read_from_device=out is not None, slot_remap=remap,
                                         sampling_params=GREEDY)
            if out is not None:
                out.extend(sampled.reshape(-1).tolist())
        except ttsim.TTFatal as exc:
            if errors is None:
                raise
            errors.append(str(exc))
    finally:
        ttsim.close_device(device)
    assert len(events) <= 1
    return events[0] if events else None


def sources(event: MergeEvent) -> list[str]:
    return [r.source for r in event.rows]
