"""Recorded merges re-decided under any arm's flags (``ttsim replay --trace FILE [--arm A]``).

Pure Python: neither torch nor vLLM (a test checks ``sys.modules``), only the rule and the
trace reader, so a trace replays in about a second.

Each recorded merge is re-decided by :func:`model.merge_rule.decide_merge` -- the function
the generator itself calls -- over the recorded device reads and host inputs. A row's
outcome is right when what the merge hands the trace equals the host's token and position
(the host is fresh at batch changes; :meth:`MergeEvent.kept_wrong` is the same test).
Flags that change what the merge reads (``merge_from_last_run`` and the what-if knobs)
cannot be replayed from reads already taken: the replay says so when the arm's differ from
the recording's.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from model.flags import ARMS, AS_IS, GeneratorFlags
from model.merge_events import kept_wrong
from model.merge_rule import decide_merge
from model.merge_trace import TracedRun, TraceError, read_trace

READ_SIDE = ("merge_from_last_run", "whatif_async_merge_read", "whatif_never_run_bucket")


@dataclass
class ReplayedMerge:
    line: int
    step: int
    bucket: int
    changed: list[int]  # rows whose source differs from the recording
    wrong: list[int]  # rows that would keep a token/position the host disagrees with
    recorded_wrong: list[int]
    guard_rejected: bool
    rows: list[dict]


def recorded_flags(rec: dict) -> GeneratorFlags:
    known = {f.name for f in fields(GeneratorFlags)}
    return GeneratorFlags(**{k: bool(v) for k, v in rec["flags"].items() if k in known})


def arm_of(flags: GeneratorFlags) -> str | None:
    return next((name for name, f in ARMS.items() if f == flags), None)


def _wrong(sources, dev_tok, dev_pos, host_tok, host_pos) -> list[int]:
    return [r for r, s in enumerate(sources) if kept_wrong(s, dev_tok[r], dev_pos[r], host_tok[r], host_pos[r])]


def replay_merge(rec: dict, flags: GeneratorFlags, line: int = 0) -> ReplayedMerge:
    dev = rec["dev_tokens"], rec["dev_positions"]
    host_tok, host_pos = rec["host_tokens"], rec["host_positions"]
    d = decide_merge(flags, rec["max_context"], *dev, host_tok, host_pos, rec["prefilled"])
    sources = ["device" if k else "host" for k in d.keep]
    dev_pos = d.dev_pos
    # the recording's own outcome: its flags' clamp decides what it compared
    rec_dev_pos = decide_merge(recorded_flags(rec), rec["max_context"], *dev, host_tok, host_pos,
                               [False] * rec["bucket"]).dev_pos
    rows = [{"slot": r, "request": rec["request_ids"][r], "host": [rec["host_tokens"][r], rec["host_positions"][r]],
             "dev": [rec["dev_tokens"][r], dev_pos[r]], "recorded": rec["sources"][r], "replayed": sources[r],
             "reason": d.reasons[r]} for r in range(rec["bucket"])]
    return ReplayedMerge(
        line, rec["step"], rec["bucket"],
        changed=[r for r in range(rec["bucket"]) if sources[r] != rec["sources"][r]],
        wrong=_wrong(sources, rec["dev_tokens"], dev_pos, rec["host_tokens"], rec["host_positions"]),
        recorded_wrong=_wrong(rec["sources"], rec["dev_tokens"], rec_dev_pos, rec["host_tokens"],
                              rec["host_positions"]),
        guard_rejected=d.guard_rejected, rows=rows)


def replay_run(run: TracedRun, flags: GeneratorFlags | None = None) -> list[ReplayedMerge]:
    """Every merge of ``run`` under ``flags`` (default: the flags each merge was recorded with)."""
    return [replay_merge(rec, flags or recorded_flags(rec), line) for rec, line in zip(run.merges, run.lines)]


def read_side_mismatch(run: TracedRun, flags: GeneratorFlags) -> list[str]:
    rec = recorded_flags(run.merges[0])
    return [f for f in READ_SIDE if getattr(rec, f) != getattr(flags, f)]


def report(path: str, arm: str | None, out) -> int:
    """Print the replay of every run in ``path``; 1 if any merge would be wrong, else 0."""
    if arm is not None and arm not in ARMS:
        raise KeyError(f"unknown arm {arm!r}; choose from {', '.join(ARMS)}")
    runs = read_trace(path)
    any_wrong = False
    for run in runs:
        if not run.merges:
            continue
        flags = ARMS[arm] if arm else None
        recorded = arm_of(recorded_flags(run.merges[0])) or "custom flags"
        meta = " ".join(f"{k}={v}" for k, v in sorted(run.meta.items()))
        print(f"run [{meta or 'no metadata'}] recorded under {recorded}; replayed under {arm or recorded}",
              file=out)
        if flags is not None:
            for f in read_side_mismatch(run, flags):
                print(f"  note: {f} differs from the recording; it changes what the merge reads, so the "
                      f"recorded reads are used as read", file=out)
        replayed = replay_run(run, flags)
        for m in replayed:
            status = f"WRONG rows {m.wrong}" if m.wrong else "right"
            guard = " GUARD-REJECT" if m.guard_rejected else ""
            changed = f"; rows changed vs recording: {m.changed}" if m.changed else ""
            print(f"  line {m.line} step {m.step} bucket {m.bucket}{guard}: {status}{changed}", file=out)
            for r in m.rows:
                if r["slot"] in m.wrong or r["slot"] in m.changed:
                    print(f"    slot {r['slot']} ({r['request']}): host {r['host'][0]}@{r['host'][1]} "
                          f"dev {r['dev'][0]}@{r['dev'][1]} recorded {r['recorded']} -> {r['replayed']} "
                          f"({r['reason']})", file=out)
        wrong = [m for m in replayed if m.wrong]
        changed = [m for m in replayed if m.changed]
        print(f"  {len(replayed)} merges: {len(wrong)} wrong, {len(changed)} changed vs recording", file=out)
        any_wrong |= bool(wrong)
    return 1 if any_wrong else 0
