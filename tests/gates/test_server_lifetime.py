"""A server ends with the session that started it, however the session ends (SIGKILL too).

Each case starts a *session* (a Python process starting a server through the suite's own
code path: ``harness.vllm.server.start``, as the gate fixtures do, or ``bin/ttsim serve``'s
``harness.commands.cli.main``), waits until the server answers, SIGKILLs the session as a CI
timeout or an OOM kill would, and asserts that within a deadline no live process of the
server's process group remains (API server and engine core) and its port is free. Most use
``fake_serve.py`` (vLLM's process shape: an API server that forks an engine core) to take
a second; one starts a real `vllm serve`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from hil import lifeline
from hil.gates import health

ROOT = Path(__file__).resolve().parents[2]
FAKE = Path(__file__).with_name("fake_serve.py")
GONE_WITHIN_S = 30.0  # the watcher's SIGTERM grace is 10 s; a fake or vLLM stops well inside

# A session starting a server the way the gate fixtures do; fake=1 swaps vLLM's command line
# for fake_serve.py. It prints the server's pid and port, then waits to be killed.
START_SESSION = textwrap.dedent("""
    import json, sys, threading, time
    from pathlib import Path
    from harness.vllm import server as S
    fake, log, in_thread = sys.argv[1] == "1", Path(sys.argv[2]), sys.argv[3] == "1"
    extra = ()
    if fake:
        S.serve_command = lambda model_dir, port, extra=(): [sys.executable, sys.argv[4], str(port)]
        S.plugin_installed = lambda: True
        model_dir = "unused"
    else:
        from harness.engine import modeldir
        model_dir = modeldir.write(str(log.parent / "model"), "markov")
        extra = ("--additional-config", '{"knobs": "quiet"}')
    started = []
    if in_thread:  # started from a thread that has ended by the time the session is killed
        t = threading.Thread(target=lambda: started.append(S.start(model_dir, log, extra=extra)))
        t.start()
        t.join()
    else:
        started.append(S.start(model_dir, log, extra=extra))
    print(json.dumps({"pid": started[0].proc.pid, "port": started[0].port}), flush=True)
    time.sleep(3600)
""")

# `bin/ttsim serve` (its main, as bin/ttsim execs it) with fake_serve.py as vLLM
CLI_SESSION = textwrap.dedent("""
    import sys
    from harness.vllm import server as S
    S.serve_command = lambda model_dir, port, extra=(): [sys.executable, sys.argv[1], str(port)]
    S.plugin_installed = lambda: True
    from harness.commands.cli import main
    sys.exit(main(["serve", "--port", sys.argv[2], "--model-dir", sys.argv[3]]))
