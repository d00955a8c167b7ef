"""The fork server (harness/commands/forkserver.py): a replay run in its child is byte for byte the
replay a fresh process prints (stdout, stderr, exit code), a child never asks the server
again, an edit to our code changes the server's key, a server stops when idle, and a server
stopped stops its commands, even one it forked as the stop came."""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from harness.commands import forkserver

import fork_servers
from fork_servers import key_of

REPLAY = ["replay", "--arm", "control", "--seed", "0"]  # 1 of 32 requests differs: exit 1, a verdict per request


@pytest.fixture
def env(tmp_path):
    """An environment of one test's own, for a server it starts and stops itself."""
    with fork_servers.client_env(tmp_path) as e:
        yield e


def _ttsim(argv, env, cwd):
    return subprocess.run([sys.executable, "-m", "harness.commands.cli", *argv], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def test_a_replay_in_the_servers_child_is_the_fresh_processs_replay(served, tmp_path):
    env, log, _ = served
    forked = _ttsim(REPLAY, env, tmp_path)
    again = _ttsim(REPLAY, env, tmp_path)  # a second child of the same parent: nothing carried over
    fresh = _ttsim(REPLAY, {**env, "TTSIM_FORKSERVER": "0"}, tmp_path)
    assert log.read_text().count("ttsim replay --arm control --seed 0") == 2, log.read_text()
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert (again.returncode, again.stdout, again.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert fresh.returncode == 1 and "1 of 32 requests differ" in fresh.stdout


def test_a_served_runs_replay_in_the_servers_child_is_the_fresh_processs(served, tmp_path):
    env, log, _ = served
    run = str(Path(__file__).parents[1] / "gates" / "data" / "served-without-guard")
    forked = _ttsim(["serve-replay", run], env, tmp_path)
    fresh = _ttsim(["serve-replay", run], {**env, "TTSIM_FORKSERVER": "0"}, tmp_path)
    assert f"ttsim serve-replay {run}" in log.read_text()
    folder = re.compile(r"(replay records: |serve-explain )\S+")  # each replay writes a folder of its own
    assert forked.returncode == fresh.returncode == 0, forked.stderr
    assert folder.sub("", forked.stdout) == folder.sub("", fresh.stdout)
    assert "64 of 64 answers and admission steps equal the served run's" in forked.stdout


def test_bad_input_through_the_server_is_the_same_one_line(served, tmp_path):
    env, log, _ = served
    forked = _ttsim(["replay", "--arm", "nonsense", "--seed", "0"], env, tmp_path)
    fresh = _ttsim(["replay", "--arm", "nonsense", "--seed", "0"], {**env, "TTSIM_FORKSERVER": "0"}, tmp_path)
    assert "ttsim replay --arm nonsense" in log.read_text()
    assert forked.returncode == fresh.returncode == 2
    assert forked.stderr == fresh.stderr and len(forked.stderr.splitlines()) == 1


def test_an_idle_server_stops_and_removes_its_socket(env, tmp_path):
    proc, sock = fork_servers.start_light(env, tmp_path / "server.log", idle_s=1.0)
    try:
        assert proc.wait(timeout=60) == 0
    finally:
        proc.kill()
    assert not sock.exists()


def test_no_server_means_the_command_runs_here_and_none_is_started_off_a_terminal(env, tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", env["TMPDIR"])
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    started = []
    monkeypatch.setattr(forkserver, "start_server", started.append)
    assert forkserver.run(REPLAY) is None
    assert started == []  # the test's stderr is no terminal
    monkeypatch.setenv("TTSIM_FORKSERVER", "0")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert forkserver.run(REPLAY) is None and started == []  # switched off: not even from a terminal


def test_the_key_follows_our_code_and_vllms_import_time_environment(tmp_path, monkeypatch):
    for pkg in forkserver.PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    monkeypatch.setattr(forkserver, "ROOT", tmp_path)
    k = forkserver.key()
    assert forkserver.key() == k
    monkeypatch.setenv("TTSIM_SEED", "7")  # read at run time by the child: the same server serves it
    assert forkserver.key() == k
    src = tmp_path / "model" / "__init__.py"
    src.write_text("X = 1\n")
    edited = forkserver.key()
    assert edited != k
    os.utime(src, ns=(src.stat().st_atime_ns, src.stat().st_mtime_ns + 1))
    assert forkserver.key() != edited
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "DEBUG")  # vLLM reads it at import
    assert forkserver.key() not in (k, edited)


def test_a_forked_child_never_asks_the_server_again(monkeypatch):
    from harness.commands import cli

    asked = []
    monkeypatch.setattr(forkserver, "run", lambda argv: asked.append(argv))
    args = cli.build_parser().parse_args(REPLAY)
    assert cli._forked(args)
    monkeypatch.setattr(forkserver, "_IN_CHILD", True)
    assert not cli._forked(args)
    assert not cli._forked(cli.build_parser().parse_args(["replay", "--trace", "t.jsonl"]))


@pytest.mark.parametrize("argv, forked", [
    (["arms", "--seeds", "4"], True),
    (["arms", "--seeds", "4", "--hil"], False),  # cards: the server has imported ttsim
    (["arms", "--seeds", "4", "--executor", "ray"], False),
    (["arms", "merge", "a.json", "--json", "b.json"], False),  # light
    (["arms", "compare", "a.json", "b.json"], False),
    (["replay", "--arm", "all", "--seed", "3"], True),
    (["selfcheck"], False),
    (["serve-replay", "DIR"], True),
    (["serve-explain", "DIR"], False),
])
def test_which_commands_a_server_runs(argv, forked):
    from harness.commands import cli

    assert cli._forked(cli.build_parser().parse_args(argv)) is forked


def test_a_sweep_through_the_server_writes_the_fresh_processs_json(served, tmp_path):
    env, log, _ = served
    argv = ["arms", "--seeds", "3", "--seed-start", "27", "--workers", "2", "--arms", "control,all"]
    forked = _ttsim([*argv, "--json", str(tmp_path / "served.json")], env, tmp_path)
    fresh = _ttsim([*argv, "--json", str(tmp_path / "fresh.json")], {**env, "TTSIM_FORKSERVER": "0"}, tmp_path)
    assert f"ttsim {' '.join(argv)}" in log.read_text()
    assert forked.returncode == fresh.returncode == 0, forked.stderr
    assert (tmp_path / "served.json").read_bytes() == (tmp_path / "fresh.json").read_bytes()
    timing = re.compile(r"in [\d.]+ s \([\d.]+ s of it starting vLLM\)")  # the one line that may differ
    assert timing.sub("", forked.stdout.replace("served.json", "fresh.json")) == timing.sub("", fresh.stdout)


def test_a_client_that_dies_takes_its_command_with_it(served, tmp_path):
    env, log, _ = served
    argv = ["arms", "--seeds", "200", "--workers", "1", "--seed-start", "7"]  # argv of this test's alone
    line = f"ttsim {' '.join(argv)}"
    client = subprocess.Popen([sys.executable, "-m", "harness.commands.cli", *argv], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while line not in log.read_text():
            assert time.monotonic() < deadline and client.poll() is None, log.read_text()
            time.sleep(0.2)
        child = re.search(rf"child (\d+): {re.escape(line)}", log.read_text()).group(1)
        client.kill()  # no chance to forward anything
        client.wait()
        while f"child {child}: exit" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
    finally:
        client.kill()
    assert f"child {child}: exit 143" in log.read_text(), log.read_text()  # SIGTERM'd: the sweep's own clean stop


def test_the_child_takes_the_clients_directory_and_environment(served, tmp_path):
    """A generator given by a path relative to the client's directory, reading a variable only
    the client has: the served run sees both, as a fresh process does."""
    env, log, _ = served
    client = tmp_path / "client"
    client.mkdir()
    (client / "gen.py").write_text("import os\n\nraise RuntimeError('mark: ' + os.environ.get('TFS_MARK', 'unset'))\n")
    argv = ["replay", "--arm", "as-is", "--seed", "0", "--generator", "gen.py:G"]
    forked = _ttsim(argv, {**env, "TFS_MARK": "the client's"}, client)
    fresh = _ttsim(argv, {**env, "TFS_MARK": "the client's", "TTSIM_FORKSERVER": "0"}, client)
    assert "ttsim replay --arm as-is" in log.read_text()
    assert "mark: the client's" in fresh.stderr, fresh.stderr
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)


def test_a_server_stopped_under_a_command_stops_the_command_and_tells_its_client(env, tmp_path):
    """A real client of a server that preloads nothing: its command is stopped while importing."""
    log = tmp_path / "server.log"
    proc, sock = fork_servers.start_light(env, log, idle_s=120.0, key=key_of(env))
    client = subprocess.Popen([sys.executable, "-m", "harness.commands.cli", "arms", "--seeds", "200", "--workers", "1"],
                              env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while "ttsim arms" not in log.read_text():
            assert time.monotonic() < deadline and client.poll() is None, log.read_text()
            time.sleep(0.2)
        child = int(re.search(r"child (\d+): ttsim arms", log.read_text()).group(1))
        proc.terminate()
        proc.wait(timeout=30)
        # the client's own exit, not EOF on its stderr: the command (the server's child) holds that
        # pipe too until it has stopped, which is asked for below, with its own deadline
        client.wait(timeout=60)
        os.set_blocking(client.stderr.fileno(), False)
        err = client.stderr.read() or ""
    finally:
        proc.kill()
        client.kill()
    assert client.returncode == 1 and "the fork server went away" in err, err
    assert not sock.exists(), "a stopped server leaves no socket behind"
    deadline = time.monotonic() + 30
    while _alive(child):
        assert time.monotonic() < deadline, f"the command {child} outlived its server"
        time.sleep(0.2)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


INNER = """
import os, tempfile, time

def test_passes():
    assert os.environ["TFS_MARK"] == "inner"
    assert tempfile.gettempdir() == os.environ["TMPDIR"]  # the client's, not the server's

def test_fails():
    assert 1 == 2, "the inner failure"

def test_sleeps():
    if os.environ.get("TFS_SLEEP"):
        time.sleep(60)
"""


def _inner_session(sock, cwd, env, **kw):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code = forkserver.request(sock, "pytest", ["-q", "-p", "no:cacheprovider", "test_inner.py"],
                                  stdio=(0, out.fileno(), err.fileno()), cwd=str(cwd), env=env, **kw)
        out.seek(0)
        err.seek(0)
        return code, out.read().decode(), err.read().decode()


def test_an_inner_pytest_session_in_a_child_is_the_fresh_sessions(served, tmp_path):
    """The suite's inner sessions (tests/conftest.py's inner_pytest) run as `pytest` commands."""
    env, log, sock = served
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "tmp").mkdir()
    env = {**env, "TFS_MARK": "inner", "TMPDIR": str(tmp_path / "tmp")}
    forked = _inner_session(sock, tmp_path, env)
    fresh = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_inner.py"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert "pytest -q -p no:cacheprovider test_inner.py" in log.read_text()
    assert forked[0] == fresh.returncode == 1
    timing = re.compile(r" in [\d.]+s")
    assert timing.sub("", _less_rewrite_warnings(forked[1])) == timing.sub("", fresh.stdout)
    assert "the inner failure" in fresh.stdout and forked[2] == fresh.stderr


def _less_rewrite_warnings(out: str) -> str:
    """A forked session's output less the one way it differs from a fresh one: pytest's warning
    that plugin modules the server imported first (anyio, which vLLM imports) cannot have their
    asserts rewritten. Every warning removed must be that one."""
    block = re.search(r"=+ warnings summary =+\n(.*?)-- Docs: \S+\n", out, re.S)
    assert block, out
    assert all("PytestAssertRewriteWarning: Module already imported" in line
               for line in block.group(1).splitlines() if "Warning" in line), block.group(1)
    return re.sub(r", \d+ warnings?( in)", r"\1", out.replace(block.group(0), ""))


def test_a_request_past_its_timeout_is_killed_and_an_unknown_command_refused(served, tmp_path):
    env, log, sock = served
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    with pytest.raises(TimeoutError, match="no exit after 3 s"):
        _inner_session(sock, tmp_path, {**env, "TFS_MARK": "inner", "TFS_SLEEP": "1"}, timeout=3)
    deadline = time.monotonic() + 30
    while not re.search(r"exit 137\n", log.read_text()):
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.2)
    assert forkserver.request(sock, "sh", ["-c", "true"]) is None
    assert "refused a request: no command 'sh'" in log.read_text()


#: run by a fork_servers.LIGHT_SERVER before it serves: a stop that lands between a fork and the
#: child's registration (the window a stop at any moment can hit)
STOP_AT_FORK = """
pidfd_open = os.pidfd_open

def stop_now(pid):
    os.kill(os.getpid(), signal.SIGTERM)
    return pidfd_open(pid)

os.pidfd_open = stop_now
"""


def test_a_server_stopped_as_it_forks_stops_that_command_too(env, tmp_path):
    """The child forked just before a stop is stopped with it (the server holds the stop back
    until the child is registered): nothing keeps running on the client's descriptors."""
    (tmp_path / "test_inner.py").write_text(INNER)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    log = tmp_path / "server.log"
    server, sock = fork_servers.start_light(env, log, idle_s=60.0, before=STOP_AT_FORK)
    read_end, write_end = os.pipe()
    try:
        code = forkserver.request(sock, "pytest", ["-q", "-p", "no:cacheprovider", "test_inner.py", "-k", "sleeps"],
                                  stdio=(0, write_end, write_end), cwd=str(tmp_path),
                                  env={**env, "TFS_SLEEP": "1"}, timeout=60)
        os.close(write_end)
        write_end = None
        assert code == 1 and server.wait(timeout=30) == 0  # the client heard its server went away
        assert _drained(read_end), "the command outlived its server"  # its ends close when it stops
    finally:
        server.kill()
        os.close(read_end)
        if write_end is not None:
            os.close(write_end)
    assert re.search(r"child \d+: pytest", log.read_text()), log.read_text()


def _drained(fd: int) -> bool:
    """Whether ``fd`` reaches end of file within 20 s (output first, then the end)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if ready and os.read(fd, 65536) == b"":
            return True
    return False
