"""Bad input to `ttsim`: one line, exit 2, before any work (the table of every bad input found, kept whole).

Every case runs `harness.commands.cli.main` in-process and must fail in its option checks
(harness.commands.preflight) or in argparse: one stderr line starting ``ttsim: error:``, nothing on
stdout, nothing written, well under a second of work. A fresh process runs the whole table
to show that none of it imports torch or vLLM. A new option's bad values belong here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.commands import cli

ROOT = Path(__file__).resolve().parents[2]

# (id, argv, environment, what the line must say); {names} are the workspace's paths
CASES = [
    # bad input the sweep used to accept, or die on after the work
    ("seeds-huge", ["arms", "--seeds", "100000000000000000000"], {}, "--seeds must be at most 1000000, got 1000"),
    ("seeds-zero", ["arms", "--seeds", "0"], {}, "--seeds must be > 0, got 0"),
    ("seeds-one-too-many", ["arms", "--seeds", "1000001"], {}, "--seeds must be at most 1000000, got 1000001"),
    ("arms-twice", ["arms", "--arms", "control,control"], {}, "--arms names control more than once"),
    ("arms-empty-name", ["arms", "--arms", "control,,all"], {}, "--arms 'control,,all' has an empty name"),
    ("arms-none", ["arms", "--arms", ""], {}, "--arms '' has an empty name"),
    ("arms-unknown", ["arms", "--arms", "bogus"], {}, "unknown arm(s) bogus"),
    ("json-empty", ["arms", "--json", ""], {}, "--json needs a file path, got ''"),
    ("json-dir", ["arms", "--json", "{dir}"], {}, "cannot write --json {dir}: it is a directory"),
    ("json-no-parent", ["arms", "--json", "{missing}/out.json"], {}, "directory {missing} does not exist"),
    ("plot-dir", ["arms", "--plot", "{dir}"], {}, "cannot write --plot {dir}: it is a directory"),
    ("plot-is-json", ["arms", "--plot", "{out}/same.png", "--json", "{out}/same.png"], {},
     "--json and --plot name the same file"),
    ("plot-format", ["arms", "--plot", "{out}/plot.txt2"], {}, ".txt2 is not a format matplotlib writes"),
    ("json-is-record", ["arms", "--json", "{runs}/arms.jsonl"], {"TTSIM_RUNS_DIR": "{runs}"},
     "--json and the run record name the same file"),
    ("trace-is-json", ["arms", "--json", "{out}/x", "--record-merges", "{out}/x"], {},
     "--json and --record-merges name the same file"),
    ("trace-dir", ["arms", "--record-merges", "{dir}"], {}, "cannot write --record-merges {dir}: it is a directory"),
    ("runs-dir-is-file", ["arms", "--seeds", "1"], {"TTSIM_RUNS_DIR": "{file}"},
     "the records folder ($TTSIM_RUNS_DIR) {file} is not a directory"),
    ("runs-dir-read-only", ["arms", "--seeds", "1"], {"TTSIM_RUNS_DIR": "{readonly}/runs"}, "is not writable"),
    ("runs-dir-under-a-file", ["arms", "--seeds", "1"], {"TTSIM_RUNS_DIR": "{file}/runs"}, "is not a directory"),
    ("record-is-dir", ["arms", "--seeds", "1"], {"TTSIM_RUNS_DIR": "{records_with_dir}"},
     "cannot write the run record {records_with_dir}/arms.jsonl: it is a directory"),
    ("workers-1000", ["arms", "--workers", "1000"], {}, "--workers 1000: this machine runs at most {cpus}"),
    ("workers-zero", ["arms", "--workers", "0"], {}, "--workers must be > 0, got 0"),
    ("shard-bad", ["arms", "--shard", "3/2"], {}, "--shard 3/2: need 1 <= I <= N"),
    ("shard-empty", ["arms", "--seeds", "2", "--shard", "1/3"], {}, "--shard 1/3 leaves no seeds of 2"),
    ("generator-spelling", ["arms", "--generator", "nocolon"], {}, "--generator must look like MODULE:ATTR"),
    ("tt-metal-alone", ["replay", "--arm", "all", "--seed", "1", "--tt-metal", "{dir}"], {},
     "--tt-metal needs --generator"),
    ("ray-address-local", ["arms", "--ray-address", "127.0.0.1:1"], {}, "--ray-address needs --executor ray"),
    ("hil-devices", ["arms", "--hil", "--hil-devices", "0,0"], {}, "--hil-devices: '0,0' names a card twice"),
    ("selfcheck-seed-env", ["selfcheck"], {"TTSIM_SEED": "abc"}, "TTSIM_SEED must be an integer, got 'abc'"),
    ("serve-seed-env", ["serve"], {"TTSIM_SEED": "-4"}, "TTSIM_SEED must be >= 0, got -4"),
    ("merge-step-policies", ["arms", "merge", "{phased}", "{mixed}", "--json", "{out}/m.json"], {},
     "{mixed}: step_policy is 'mixed' but {phased} has 'phased'"),
    ("merge-generator", ["arms", "merge", "{phased}", "{with_generator}", "--json", "{out}/m.json"], {},
     "{with_generator} records generator but {phased} does not"),
    ("merge-version", ["arms", "merge", "{version1}", "{version2}", "--json", "{out}/m.json"], {},
     "{version2}: version is 2 but {version1} has 1"),
    ("merge-json-dir", ["arms", "merge", "{phased}", "{phased2}", "--json", "{dir}"], {},
     "cannot write --json {dir}: it is a directory"),
    ("merge-binary", ["arms", "merge", "{binary}", "{phased2}", "--json", "{out}/m.json"], {},
     "{binary} is not JSON (not UTF-8 text)"),
    ("merge-bad-shard", ["arms", "merge", "{bad_shard}", "{phased2}", "--json", "{out}/m.json"], {},
     "{bad_shard}: its shard is not {{index: I, count: N}}"),
    ("merge-bad-counts", ["arms", "merge", "{bad_counts}", "{phased2}", "--json", "{out}/m.json"], {},
     "{bad_counts}: arm 'control' lacks the counts of an arms report"),
    ("compare-binary", ["arms", "compare", "{binary}", "{phased}"], {}, "{binary} is not JSON"),
    ("replay-trace-dir", ["replay", "--arm", "all", "--seed", "1", "--record-merges", "{dir}"], {},
     "cannot write --record-merges {dir}: it is a directory"),
    ("replay-needs-seed", ["replay", "--arm", "all"], {}, "replay needs --arm and --seed"),
    ("replay-trace-and-record", ["replay", "--trace", "{file}", "--record-merges", "{out}/t"], {},
     "--record-merges records a replayed seed, not a --trace"),
    ("snapshots-root-missing", ["snapshots", "report", "--root", "{missing}"], {}, "--root {missing} is not a directory"),
    ("snapshots-out-file", ["snapshots", "report", "--out", "{file}"], {}, "--out {file} is not a directory"),
    # argparse's own errors: one line too, not its usage block
    ("seeds-abc", ["arms", "--seeds", "abc"], {}, "arms: argument --seeds: invalid int value: 'abc'"),
    ("seeds-nan", ["arms", "--seeds", "nan"], {}, "invalid int value: 'nan'"),
    ("seeds-2.5", ["arms", "--seeds", "2.5"], {}, "invalid int value: '2.5'"),
    ("seed-start-negative", ["arms", "--seed-start", "-1"], {}, "argument --seed-start: seed must be >= 0, got -1"),
    ("model-bogus", ["arms", "--model", "bogus"], {}, "argument --model: invalid choice: 'bogus'"),
    ("step-policy-bogus", ["arms", "--step-policy", "bogus"], {}, "argument --step-policy: invalid choice: 'bogus'"),
    ("unknown-flag", ["arms", "--bogus"], {}, "unrecognized arguments: --bogus"),
    ("serve-max-model-len", ["serve", "--max-model-len", "-5"], {}, "unrecognized arguments: --max-model-len -5"),
    ("serve-port-abc", ["serve", "--port", "abc"], {}, "serve: argument --port: invalid int value: 'abc'"),
    ("serve-mesh-cols", ["serve", "--mesh-cols", "3"], {}, "argument --mesh-cols: invalid choice: 3"),
    ("replay-seed-negative", ["replay", "--seed", "-1"], {}, "replay: argument --seed: seed must be >= 0, got -1"),
    ("merge-without-json", ["arms", "merge", "{phased}"], {}, "arms merge: the following arguments are required: --json"),
    ("compare-one-file", ["arms", "compare", "{phased}"], {}, "arms compare: the following arguments are required"),
    ("snapshots-alone", ["snapshots"], {}, "snapshots: the following arguments are required"),
    ("ttsim-alone", [], {}, "the following arguments are required: COMMAND"),
    ("ttsim-bogus", ["bogus"], {}, "argument COMMAND: invalid choice: 'bogus'"),
]


def _report(step_policy="phased", index=1, **extra) -> dict:
    arm = {"runs": 1, "requests": 32, "failed_requests": 0, "failing_seeds": [], "rate": 0.0,
           "wilson95": [0.0, 0.1], "defects": {}, "guard_rejects": 0, "preemptions": 0}
    return {"model": "markov", "seed_start": 0, "seeds": 2, "backend": "ttsim", "workload": "stage3",
            "step_policy": step_policy, "arms": {"control": arm},
            "shard": {"index": index, "count": 2, "seed_start": index - 1, "seeds": 1}, **extra}


@pytest.fixture
def workspace(tmp_path) -> dict[str, str]:
    """The paths the cases name: existing folders and files, reports, a folder nobody may write."""
    paths = {name: tmp_path / name for name in ("dir", "out", "runs", "records_with_dir")}
    for p in paths.values():
        p.mkdir()
    (paths["records_with_dir"] / "arms.jsonl").mkdir()
    paths["missing"] = tmp_path / "missing"
    paths["file"] = tmp_path / "file.txt"
    paths["file"].write_text("not a folder\n")
    paths["binary"] = tmp_path / "binary.json"
    paths["binary"].write_bytes(bytes(range(256)) * 4)
    reports = {"phased": _report(), "phased2": _report(index=2), "mixed": _report("mixed", index=2),
               "with_generator": _report(index=2, generator="g.py:G"), "version1": _report(version=1),
               "version2": _report(index=2, version=2), "bad_shard": {**_report(), "shard": {"index": "1"}},
               "bad_counts": {**_report(), "arms": {"control": {"runs": 1}}}}
    for name, report in reports.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(report))
    if os.geteuid() == 0:  # root writes anywhere a mount allows: /proc/sys is read-only even to root
        paths["readonly"] = Path("/proc/sys")
    else:
        paths["readonly"] = tmp_path / "readonly"
        paths["readonly"].mkdir(mode=0o500)
    names = {k: str(v) for k, v in paths.items()}
    names["cpus"] = str(len(os.sched_getaffinity(0)))
    return names


def _fill(text: str, names: dict[str, str]) -> str:
    return text.format(**names)


def run_main(argv: list[str]) -> int:
    """`ttsim ARGV` in this process: main's return value, or the code argparse exits with."""
    try:
        return cli.main(argv)
    except SystemExit as exc:
        return exc.code