""")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
            "FAKE_SERVE_INFO": str(tmp_path / "fake-serve.json")}


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def _wait(what: str, check, deadline_s: float, log: Path | None = None):
    t0 = time.monotonic()
    while time.monotonic() - t0 < deadline_s:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
    pytest.fail(f"{what} not within {deadline_s:.0f} s\n{tail}", pytrace=False)


def _session(args: list[str], tmp_path: Path) -> subprocess.Popen:
    out = open(tmp_path / "session.out", "w")
    # own group: the cleanup below can take the session down whatever it left
    return subprocess.Popen([sys.executable, "-c", *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT,
                            env=_env(tmp_path), start_new_session=True)


def _kill_and_expect_gone(session: subprocess.Popen, pgid: int, port: int, tmp_path: Path) -> list[int]:
    """SIGKILL the session; the server's group must be empty and its port free in time."""
    members = lifeline.group_members(pgid)
    assert members, f"the server's process group {pgid} is empty before the kill"
    try:
        os.kill(session.pid, signal.SIGKILL)
        session.wait()
        t0 = time.monotonic()
        while time.monotonic() - t0 < GONE_WITHIN_S and (lifeline.group_members(pgid) or not _port_free(port)):
            time.sleep(0.2)
        left = lifeline.group_members(pgid)
        assert not left and _port_free(port), (
            f"{GONE_WITHIN_S:.0f} s after SIGKILL of its session, server process group {pgid} still has "
            f"{left} (of {members} before the kill); port {port} free: {_port_free(port)}\n"
            + (tmp_path / "session.out").read_text(errors="replace")[-2000:])
    finally:  # whatever the verdict, leave nothing behind
        for g in (pgid, session.pid):
            try:
                os.killpg(g, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
    return members


def _started(session: subprocess.Popen, tmp_path: Path, deadline_s: float) -> dict:
    out = tmp_path / "session.out"

    def line():
        if session.poll() is not None:
            pytest.fail(f"the session exited {session.returncode} before its server was up:\n"
                        f"{out.read_text(errors='replace')[-3000:]}", pytrace=False)
        for text in out.read_text(errors="replace").splitlines():
            if text.startswith("{"):
                return json.loads(text)
        return None

    return _wait("the session's server up", line, deadline_s, out)


@pytest.mark.parametrize("in_thread", [False, True], ids=["main-thread", "ended-thread"])
def test_a_fixture_server_and_its_engine_core_die_with_a_killed_session(tmp_path, in_thread):
    """The fixtures' path (harness.vllm.server.start). From a thread that has ended, PDEATHSIG
    (thread-scoped) is not used; the watcher alone must do it."""
    session = _session([START_SESSION, "1", str(tmp_path / "serve.log"), "1" if in_thread else "0", str(FAKE)],
                       tmp_path)
    try:
        up = _started(session, tmp_path, 60)
        info = json.loads((tmp_path / "fake-serve.json").read_text())
        assert info["pgid"] == up["pid"] == info["api_pid"]
        assert health(f"http://127.0.0.1:{up['port']}") == 200  # still up after its starting thread ended
        members = _kill_and_expect_gone(session, info["pgid"], up["port"], tmp_path)
        assert {info["api_pid"], info["engine_pid"]} <= set(members)
        # the engine core outlives a PDEATHSIG'd API server: the watcher ended it, and says so in the log
        assert f"the process that started process group {info['pgid']} is gone" in \
            (tmp_path / "serve.log").read_text(errors="replace")
    finally:
        session.kill()
        session.wait()


def test_a_bin_ttsim_serve_server_and_its_engine_core_die_with_a_killed_cli(tmp_path):
    from harness.engine import modeldir
    from harness.vllm.server import free_port

    port = free_port()
    session = _session([CLI_SESSION, str(FAKE), str(port), modeldir.write(str(tmp_path / "m"), "markov")],
                       tmp_path)
    try:
        info_path = tmp_path / "fake-serve.json"
        _wait("bin/ttsim serve's server up",
              lambda: info_path.exists() and health(f"http://127.0.0.1:{port}") == 200, 60,
              tmp_path / "session.out")
        info = json.loads(info_path.read_text())
        members = _kill_and_expect_gone(session, info["pgid"], port, tmp_path)
        assert {info["api_pid"], info["engine_pid"]} <= set(members)
    finally:
        session.kill()
        session.wait()


def test_a_stopped_server_releases_its_watcher_and_a_server_outlives_the_thread_that_started_it(tmp_path,
                                                                                                  monkeypatch):
    """A normal stop leaves no watcher behind (it must not signal a group id later reused);
    and a server started from a short-lived thread is not taken down when that thread ends
    (what an unconditional PDEATHSIG would do)."""
    from harness.vllm import server as S

    monkeypatch.setenv("FAKE_SERVE_INFO", str(tmp_path / "fake-serve.json"))
    monkeypatch.setattr(S, "serve_command", lambda model_dir, port, extra=(): [sys.executable, str(FAKE), str(port)])
    monkeypatch.setattr(S, "plugin_installed", lambda: True)
    started: list = []
    t = threading.Thread(target=lambda: started.append(S.start("unused", tmp_path / "serve.log", deadline_s=60)))
    t.start()
    t.join()
    assert started, (tmp_path / "serve.log").read_text(errors="replace")
    s = started[0]
    try:
        time.sleep(1.0)  # a PDEATHSIG from the ended thread would have landed by now
        assert s.proc.poll() is None and health(s.url) == 200, s.log_tail()
        assert s.lifeline is not None and s.lifeline.proc.poll() is None
    finally:
        s.stop()
    assert s.lifeline.proc.returncode == 0  # released, not "parent gone"
    assert not lifeline.group_members(s.proc.pid)


def test_a_child_guarded_by_pdeathsig_dies_with_its_killed_parent(tmp_path):
    """What the --hil card probe uses (hil.probe.probe_in_subprocess): the probe holds the
    cards, so it must not outlive a killed session."""
    script = textwrap.dedent("""
        import subprocess, sys
        from hil.lifeline import die_with_parent
        subprocess.run([sys.executable, "-c", "import os, time; print(os.getpid(), flush=True); time.sleep(3600)"],
                       preexec_fn=die_with_parent())
    """)
    session = _session([script], tmp_path)
    out = tmp_path / "session.out"
    try:
        child = int(_wait("the child's pid", lambda: out.read_text().strip(), 30, out))
        assert lifeline.group_members(session.pid)  # the child is in the session's group
        os.kill(session.pid, signal.SIGKILL)
        session.wait()
        _wait(f"child {child} gone after its parent's SIGKILL",
              lambda: child not in lifeline.group_members(session.pid), 10)
    finally:
        try:
            os.killpg(session.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_the_hil_probe_runs_under_pdeathsig(monkeypatch):
    from hil import probe

    seen = {}

    def fake_run(cmd, **kwargs):
        seen.update(kwargs)
        return subprocess.CompletedProcess(cmd, 1, "", "no ttnn")

    monkeypatch.setattr(subprocess, "run", fake_run)
    probe.probe_in_subprocess([0])
    assert seen.get("preexec_fn") is not None


@pytest.mark.slow
def test_a_real_vllm_server_and_its_engine_core_die_with_a_killed_session(tmp_path):
    """The same with a real `vllm serve` (~25 s to start here): its engine core is a forked
    child of the API server, so the whole group must go."""
    log = tmp_path / "serve.log"
    session = _session([START_SESSION, "0", str(log), "0"], tmp_path)
    try:
        up = _started(session, tmp_path, 240)
        members = _kill_and_expect_gone(session, up["pid"], up["port"], tmp_path)
        assert len(members) >= 2 and up["pid"] in members, f"no engine core seen in group {up['pid']}: {members}"
    except BaseException:
        if log.exists():
            print(f"--- vllm serve log (tail) ---\n{log.read_text(errors='replace')[-4000:]}")
        raise
    finally:
        session.kill()
        session.wait()
