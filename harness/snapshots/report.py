"""``ttsim snapshots report [--ref REF]``: the working tree's snapshots against a git ref, as a
review document (Markdown + PNG plots) a reviewer reads instead of raw .ambr diffs.

- rates: the arms summary's failed-request rate per arm, old and new, with 95% Wilson intervals;
- numerics: every changed value of a numeric snapshot, with the share of its tolerance used;
- merge decisions: the step and row that differ;
- anything else that changed: a short unified diff.
"""

from __future__ import annotations

import ast
import difflib
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from harness.base.stats import wilson
from harness.snapshots.numeric import _describe, _tol, loads


class ReportError(Exception):
    """Bad input (unknown ref, no snapshots): one line, exit 2."""


@dataclass
class Report:
    ref: str
    rates: list[dict] = field(default_factory=list)
    numerics: list[dict] = field(default_factory=list)
    decisions: list[dict] = field(default_factory=list)
    other: list[dict] = field(default_factory=list)
    files: int = 0


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def snapshot_files(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("tests/**/__snapshots__/**/*")
                  if p.is_file() and (p.suffix == ".ambr" or p.name.endswith(".tol.json")))


def _old_text(root: Path, ref: str, rel: str) -> str | None:
    out = _git(root, "show", f"{ref}:{rel}")
    return out.stdout if out.returncode == 0 else None


def ambr_entries(text: str) -> dict[str, str]:
    out, name = {}, None
    for line in text.splitlines():
        if line.startswith("# name: "):
            name = line[len("# name: "):]
            out[name] = ""
        elif name is not None and not line.startswith("# serializer"):
            out[name] += line + "\n"
    return {k: v.rstrip("\n") for k, v in out.items()}


_AMBR = [(re.compile(r"\b(?:dict|list|tuple|set)\(([\[{])"), r"\1"), (re.compile(r"([\]}])\)"), r"\1")]


def ambr_value(body: str):
    """The Python value of an amber body made of dicts, lists, numbers and strings (else None)."""
    text = body
    for pat, rep in _AMBR:
        text = pat.sub(rep, text)
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return None


def _rates(name: str, old, new) -> list[dict]:
    rows = []
    for arm in sorted(set(old or {}) | set(new or {})):
        o, n = (old or {}).get(arm), (new or {}).get(arm)
        row = {"snapshot": name, "arm": arm, "changed": o != n}
        for side, v in (("old", o), ("new", n)):
            if v:
                row[side] = (v["failed_requests"], v["requests"], wilson(v["failed_requests"], v["requests"]))
        rows.append(row)
    return rows


def _decisions(name: str, old, new) -> list[dict]:
    out = []
    for arm in sorted(set(old or {}) | set(new or {})):
        o, n = (old or {}).get(arm, {}), (new or {}).get(arm, {})
        o_m = o.get("merges", []) if isinstance(o, dict) else o
        n_m = n.get("merges", []) if isinstance(n, dict) else n
        if not o_m or not n_m:  # a snapshot added or removed: one line, not every merge
            out.append({"snapshot": name, "arm": arm, "merge": "all merges",
                        "head": f"{len(o_m)} merges before, {len(n_m)} after", "rows": []})
            continue
        for k in range(max(len(o_m), len(n_m))):
            a = str(o_m[k]) if k < len(o_m) else None  # "step S bucket A->B ...: row | row | ..."
            b = str(n_m[k]) if k < len(n_m) else None
            if a == b:
                continue
            head = (b or a).split(":", 1)[0]
            ra = a.split(": ", 1)[-1].split(" | ") if a else []
            rb = b.split(": ", 1)[-1].split(" | ") if b else []
            rows = [(x, y) for x, y in zip(ra + [None] * (len(rb) - len(ra)), rb + [None] * (len(ra) - len(rb)))
                    if x != y]
            out.append({"snapshot": name, "arm": arm, "merge": f"merge {k}",
                        "head": f"old {(a or '-').split(':', 1)[0]}; new {head if b else '-'}", "rows": rows})
        if isinstance(o, dict) and isinstance(n, dict) and o.get("failed") != n.get("failed"):
            out.append({"snapshot": name, "arm": arm, "merge": "verdicts",
                        "head": "failed requests", "rows": [(str(o.get("failed")), str(n.get("failed")))]})
    return out


def _numerics(name: str, old: dict | None, new: dict | None) -> list[dict]:
    rows = []
    for key in sorted(set(old or {}) | set(new or {})):
        o, n = (old or {}).get(key), (new or {}).get(key)
        if o == n:
            continue
        tol = _tol(n or o)
        used = None
        if o and n:
            if "floor" in tol:
                room = o["value"] - tol["floor"]
                used = (o["value"] - n["value"]) / room if room > 0 else float("inf")
            else:
                allowed = tol["abs"] + tol["rel"] * abs(o["value"])
                used = abs(n["value"] - o["value"]) / allowed if allowed > 0 else float("inf")
        rows.append({"snapshot": name, "key": key, "old": o and o["value"], "new": n and n["value"],
                     "tolerance": _describe(tol), "used": used,
                     "tolerance_changed": bool(o and n and _tol(o) != _tol(n))})
    return rows


