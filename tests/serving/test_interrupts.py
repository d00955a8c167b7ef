"""SIGINT/SIGTERM to a running sweep: the pool and every worker stop, nothing is half-written,
one line says how far it got, and the exit code is 128 + the signal.

The sweeps run as real `ttsim arms` processes in their own session (so a test can send the
terminal's Ctrl-C to the whole process group, and always reaps whatever is left): fresh
processes, and clients of a fork server (the user's `bin/ttsim arms` while one is up), where
the signal reaches the client, which hands it to the command in the server's child."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness.base.interrupts import Interrupted, deferred, handled
from harness.base.outputs import Staged

ROOT = Path(__file__).resolve().parents[2]
SEEDS = 60  # far more than run before the signal: the sweep is mid-way when it lands


def _start(tmp_path: Path, workers: int, env: dict) -> subprocess.Popen:
    out = tmp_path / "out"
    out.mkdir()
    argv = ["arms", "--seeds", str(SEEDS), "--workers", str(workers), "--json", str(out / "r.json"),
            "--plot", str(out / "r.png"), "--record-merges", str(out / "trace.jsonl")]
    env = {**env, "TTSIM_RUNS_DIR": str(out / "runs"), "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-m", "harness.commands.cli", *argv], cwd=ROOT, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def _wait_until_sweeping(proc: subprocess.Popen, out: Path, workers: int, log: Path | None) -> list[psutil.Process]:
    """The processes of the command once seeds are running (the staged trace grows): the pool's
    workers of a fresh sweep (none for one worker); of a served one, the server's child as well."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if proc.poll() is not None and log is not None and str(out) not in log.read_text():
            pytest.fail("the client ran the sweep itself: no fork server of its key answered (was our code "
                        "edited after the server started?)")
        assert proc.poll() is None, proc.communicate()
        staged = [p for p in out.iterdir() if p.name.startswith(".trace.jsonl.part-")]
        if log is None:
            kids = psutil.Process(proc.pid).children(recursive=True)
        else:  # the server's log names the child running this test's argv (its paths are the test's own)
            child = re.search(rf"child (\d+): ttsim arms .*{re.escape(str(out))}/", log.read_text())
            kids = [] if child is None else [psutil.Process(int(child.group(1)))]
            kids += [k for c in kids for k in c.children(recursive=True)]
        if len(kids) >= (workers if workers > 1 else 0) + (log is not None) and staged and staged[0].stat().st_size:
            return kids
        time.sleep(0.2)
    pytest.fail("the sweep never started its seeds")


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE  # exited; its new parent reaps it
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("signum, target, workers, how", [
    (signal.SIGINT, "process", 2, "fresh"),  # kill -INT <pid>: the main process alone
    (signal.SIGINT, "group", 2, "fresh"),  # Ctrl-C: every process of the group, the pool's workers too
    (signal.SIGTERM, "process", 2, "served"),  # the client forwards it to the server's child
    (signal.SIGINT, "group", 2, "served"),  # Ctrl-C reaches the client's group only: the child stops its pool
    (signal.SIGTERM, "process", 1, "served"),  # one worker: the seeds run in the command's process
], ids=["int", "ctrl-c", "term-served", "ctrl-c-served", "term-one-worker-served"])
def test_a_signal_stops_the_sweep_and_every_worker_and_writes_nothing(signum, target, workers, how, tmp_path,
                                                                     request):
    if how == "served":
        env, log, _ = request.getfixturevalue("served")
    else:
        env, log = {**os.environ, "TTSIM_FORKSERVER": "0"}, None
    proc = _start(tmp_path, workers, env)
    out = tmp_path / "out"
    try:
        kids = _wait_until_sweeping(proc, out, workers, log)
        if target == "group":
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        _, err = proc.communicate(timeout=60)  # how fast it stops: bench/bench_refusals.py
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    assert proc.returncode == 128 + signum, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    line = err.strip().splitlines()[-1]
    m = re.fullmatch(rf"ttsim: interrupted at seed (\d+) of {SEEDS}; nothing written", line)
    assert m and 1 <= int(m.group(1)) < SEEDS, err[-3000:]
    deadline = time.monotonic() + 10  # a served command is reaped by the server, which may be a moment behind
    while not all(_gone(k) for k in kids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(k) for k in kids), [k.pid for k in kids if not _gone(k)]
    assert sorted(p.name for p in out.iterdir()) == []  # no report, plot, trace, record, nor a staged part


