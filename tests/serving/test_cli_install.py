"""The command as users get it: the installed `ttsim` script and bin/ttsim from any directory,
records in a git-ignored runs folder, sharded sweeps that merge to the unsharded report,
bad --plot paths refused before the sweep, and no expected-noise warning from vLLM."""

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.base import records
from harness.commands.cli import main

pytestmark = pytest.mark.needs_fault_injection

REPO = Path(__file__).resolve().parents[2]


def _env(tmp_path, **extra):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TTSIM_RUNS_DIR", "TTSIM_SKIP_SETUP")}
    env["TTSIM_RUNS_DIR"] = str(tmp_path / "runs")
    return {**env, **extra}


def _one_seed_run(cmd, tmp_path, **env):
    out = tmp_path / "out.json"
    proc = subprocess.run([*cmd, "arms", "--seeds", "1", "--arms", "all", "--workers", "1", "--json", str(out)],
                          cwd=tmp_path, env=_env(tmp_path, **env), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Error" not in proc.stderr and "Failed to import from vllm._C" not in proc.stderr, proc.stderr
    assert json.loads(out.read_text())["arms"]["all"]["runs"] == 1
    record = json.loads((tmp_path / "runs" / "arms.jsonl").read_text())  # where TTSIM_RUNS_DIR says
    # vLLM's start-up is timed apart, inside the sweep's wall (a fixed cost, not throughput)
    assert 0 < record["warm_up_s"] < record["wall_s"], record


def test_the_installed_script_runs_from_any_directory(tmp_path):
    script = Path(sys.executable).parent / "ttsim"
    if not script.is_file():
        pytest.skip(f"no installed console script at {script}")
    where = subprocess.run([sys.executable, "-c", "import fixtures, os; print(os.path.dirname(os.path.dirname("
                            "os.path.realpath(fixtures.__file__))))"], cwd=tmp_path, env=_env(tmp_path),
                           capture_output=True, text=True, check=True).stdout.strip()
    if Path(where) != REPO.resolve():
        pytest.skip(f"the installed ttsim runs the checkout at {where}, not this one ({REPO})")
    _one_seed_run([str(script)], tmp_path)


def test_the_packaged_modules_alone_run_the_command(tmp_path):
    """What a wheel holds (pyproject's packages, nothing else from the checkout) runs the command,
    whichever checkout the environment's own install points at."""
    import re
    import shutil

    include = re.search(r'include = \[([^\]]*)\]', (REPO / "pyproject.toml").read_text()).group(1)
    site = tmp_path / "site"
    for pkg in re.findall(r'"(\w+)\*"', include):
        shutil.copytree(REPO / pkg, site / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    assert not (site / "bench").exists()
    code = ("import sys, fixtures; assert fixtures.__file__.startswith(sys.argv[1]), fixtures.__file__; "
            "from harness.commands.cli import main; sys.exit(main(sys.argv[2:]))")
    _one_seed_run([sys.executable, "-c", code, str(site)], tmp_path, PYTHONPATH=str(site))


def test_bin_ttsim_runs_from_another_directory(tmp_path):
    if not (REPO / ".venv" / "bin" / "python").exists():
        pytest.skip("no .venv in this checkout (bin/ttsim would create it)")
    _one_seed_run([str(REPO / "bin" / "ttsim")], tmp_path, TTSIM_SKIP_SETUP="1")


def test_runs_go_to_a_git_ignored_folder_by_default(monkeypatch):
    monkeypatch.delenv("TTSIM_RUNS_DIR", raising=False)
    assert records.checkout_root() == REPO.resolve()
    assert records.runs_dir() == REPO.resolve() / "runs"
    if not (REPO / ".git").exists():
        pytest.skip("not a git checkout")
    ignored = subprocess.run(["git", "check-ignore", "-q", str(records.runs_dir() / "arms.jsonl")], cwd=REPO)
    assert ignored.returncode == 0, "the default runs folder must be git-ignored"
    monkeypatch.setenv("TTSIM_RUNS_DIR", "/somewhere/else")
    assert records.runs_dir() == Path("/somewhere/else")


def test_an_installed_copy_writes_records_under_the_user_state_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("TTSIM_RUNS_DIR", raising=False)
    monkeypatch.setattr(records, "_PACKAGE_PARENT", tmp_path / "site-packages")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    assert records.checkout_root() is None
    assert records.runs_dir() == tmp_path / "state" / "ttsim" / "runs"


def _arms(tmp_path, name, *extra):
    path = tmp_path / f"{name}.json"
    assert main(["arms", "--seeds", "4", "--seed-start", "21", "--arms", "control,slots+guard", "--workers", "1",
                 "--json", str(path), *extra]) == 0
    return path


def test_merged_shards_equal_the_unsharded_report_byte_for_byte(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))
    full = _arms(tmp_path, "full")
    parts = [_arms(tmp_path, f"part{i}", "--shard", f"{i}/3") for i in (3, 1, 2)]  # blocks of 1, 1, 2 seeds
    assert [json.loads(p.read_text())["shard"]["seeds"] for p in parts] == [2, 1, 1]
    merged = tmp_path / "merged.json"
    assert main(["arms", "merge", *map(str, parts), "--json", str(merged)]) == 0
    assert merged.read_bytes() == full.read_bytes()
    report = json.loads(full.read_text())
    assert report["arms"]["control"]["failing_seeds"] == [24]  # of 21..24 only seed 24 fails control
    capsys.readouterr()
    # every shard is needed, once
    assert main(["arms", "merge", str(parts[0]), str(parts[1]), "--json", str(merged)]) == 2
    assert "missing shard(s) 2/3" in capsys.readouterr().err
    assert main(["arms", "merge", *map(str, parts), str(parts[1]), "--json", str(merged)]) == 2
    assert "shard 1/3 is given twice" in capsys.readouterr().err
    assert main(["arms", "merge", str(full), "--json", str(merged)]) == 2
    assert "is not a shard report" in capsys.readouterr().err


def test_shards_of_different_sweeps_do_not_merge(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    assert main(["arms", "--seeds", "2", "--arms", "all", "--workers", "1", "--shard", "1/2", "--json", str(a)]) == 0
    assert main(["arms", "--seeds", "2", "--seed-start", "5", "--arms", "all", "--workers", "1", "--shard", "2/2",
                 "--json", str(b)]) == 0
    capsys.readouterr()
    assert main(["arms", "merge", str(a), str(b), "--json", str(tmp_path / "m.json")]) == 2
    assert "seed_start is 5" in capsys.readouterr().err


@pytest.mark.parametrize("args, message", [
    (["--shard", "3/2"], "need 1 <= I <= N"),
    (["--shard", "two"], "--shard must look like I/N"),
    (["--seeds", "2", "--shard", "1/3"], "--shard 1/3 leaves no seeds of 2"),
    (["--plot", "rates.txt"], "cannot plot to rates.txt: .txt is not a format matplotlib writes"),
    (["--plot", "rates"], "cannot plot to rates: no extension"),
])
def test_bad_shard_or_plot_is_refused_before_the_sweep(args, message, capsys, monkeypatch):
    import harness.sweep.arms

    monkeypatch.setattr(harness.sweep.arms, "sweep", lambda *a, **k: pytest.fail("the sweep ran"))
    assert main(["arms", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_only_the_expected_missing_kernels_warning_is_silenced():
    from harness.engine.prepare import prepare_vllm

    prepare_vllm()  # installs the filter

    logger = logging.getLogger("vllm.platforms.interface")
    expected = logging.LogRecord(logger.name, logging.WARNING, __file__, 1, "Failed to import from vllm._C: %s",
                                 (repr(ModuleNotFoundError("No module named 'vllm._C'")),), None)
    broken = logging.LogRecord(logger.name, logging.WARNING, __file__, 1, "Failed to import from vllm._C: %s",
                               (repr(ImportError("vllm/_C.abi3.so: undefined symbol: foo")),), None)
    assert logger.filter(expected) is False
    assert logger.filter(broken)
