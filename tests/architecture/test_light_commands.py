"""The light commands stay light: from a fresh process, `replay --trace`, `arms merge`,
`arms compare`, `snapshots report` and `scenario --list` import neither torch nor vLLM."""

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
    code = ("import json, sys; from harness.commands.cli import main; rc = main(sys.argv[1:]); "
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


def test_scenario_list_and_its_refusals_import_neither_torch_nor_vllm(tmp_path):
    rc, heavy, out = _run_in_fresh_process(["scenario", "--list"], tmp_path)
    assert (rc, heavy) == (0, []), out
    assert "upstream-54565: tenstorrent/tt-metal#54565" in out
    _, heavy, out = _run_in_fresh_process(["scenario", "upstream-56215"], tmp_path)  # (main returns 2)
    assert heavy == [], out
    assert "ttsim: error: upstream-56215 (https://github.com/tenstorrent/tt-metal/issues/56215) is not reproduced" in out


@pytest.mark.parametrize("argv", [["replay", "--seed", "1", "--arm", "control"], ["arms", "--seeds", "1"]])
def test_the_heavy_commands_do_import_torch(argv, tmp_path):
    """The check can fail: a command that runs the device imports torch (stopped at bad input
    after parsing would not, so these run a unit of real work... here only the import is asked)."""
    code = ("import sys, importlib; from harness.commands.cli import build_parser; args = build_parser().parse_args(sys.argv[1:]); "
            "importlib.import_module({'replay': 'harness.scenario', 'arms': 'harness.sweep.arms'}[sys.argv[1]]); "
            "print('torch' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code, *argv], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.stdout.strip() == "True", p.stderr[-2000:]


# -- the ttsim package: seed controls light, the ttnn namespace at first use ------------------

def _fresh(code: str, tmp_path) -> str:
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "TTSIM_RUNS_DIR": str(tmp_path / "runs")})
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def test_ttsims_seed_controls_load_without_torch_and_any_ttnn_name_loads_the_namespace(tmp_path):
    out = _fresh("import sys, ttsim; ttsim.set_seed(7); print(ttsim.get_seed(), ttsim.DEFAULT_SEED > 0, "
                 "'torch' in sys.modules); t = ttsim.from_torch(__import__('torch').ones(2)); "
                 "print('torch' in sys.modules, type(t).__name__, ttsim.get_golden_function(ttsim.add) is not None)",
                 tmp_path)
    assert out.split() == ["7", "True", "False", "True", "Tensor", "True"], out


def test_dir_and_star_import_of_ttsim_see_the_whole_ttnn_namespace(tmp_path):
    """`from ttsim import *` (the hil stand-in's) and dir() load the namespace first; an unknown
    name is an AttributeError naming it, not a half-loaded package."""
    out = _fresh("import ttsim; names = dir(ttsim); ns = {}; exec('from ttsim import *', ns); "
                 "print('from_torch' in names, 'transformer' in names, 'device' in names, "
                 "{'from_torch', 'MeshDevice', 'EXTENSIONS'} <= set(ns), '_namespace' in ns)\n"
                 "try:\n    ttsim.no_such_op\nexcept AttributeError as e:\n    print(repr(str(e)))", tmp_path)
    assert out.split("\n")[0].split() == ["True", "True", "True", "True", "False"], out
    assert "'no_such_op'" in out, out


def test_an_inner_pytest_session_that_opens_no_device_imports_no_torch(tmp_path):
    """The plugin and the `ttnn` fixture stay light until a device is used: inner sessions (the
    snapshot policy's, hil's fail-closed ones) no longer pay torch's import."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_light.py").write_text(
        "import sys\n\ndef test_light(ttnn):\n    assert ttnn.__name__ == 'ttsim'\n"
        "    assert 'torch' not in sys.modules, 'the ttnn fixture imported torch'\n")
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:faker", "test_light.py"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TTSIM_RUNS_DIR": str(tmp_path / "runs")})
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
