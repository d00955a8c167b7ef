"""`ttsim arms --executor ray`: the same summary bytes as the local executor, Ray started and
ended by the sweep, and the refusals (no Ray, --hil, --ray-address misuse) in one line, exit 2.

Ray starts twice in this file (one in-process sweep, one CLI subprocess): several seconds each.
Seeds 22..24 under control and no-merge: control fails seed 24 and no-merge fails all three, so
the failing-seed lists and first failures depend on the merge order.
"""

import importlib.util
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from harness.base.spec import RunSpec
from harness.sweep import arms
from harness.sweep import ray as ray_executor
from harness.commands.cli import main

# not importorskip: importing ray here, before the sweep, would fix Ray's address mode to the
# machine's routable address, and the executor refuses to start a Ray that listens there
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason="needs the ray extra: pip install -e '.[ray]' (bin/setup installs it)")

ARMS = ["control", "no-merge"]
SEEDS = range(22, 25)


def _summary_bytes(summaries: dict) -> bytes:
    return json.dumps({a: s.as_json(a, RunSpec()) for a, s in summaries.items()}, indent=1).encode()


def _processes_with(marker: str) -> list[str]:
    """Processes (not this one) whose environment holds ``marker``: a Ray started under it passes
    its environment to the raylet, GCS, agents and workers."""
    found = []
    needle = marker.encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle in (proc / "environ").read_bytes():
                found.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()[:120])
        except OSError:  # gone meanwhile, or not ours
            continue
    return found


def _none_left(marker: str) -> list[str]:
    import time

    for _ in range(50):  # shutdown signals its processes; give them a moment to exit
        left = _processes_with(marker)
        if not left:
            return []
        time.sleep(0.2)
    return left


@needs_ray
@pytest.mark.needs_fault_injection
def test_a_ray_sweep_equals_the_local_sweep_byte_for_byte(monkeypatch):
    local = arms.sweep(ARMS, SEEDS, RunSpec(), workers=1)
    assert local["control"].failing_seeds == [24] and local["no-merge"].failing_seeds == [22, 23, 24]
    marker = f"TTSIM_RAY_TEST={uuid.uuid4().hex}"
    monkeypatch.setenv(*marker.split("="))
    ray_env = [*ray_executor._LOCAL_ENV, "RAY_AUTH_TOKEN"]
    env_before = {k: os.environ.get(k) for k in ray_env}
    calls = []
    on_ray = arms.sweep(ARMS, SEEDS, RunSpec(), workers=1, executor="ray", progress=lambda done, total: calls.append((done, total)))
    assert _summary_bytes(on_ray) == _summary_bytes(local)
    assert calls == [(1, 3), (2, 3), (3, 3)]  # the progress bar moves as tasks finish
    assert _none_left(marker) == [], "Ray processes outlived the sweep"
    assert {k: os.environ.get(k) for k in ray_env} == env_before  # the token lived only as long as Ray
    import ray

    assert not ray.is_initialized()


@needs_ray
@pytest.mark.needs_fault_injection
def test_the_cli_json_is_the_same_on_ray_and_sharded(tmp_path, monkeypatch, capsys):
    """`--executor ray --shard 2/2` writes the local executor's `--json` bytes (shards compose)."""
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))
    common = ["arms", "--seeds", "6", "--seed-start", "19", "--shard", "2/2", "--arms", ",".join(ARMS)]
    local, on_ray = tmp_path / "local.json", tmp_path / "ray.json"
    assert main([*common, "--workers", "1", "--json", str(local)]) == 0
    marker = uuid.uuid4().hex
    proc = subprocess.run([sys.executable, "-m", "harness.commands.cli", *common, "--executor", "ray", "--workers", "1",
                           "--json", str(on_ray)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "RAY_ADDRESS": "127.0.0.1:9", "TTSIM_RAY_TEST": marker})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert on_ray.read_bytes() == local.read_bytes()
    assert json.loads(local.read_text())["shard"]["seed_start"] == 22
    assert "Traceback" not in proc.stderr and "3/3" in proc.stderr
    assert "on 1 worker(s) (ray)" in proc.stdout
    assert _none_left(marker) == [], "Ray processes outlived the command"


@pytest.mark.needs_fault_injection
def test_sweep_merges_in_seed_order_whatever_order_tasks_finish(monkeypatch):
    """Without Ray: the executor hands results back last seed first; the summary must not change."""
    def reversed_finish(fn, jobs, num_cpus, address=None):
        yield from reversed([fn(job) for job in jobs])

    monkeypatch.setattr(ray_executor, "imap_unordered", reversed_finish)
    assert _summary_bytes(arms.sweep(ARMS, SEEDS, RunSpec(), executor="ray")) == _summary_bytes(arms.sweep(ARMS, SEEDS, RunSpec()))


def _refused(argv, capsys, monkeypatch) -> str:
    import harness.commands.arms

    monkeypatch.setattr(arms, "sweep", lambda *a, **k: pytest.fail("the sweep ran"))
    monkeypatch.setattr(harness.commands.arms, "hardware_backend", lambda args: pytest.fail("the cards were probed"))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.count("\n") == 1, err
    return err


def test_executor_ray_without_ray_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails, find_spec finds nothing
    err = _refused(["arms", "--seeds", "1", "--executor", "ray"], capsys, monkeypatch)
    assert "ttsim: error: --executor ray needs Ray: pip install 'ttsim[ray]'" in err


def test_ray_that_fails_to_import_is_refused_in_one_line(monkeypatch, capsys):
    """Found on the path but broken: refused when the sweep imports it."""
    monkeypatch.setitem(sys.modules, "ray", None)
    monkeypatch.setattr(ray_executor, "check_installed", lambda: None)
    assert main(["arms", "--seeds", "1", "--arms", "control", "--workers", "1", "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert "--executor ray needs Ray: pip install 'ttsim[ray]'" in err and "(import ray: " in err
    assert "Traceback" not in err and err.count("\n") == 1, err


@pytest.mark.parametrize("args, message", [
    (["--executor", "ray", "--hil"], "--executor ray cannot run --hil: cards are exclusive to one process"),
    (["--ray-address", "127.0.0.1:6379"], "--ray-address needs --executor ray"),
    (["--executor", "ray", "--ray-address", "127.0.0.1:6379", "--record-merges", "trace.jsonl"],
     "--record-merges cannot be used with --ray-address"),
])
def test_executor_misuse_is_refused_before_the_sweep(args, message, capsys, monkeypatch):
    assert message in _refused(["arms", "--seeds", "1", *args], capsys, monkeypatch)