def test_a_signal_held_back_during_a_commit_lands_after_it():
    staged, before = Staged(), signal.getsignal(signal.SIGTERM)
    with pytest.raises(Interrupted) as exc, handled():
        with deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            staged.committed = True  # what runs here runs whole
        pytest.fail("the held-back signal was lost")
    assert exc.value.exit_code == 143 and staged.committed
    assert signal.getsignal(signal.SIGTERM) is before  # handled() put the previous handler back


def test_staged_outputs_are_whole_or_absent(tmp_path):
    json_path, trace = tmp_path / "r.json", tmp_path / "t.jsonl"
    trace.write_text("run 1\n")
    staged = Staged()
    staged.write_text(str(json_path), "{}\n")
    with open(staged.path(str(trace), append=True), "a") as f:
        f.write("run 2\n")
    assert not json_path.exists() and trace.read_text() == "run 1\n"  # nothing visible before the commit
    staged.commit()
    assert json_path.read_text() == "{}\n" and trace.read_text() == "run 1\nrun 2\n"
    assert oct(json_path.stat().st_mode & 0o777) == oct(0o666 & ~_umask())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "t.jsonl"]
    staged.write_text(str(json_path), "{half")
    staged.discard()
    assert json_path.read_text() == "{}\n" and sorted(p.name for p in tmp_path.iterdir()) == ["r.json", "t.jsonl"]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


HANGS = """
import time
from model.generator import Generator


class Hangs(Generator):
    def decode_forward(self, *args, **kw):
        self._calls = getattr(self, "_calls", 0) + 1
        while self._calls >= 7:
            time.sleep(1)
        return super().decode_forward(*args, **kw)
"""


def test_a_killed_leader_takes_its_workers_and_the_next_run_removes_its_staged_files(tmp_path):
    """kill -9 of the sweep's process while its workers are stuck in a seed (a generator that
    never returns, far inside its deadline): the workers die with it at once (the parent-death
    signal; else they would run on until their seed ended), and the staged files it could not
    discard are removed by the next command that stages the same targets."""
    (tmp_path / "hangs.py").write_text(HANGS)
    out = tmp_path / "out"
    out.mkdir()
    argv = ["arms", "--seeds", "4", "--workers", "2", "--json", str(out / "r.json"), "--record-merges",
            str(out / "trace.jsonl"), "--generator", f"{tmp_path / 'hangs.py'}:Hangs", "--call-deadline", "600"]
    env = {**os.environ, "TTSIM_FORKSERVER": "0", "TTSIM_RUNS_DIR": str(out / "runs"), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "harness.commands.cli", *argv], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    kids: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 240
        while len(kids) < 2 or not [p for p in out.iterdir() if p.name.startswith(".trace.jsonl.part-")]:
            assert proc.poll() is None and time.monotonic() < deadline, "the sweep never started its workers"
            time.sleep(0.2)
            kids = psutil.Process(proc.pid).children(recursive=True)
        time.sleep(3)  # the workers are inside their seeds now (each hangs at its seventh decode)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 2
        while not all(_gone(k) for k in kids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(k) for k in kids), [k.pid for k in kids if not _gone(k)]
    finally:
        for k in kids:
            if not _gone(k):
                k.kill()
    left = sorted(p.name for p in out.iterdir() if ".part-" in p.name)  # the trace: staged from the start
    assert len(left) == 1 and left[0].startswith(f".trace.jsonl.part-{proc.pid}-"), left
    staged = Staged()
    try:
        staged.path(str(out / "trace.jsonl"), append=True)  # the next run staging the same target
        mine = sorted(p.name for p in out.iterdir() if ".part-" in p.name)
        assert len(mine) == 1 and mine[0].startswith(f".trace.jsonl.part-{os.getpid()}-"), mine
    finally:
        staged.discard()
    assert not [p for p in out.iterdir() if ".part-" in p.name]
