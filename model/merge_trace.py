"""Merge traces: every merge's inputs and decision as versioned JSONL, and reading them back.

The system under test's own diagnostic, plain JSON so a card run, a served model or a sim
test can record with nothing but this module. One object per line:

  {"v": 1, "kind": "run", "meta": {...}}       optional; names the run (arm, seed, model...)
  {"v": 1, "kind": "merge", "step": ..., ...}  one merge (fields: MERGE_FIELDS)

A writer hands each run's lines to the file in one ``write`` on an O_APPEND descriptor, so
runs from several processes into one path do not interleave within a run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from .merge_events import MergeEvent

VERSION = 1
MERGE_FIELDS = {
    "step": int, "bucket": int, "previous_bucket": (int, type(None)), "source_bucket": int,
    "fresh_trace": bool, "max_context": int, "flags": dict,
    "dev_tokens": list, "dev_positions": list, "host_tokens": list, "host_positions": list,
    "prefilled": list, "request_ids": list, "sources": list, "reasons": list, "guard_rejected": bool,
}
ROW_FIELDS = ("dev_tokens", "dev_positions", "host_tokens", "host_positions", "prefilled", "request_ids",
              "sources", "reasons")


class TraceError(ValueError):
    """A trace that cannot be read: names the file and line."""


def merge_record(event: MergeEvent) -> dict:
    """One merge as a JSON-able record (needs the event's inputs, set by the generator)."""
    if event.inputs is None:
        raise ValueError("merge event carries no inputs (was it built by Generator._merge?)")
    i = event.inputs
    return {
        "v": VERSION, "kind": "merge", "step": event.step, "bucket": event.bucket,
        "previous_bucket": event.previous_bucket, "source_bucket": i.source_bucket,
        "fresh_trace": event.fresh_trace, "max_context": i.max_context, "flags": dict(i.flags),
        "dev_tokens": list(i.dev_tokens), "dev_positions": list(i.dev_positions),
        "host_tokens": [r.host_token for r in event.rows], "host_positions": [r.host_pos for r in event.rows],
        "prefilled": [r.prefilled for r in event.rows], "request_ids": [r.request_id for r in event.rows],
        "sources": [r.source for r in event.rows], "reasons": [r.reason for r in event.rows],
        "guard_rejected": event.guard_rejected,
    }


class MergeTraceWriter:
    """An ``on_merge`` consumer: buffers one run's merges, appends them at ``close``. A run
    without an end (a served model) calls ``flush`` instead, so its merges are on disk as they
    happen and the run stays one run record."""

    def __init__(self, path: str, **meta):
        self.path = path
        self._run = json.dumps({"v": VERSION, "kind": "run", "meta": meta}, sort_keys=True)
        self.lines = [self._run]

    def __call__(self, event: MergeEvent) -> None:
        self.lines.append(json.dumps(merge_record(event), sort_keys=True))

    def flush(self) -> None:
        """Append what is buffered; later merges continue the same run."""
        if self.lines:
            data = ("\n".join(self.lines) + "\n").encode()
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        self.lines = []

    def close(self) -> None:
        self.flush()
        self.lines = [self._run]  # a reused writer starts a new run


@dataclass
class TracedRun:
    meta: dict
    merges: list[dict] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)  # line number of each merge


def _check_merge(rec: dict, where: str) -> None:
    for name, kind in MERGE_FIELDS.items():
        if name not in rec:
            raise TraceError(f"{where}: merge record lacks {name!r}")
        if not isinstance(rec[name], kind) or (kind is int and isinstance(rec[name], bool)):
            raise TraceError(f"{where}: {name!r} has the wrong type ({type(rec[name]).__name__})")
    bucket = rec["bucket"]
    for name in ROW_FIELDS:
        if len(rec[name]) != bucket:
            raise TraceError(f"{where}: {name!r} has {len(rec[name])} rows, bucket is {bucket}")
    for name in ("dev_tokens", "dev_positions", "host_tokens", "host_positions"):
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in rec[name]):
            raise TraceError(f"{where}: {name!r} must hold integers")
    if any(s not in ("device", "host") for s in rec["sources"]):
        raise TraceError(f"{where}: 'sources' must be 'device' or 'host' per row")


def read_trace(path: str) -> list[TracedRun]:
    """Every run in the trace, validated; raises TraceError naming the line on bad input."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read ({exc.strerror})") from None
    if not raw.strip():
        raise TraceError(f"{path}: empty trace (no merge records)")
    if not raw.endswith(b"\n"):
        n = raw.count(b"\n") + 1
        raise TraceError(f"{path}:{n}: truncated line (no newline at the end of the file)")
    runs: list[TracedRun] = []
    for n, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        where = f"{path}:{n}"
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(rec, dict):
            raise TraceError(f"{where}: a record must be a JSON object")
        if rec.get("v") != VERSION:
            raise TraceError(f"{where}: schema version {rec.get('v')!r}, this reader knows {VERSION}")
        kind = rec.get("kind")
        if kind == "run":
            runs.append(TracedRun(rec.get("meta") or {}))
        elif kind == "merge":
            _check_merge(rec, where)
            if not runs:
                runs.append(TracedRun({}))
            runs[-1].merges.append(rec)
            runs[-1].lines.append(n)
        else:
            raise TraceError(f"{where}: unknown record kind {kind!r} (expected 'run' or 'merge')")
    if not any(r.merges for r in runs):
        raise TraceError(f"{path}: no merge records")
    return runs
