"""What several test folders share: inner pytest sessions run in a fork server's children, and
a guard that no test leaves ``ttnn`` imported."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from harness.commands import forkserver

import fork_servers

#: what must be the same for an inner session to run in the server's child instead of a fresh
#: interpreter: the variables read when an interpreter starts or the server's modules import
_START_ENV = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE", "PYTHONSAFEPATH")


class InnerSessions:
    """``python -m pytest ARGS`` as a fresh process would run it, in a child of one fork server
    per worker (started at first use, again if it idled out: it imports torch and vLLM once,
    about 10 s, instead of once per session). The inner session is what the test judges (its
    exit code, outcomes and failure text); the interpreter starting is not. tests/serving/test_forkserver.py shows a
    child's output is a fresh process's but for one warning: plugin modules the server imported
    first (anyio, which vLLM imports) cannot have their asserts rewritten. An environment that
    changes how an interpreter starts runs fresh."""

    def __init__(self, tmp: Path):
        self._tmp = tmp
        self._env = {k: v for k, v in os.environ.items() if k != "TTSIM_FORKSERVER"}
        self._sockets = tempfile.mkdtemp(prefix="tis-", dir="/tmp")  # short: Unix socket paths are limited
        self._server = fork_servers.Lazy(self._start)

    def run(self, args: list[str], *, cwd, env: dict[str, str] | None = None,
            timeout: float = 900) -> subprocess.CompletedProcess:
        env = dict(self._env if env is None else env)
        argv = [sys.executable, "-m", "pytest", *args]
        sock = self._up() if all(env.get(k) == self._env.get(k) for k in _START_ENV) else None
        if sock is not None:
            with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, open(os.devnull) as null:
                code = forkserver.request(sock, "pytest", list(args), cwd=str(cwd), env=env, timeout=timeout,
                                          stdio=(null.fileno(), out.fileno(), err.fileno()))
                if code is not None:  # None: the server went away before forking (a fresh process, below)
                    out.seek(0)
                    err.seek(0)
                    return subprocess.CompletedProcess(argv, code, out.read().decode(errors="replace"),
                                                       err.read().decode(errors="replace"))
        return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)

    def _start(self):
        with open(self._tmp / "forkserver.log", "a") as log:
            return forkserver.spawn("inner", {**self._env, "TMPDIR": self._sockets}, idle_s=600, log=log)

    def _up(self) -> Path | None:
        """The server's socket, the server started when first needed and again if it idled out;
        None if it cannot start (the sessions run fresh)."""
        try:
            return self._server.up()
        except RuntimeError:
            return None

    def stop(self) -> None:
        self._server.stop()
        subprocess.run(["rm", "-rf", self._sockets], check=False)


@pytest.fixture(scope="session")
def inner_pytest(tmp_path_factory):
    """Run an inner pytest session (InnerSessions.run); returns a CompletedProcess (text)."""
    sessions = InnerSessions(tmp_path_factory.mktemp("inner-sessions"))
    yield sessions.run
    sessions.stop()


@pytest.fixture(autouse=True)
def _ttnn_left_as_found():
    """A test that finds no ``ttnn`` imported leaves none: loading a user's generator aliases it
    to the backend, and a test after it (on the same worker, in whatever file order) that needs
    ttnn unimported (the --hil path selects cards before importing it) would fail for nothing."""
    absent = "ttnn" not in sys.modules
    yield
    if absent and "ttnn" in sys.modules:
        leaked = sys.modules.pop("ttnn")
        pytest.fail(f"the test left sys.modules['ttnn'] = {leaked!r} behind (load generators with harness.loader.loaded, which restores it)")
