"""The light commands stay light: from a fresh process, `replay --trace`, `arms merge`,
`arms compare` and `snapshots report` import neither torch nor vLLM."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from imports import ROOT

TRACE = ROOT / "tests" / "serving" / "traces" / "slot-reuse-seed27-control.jsonl"
HEAVY = ("torch", "vllm")


def _report(path, seed_start: int, seeds: int, index: int, count: int, failed: int) -> str:
    arm = {"runs": seeds, "requests": 32 * seeds, "failed_requests": failed, "failing_seeds": [seed_start] if failed else [],
           "rate": failed / (32 * seeds), "wilson95": [0.0, 0.1], "defects": {"slot-reuse": failed} if failed else {},
           "guard_rejects": 0, "preemptions": 0}
    report = {"model": "markov", "seed_start": 0, "seeds": 2, "backend": "ttsim", "workload": "stage3",
              "arms": {"control": arm}, "shard": {"index": index, "count": count, "seed_start": seed_start,
                                                  "seeds": seeds}}
    path.write_text(json.dumps(report))
    return str(path)


def _run_in_fresh_process(argv: list[str], tmp_path) -> tuple[int, list[str], str]:
    code = ("import json, sys; from fixtures.cli import main; rc = main(sys.argv[1:]); "
            f"print('MODULES', json.dumps([m for m in {HEAVY!r} if m in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "TTSIM_RUNS_DIR": str(tmp_path / "runs")})
    line = [x for x in p.stdout.splitlines() if x.startswith("MODULES ")]
    assert line, p.stdout[-2000:] + p.stderr[-2000:]
    return p.returncode, json.loads(line[-1][len("MODULES "):]), p.stdout + p.stderr


def test_replay_trace_imports_neither_torch_nor_vllm(tmp_path):
    rc, heavy, out = _run_in_fresh_process(["replay", "--trace", str(TRACE)], tmp_path)
    assert heavy == [], out
    assert "replayed under control" in out and "WRONG" in out  # it really re-decided the recorded failure


def test_arms_merge_and_compare_import_neither_torch_nor_vllm(tmp_path):
    a = _report(tmp_path / "a.json", 0, 1, 1, 2, 1)
    b = _report(tmp_path / "b.json", 1, 1, 2, 2, 0)
    rc, heavy, out = _run_in_fresh_process(["arms", "merge", a, b, "--json", str(tmp_path / "m.json")], tmp_path)
    assert (rc, heavy) == (0, []), out
    rc, heavy, out = _run_in_fresh_process(["arms", "compare", str(tmp_path / "m.json"), str(tmp_path / "m.json")],
                                           tmp_path)
    assert (rc, heavy) == (0, []), out


def test_snapshots_report_imports_neither_torch_nor_vllm(tmp_path):
    rc, heavy, out = _run_in_fresh_process(["snapshots", "report", "--out", str(tmp_path / "review")], tmp_path)
    assert (rc, heavy) == (0, []), out


@pytest.mark.parametrize("argv", [["replay", "--seed", "1", "--arm", "control"], ["arms", "--seeds", "1"]])
def test_the_heavy_commands_do_import_torch(argv, tmp_path):
    """The check can fail: a command that runs the device imports torch (stopped at bad input
    after parsing would not, so these run a unit of real work... here only the import is asked)."""
    code = ("import sys, importlib; from fixtures.cli import build_parser; args = build_parser().parse_args(sys.argv[1:]); "
            "importlib.import_module({'replay': 'fixtures.scenario', 'arms': 'fixtures.sweep.arms'}[sys.argv[1]]); "
            "print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.stdout.strip() == "True", p.stderr[-2000:]