def build(root: Path, ref: str) -> Report:
    root = Path(root)
    if _git(root, "rev-parse", "--git-dir").returncode != 0:
        raise ReportError(f"{root} is not a git work tree")
    if _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
        raise ReportError(f"unknown git ref {ref!r} (try HEAD, main or a commit id)")
    files = snapshot_files(root)
    if not files:
        raise ReportError(f"no snapshots under {root}/tests/**/__snapshots__ (record them with --snapshot-update)")
    rep = Report(ref, files=len(files))
    for path in files:
        rel = path.relative_to(root).as_posix()
        old_text, new_text = _old_text(root, ref, rel), path.read_text()
        if old_text == new_text:
            continue
        if path.name.endswith(".tol.json"):
            old = loads(old_text) if old_text else None
            rep.numerics += _numerics(f"{rel}", old, loads(new_text))
            continue
        old_e, new_e = ambr_entries(old_text or ""), ambr_entries(new_text)
        for name in sorted(set(old_e) | set(new_e)):
            a, b = old_e.get(name), new_e.get(name)
            if a == b:
                continue
            va, vb = ambr_value(a) if a else None, ambr_value(b) if b else None
            label = f"{rel}::{name}"
            if name.startswith("test_arms_summary") and (va or vb):
                rep.rates += _rates(label, va, vb)
            elif name.startswith("test_merge_decisions") and (va or vb):
                rep.decisions += _decisions(label, va, vb)
            else:
                diff = list(difflib.unified_diff((a or "").splitlines(), (b or "").splitlines(), "old", "new",
                                                 lineterm="", n=1))
                rep.other.append({"snapshot": label, "diff": diff[:40] + (["..."] if len(diff) > 40 else [])})
    return rep


def _interval(side) -> str:
    if not side:
        return "-"
    f, n, (lo, hi) = side
    return f"{f}/{n} = {f / n:.2%} [{lo:.2%}, {hi:.2%}]"


def markdown(rep: Report, plots: dict[str, str]) -> str:
    out = [f"# Snapshot review against `{rep.ref}`", "",
           f"{rep.files} snapshot files compared. Changed: {len({r['snapshot'] for r in rep.rates if r['changed']})} "
           f"rate tables, {len(rep.numerics)} numeric values, {len(rep.decisions)} merge decisions, "
           f"{len(rep.other)} other snapshots.", ""]
    if rep.rates:
        out += ["## Rates (failed requests, 95% Wilson interval)", "", "| arm | old | new | |", "|---|---|---|---|"]
        out += [f"| {r['arm']} | {_interval(r.get('old'))} | {_interval(r.get('new'))} | "
                f"{'**changed**' if r['changed'] else ''} |" for r in rep.rates]
        out += ["", f"![rates]({plots['rates']})" if "rates" in plots else "", ""]
    if rep.numerics:
        out += ["## Numerics", "", "| snapshot | key | old | new | tolerance | tolerance used |", "|---|---|---|---|---|---|"]
        for r in rep.numerics:
            used = "-" if r["used"] is None else f"{r['used']:.0%}" + (" **OUT**" if r["used"] > 1 else "")
            tol = r["tolerance"] + (" (**changed**)" if r["tolerance_changed"] else "")
            out.append(f"| {Path(r['snapshot']).name} | {r['key']} | {r['old']} | {r['new']} | {tol} | {used} |")
        out += ["", f"![numerics]({plots['numerics']})" if "numerics" in plots else "", ""]
    if rep.decisions:
        out += ["## Merge decisions", ""]
        for d in rep.decisions:
            out.append(f"- `{d['snapshot']}` arm **{d['arm']}**, {d['merge']} ({d['head']}):")
            out += [f"  - old `{a}`\n    new `{b}`" for a, b in d["rows"]]
        out.append("")
    for o in rep.other:
        out += [f"## {o['snapshot']}", "", "```diff", *o["diff"], "```", ""]
    if not (rep.rates or rep.numerics or rep.decisions or rep.other):
        out += ["No snapshot changed.", ""]
    return "\n".join(out)


def plot(rep: Report, out_dir: Path) -> dict[str, str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    made = {}
    if rep.rates:
        fig, ax = plt.subplots(figsize=(7, 3.2))
        for k, r in enumerate(rep.rates):
            for dx, side, colour in ((-0.15, "old", "tab:grey"), (0.15, "new", "tab:blue")):
                if r.get(side):
                    f, n, (lo, hi) = r[side]
                    p = f / n
                    ax.errorbar(k + dx, p, yerr=[[p - lo], [hi - p]], fmt="o", color=colour, capsize=3,
                                label=side if k == 0 else None)
        ax.set_xticks(range(len(rep.rates)), [r["arm"] + ("*" if r["changed"] else "") for r in rep.rates],
                      rotation=20, fontsize=8)
        ax.set_ylabel("failed-request rate")
        ax.set_title("rates per arm, old vs new (* changed)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out_dir / "rates.png", metadata={"Software": None})
        plt.close(fig)
        made["rates"] = "rates.png"
    used = [r for r in rep.numerics if r["used"] is not None]
    if used:
        fig, ax = plt.subplots(figsize=(7, 0.4 * len(used) + 1.2))
        vals = [min(r["used"], 2.0) for r in used]
        ax.barh(range(len(used)), vals, color=["tab:red" if v > 1 else "tab:blue" for v in vals])
        ax.axvline(1.0, color="k", lw=1)
        ax.set_yticks(range(len(used)), [r["key"] for r in used], fontsize=7)
        ax.set_xlabel("share of tolerance used (1 = at the limit)")
        fig.tight_layout()
        fig.savefig(out_dir / "numerics.png", metadata={"Software": None})
        plt.close(fig)
        made["numerics"] = "numerics.png"
    return made


def write(root: Path, ref: str, out_dir: Path) -> Path:
    rep = build(root, ref)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "report.md"
    path.write_text(markdown(rep, plot(rep, out_dir)))
    return path