def _no_heavy_work(module: str, name: str):
    """The commands' bodies, except that those that run seeds, vLLM or a device fail the test
    at once instead of working for minutes (the light ones run: their bodies check files)."""
    heavy = {("harness.commands.arms", "run"), ("harness.commands.replay", "run"), ("harness.commands.serve", "run"),
             ("harness.commands.selfcheck", "run"), ("harness.commands.scenario", "run"),
             ("harness.commands.serve_replay", "run")}
    if (module, name) in heavy:
        return lambda args: pytest.fail(f"bad input reached {module}.{name}")
    return _LAZY(module, name)


_LAZY = cli._lazy


def _listing(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("argv, env, message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_and_exit_2_before_any_work(argv, env, message, workspace, tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "default-runs"))  # never the checkout's runs/
    monkeypatch.delenv("TTSIM_SEED", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, _fill(value, workspace))
    monkeypatch.setattr(cli, "_lazy", _no_heavy_work)
    before = _listing(tmp_path)
    code = run_main([_fill(a, workspace) for a in argv])
    out, err = capsys.readouterr()
    assert code == 2, err
    assert err.startswith("ttsim: error: ") and err.count("\n") == 1, err
    assert _fill(message, workspace) in err
    assert out == ""
    assert _listing(tmp_path) == before  # nothing written, not even the records folder


def test_help_is_still_whole(capsys):
    assert run_main(["arms", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: ttsim arms") and "--workers" in out and "--record-merges" in out
    assert out.count("\n") > 20


def test_the_whole_table_imports_neither_torch_nor_vllm(workspace, tmp_path):
    """From a fresh process, every case fails without importing torch or vLLM (torch's import
    alone takes seconds here; how long a refusal takes is measured by bench/bench_refusals.py)."""
    cases = [[[_fill(a, workspace) for a in argv], {k: _fill(v, workspace) for k, v in env.items()}]
             for _, argv, env, _ in CASES]
    code = ("import json, os, sys\n"
            "from tests.serving.test_bad_input import run_main\n"
            "base = dict(os.environ)\n"
            "for argv, env in json.loads(sys.argv[1]):\n"
            "    os.environ.clear(); os.environ.update({**base, **env})\n"
            "    assert run_main(argv) == 2, argv\n"
            "print('RESULT', json.dumps({'heavy': [m for m in ('torch', 'vllm') if m in sys.modules]}))\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "TTSIM_RUNS_DIR": str(tmp_path / "runs")}
    p = subprocess.run([sys.executable, "-c", code, json.dumps(cases)], cwd=ROOT, capture_output=True, text=True,
                       timeout=120, env=env)
    assert p.returncode == 0, p.stderr[-3000:]
    result = json.loads(p.stdout.split("RESULT ")[-1])
    assert result["heavy"] == [], result



@pytest.mark.parametrize("cpus", [1, 2, 3])
def test_workers_up_to_the_machines_cpus_are_accepted(cpus, monkeypatch, tmp_path):
    """The other side of workers-1000: as many workers as CPUs is fine, one more is not, and the
    default fits a one-CPU machine instead of being refused there."""
    from harness.commands import preflight

    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setattr(preflight, "cpus", lambda: cpus)

    def checked(*argv: str) -> int:
        args = cli.build_parser().parse_args(["arms", *argv])
        args.check(args)
        return args.workers

    assert checked() == min(2, cpus)
    assert checked("--workers", str(cpus)) == cpus
    with pytest.raises(preflight.UsageError, match=f"--workers {cpus + 1}: this machine runs at most {cpus} "):
        checked("--workers", str(cpus + 1))


# -- a user's generator that raises: in its constructor as at its import, one line -------------

BROKEN = '''from model.generator import Generator
{at_import}

class Broken(Generator):
    def __init__(self, *args, **kwargs):
        raise ValueError("no mesh for me")
'''


@pytest.fixture
def broken_generators(tmp_path, monkeypatch):
    """Two generator files: one whose class raises when built, one whose module raises when imported."""
    monkeypatch.delitem(sys.modules, "ttnn", raising=False)  # loading aliases it to the backend
    (tmp_path / "ctor.py").write_text(BROKEN.format(at_import=""))
    (tmp_path / "imp.py").write_text(BROKEN.format(at_import='raise ValueError("no mesh for me")'))
    yield tmp_path
    sys.modules.pop("ttnn", None)


@pytest.mark.parametrize("file, message", [
    ("ctor.py", "ttsim: error: --generator: building {path}:Broken raised ValueError: no mesh for me"),
    ("imp.py", "ttsim: error: --generator: importing '{path}' raised ValueError: no mesh for me"),
])
def test_a_generator_raising_when_built_is_one_line_like_one_raising_at_import(file, message, broken_generators,
                                                                              capsys):
    path = broken_generators / file
    assert run_main(["replay", "--arm", "control", "--seed", "0", "--generator", f"{path}:Broken"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [message.format(path=path)]


def test_a_sweep_whose_generator_raises_when_built_stops_in_one_line_and_writes_nothing(broken_generators, served):
    """`ttsim arms` as a process (a client of a fork server, as bin/ttsim runs with one up),
    through the sweep's own error path (one worker, the quickest)."""
    env, log, _ = served
    out = broken_generators / "out"
    out.mkdir()
    spec = f"{broken_generators / 'ctor.py'}:Broken"
    p = subprocess.run([sys.executable, "-m", "harness.commands.cli", "arms", "--seeds", "2", "--workers", "1", "--generator",
                        spec, "--json", str(out / "r.json")], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**env, "TTSIM_RUNS_DIR": str(out / "runs")})
    assert f"--generator {spec}" in log.read_text()  # the server's child ran it
    assert p.returncode == 2, p.stderr[-3000:]
    assert p.stderr.splitlines()[-1] == f"ttsim: error: --generator: building {spec} raised ValueError: no mesh for me"
    assert "Traceback" not in p.stderr and list(out.iterdir()) == []
