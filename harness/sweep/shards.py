"""Split an arms sweep across machines and merge the parts back.

``ttsim arms --shard I/N`` runs the I-th of N contiguous blocks of the seed range and writes
a report that names its block; ``ttsim arms merge A.json B.json ...`` checks that the parts
are the N blocks of one sweep (everything their reports record agrees: model, step policy,
generator, workload, seed range, arms...; every block once)
and rebuilds the report the unsharded run writes, byte for byte: counts add, failing seeds
concatenate in seed order, the first failure is the lowest seed's, rates and Wilson
intervals are recomputed from the totals.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.base.stats import wilson


class ShardError(ValueError):
    """Parts that do not make one sweep; the message names the file and the problem."""


def parse_shard(text: str) -> tuple[int, int]:
    """``"I/N"`` (1 <= I <= N) -> (I, N)."""
    try:
        i, n = (int(p) for p in text.split("/"))
    except ValueError:
        raise ShardError(f"--shard must look like I/N (e.g. 2/4), got {text!r}") from None
    if not 1 <= i <= n:
        raise ShardError(f"--shard {text}: need 1 <= I <= N")
    return i, n


def shard_seeds(seeds: range, index: int, count: int) -> range:
    """The ``index``-th (1-based) of ``count`` contiguous blocks of ``seeds`` (sizes differ by at most 1)."""
    n = len(seeds)
    lo, hi = (index - 1) * n // count, index * n // count
    return seeds[lo:hi]


def dumps(report: dict) -> str:
    """The one serialisation of a report (what ``--json`` writes)."""
    return json.dumps(report, indent=2, sort_keys=True) + "\n"


#: what a shard's report says of the sweep besides its block and its counts: every other key
#: (model, step policy, generator, backend, workload, seed range, hardware, and whatever a
#: later report records) must agree, or the parts are not one sweep
_OWN = ("shard", "arms")


def merge(paths: list[str]) -> dict:
    parts = [(p, _read_part(p)) for p in paths]
    first_path, first = parts[0]
    count = first["shard"]["count"]
    seen: dict[int, str] = {}
    for p, r in parts:
        for key in sorted((set(r) | set(first)) - set(_OWN)):
            if key not in r or key not in first:
                has, lacks = (p, first_path) if key in r else (first_path, p)
                raise ShardError(f"{has} records {key} but {lacks} does not: not shards of one sweep")
            if r[key] != first[key]:
                raise ShardError(f"{p}: {key} is {r[key]!r} but {first_path} has {first[key]!r}")
        if list(r["arms"]) != list(first["arms"]):
            raise ShardError(f"{p}: arms {', '.join(r['arms'])} differ from {first_path}'s {', '.join(first['arms'])}")
        idx, n = r["shard"]["index"], r["shard"]["count"]
        if n != count:
            raise ShardError(f"{p}: shard {idx}/{n} is not one of {count} shards ({first_path})")
        if idx in seen:
            raise ShardError(f"{p}: shard {idx}/{n} is given twice (also {seen[idx]})")
        seen[idx] = p
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        raise ShardError(f"missing shard(s) {', '.join(f'{i}/{count}' for i in missing)}")
    parts.sort(key=lambda pr: pr[1]["shard"]["index"])
    merged = {k: v for k, v in first.items() if k not in ("shard", "arms")}
    merged["arms"] = {arm: _merge_arm([r["arms"][arm] for _, r in parts]) for arm in first["arms"]}
    return merged


_ARM_COUNTS = ("runs", "requests", "failed_requests", "guard_rejects", "preemptions")


def _read_part(path: str) -> dict:
    """One shard's report, or ShardError naming the file and what is wrong with it."""
    try:
        report = json.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as exc:
        raise ShardError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ShardError(f"{path} is not JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as exc:
        raise ShardError(f"{path} is not JSON: {exc}") from None
    shard = report.get("shard") if isinstance(report, dict) else None
    arms = report.get("arms") if isinstance(report, dict) else None
    if not (isinstance(shard, dict) and isinstance(arms, dict) and arms):
        raise ShardError(f"{path} is not a shard report of `ttsim arms --shard I/N --json ...`")
    if not all(isinstance(shard.get(k), int) for k in ("index", "count")) or not 1 <= shard["index"] <= shard["count"]:
        raise ShardError(f"{path}: its shard is not {{index: I, count: N}} with 1 <= I <= N")
    for name, a in arms.items():
        if not (isinstance(a, dict) and all(isinstance(a.get(k), int) for k in _ARM_COUNTS)
                and isinstance(a.get("failing_seeds"), list) and isinstance(a.get("defects"), dict)):
            raise ShardError(f"{path}: arm {name!r} lacks the counts of an arms report")
    return report


def _merge_arm(summaries: list[dict]) -> dict:
    out = {key: sum(s[key] for s in summaries) for key in _ARM_COUNTS}
    out["failing_seeds"] = [seed for s in summaries for seed in s["failing_seeds"]]
    defects: dict[str, int] = {}
    for s in summaries:
        for k, v in s["defects"].items():
            defects[k] = defects.get(k, 0) + v
    out["defects"] = dict(sorted(defects.items()))
    out["rate"] = out["failed_requests"] / out["requests"] if out["requests"] else 0.0
    out["wilson95"] = list(wilson(out["failed_requests"], out["requests"]))
    firsts = [s["first_failure"] for s in summaries if "first_failure" in s]
    if firsts:
        out["first_failure"] = firsts[0]  # shards are in seed order
    return out
