"""Fork servers the suite starts (harness/commands/forkserver.py): for real `ttsim` clients, keyed as a
client with the same environment computes its key so `python -m harness.commands.cli` finds it on its
own; servers that preload nothing, for tests of the serving loop; and a server started when
first asked for and again whenever it has idled out, shared by a worker's tests."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import pytest

from harness.commands import forkserver

ROOT = Path(__file__).resolve().parents[1]

#: a server that preloads nothing (what such a test looks at is the serving loop, not the
#: imports): ``{before}`` runs before it serves
LIGHT_SERVER = """
import os, signal, sys
from harness.commands import forkserver

forkserver.PRELOAD = ()
{before}
forkserver.serve(sys.argv[1], float(sys.argv[2]))
"""


@contextmanager
def client_env(tmp: Path):
    """The client's and the server's environment: a private socket folder (short: Unix socket
    paths are limited), this checkout first on the path, records in ``tmp``."""
    sockets = tempfile.mkdtemp(prefix="tfs-", dir="/tmp")
    env = {**os.environ, "TMPDIR": sockets, "PYTHONPATH": str(ROOT), "TTSIM_RUNS_DIR": str(tmp / "runs")}
    env.pop("TTSIM_FORKSERVER", None)
    try:
        yield env
    finally:
        subprocess.run(["rm", "-rf", sockets], check=False)


def key_of(env) -> str:
    """The key a client with ``env`` computes (in a process of its own: the key reads the import path)."""
    out = subprocess.run([sys.executable, "-c", "from harness.commands.forkserver import key; print(key())"], env=env,
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def start(env, log: Path, idle_s: float = 120.0):
    """A server for ``env``'s clients, logging to ``log``: (process, socket); the caller stops it."""
    with open(log, "w") as fh:
        try:
            return forkserver.spawn(key_of(env), env, idle_s=idle_s, log=fh)
        except RuntimeError as exc:
            pytest.fail(f"{exc}:\n{log.read_text()[-3000:]}")


def start_light(env, log: Path, *, idle_s: float, before: str = "", key: str = "light"):
    """A :data:`LIGHT_SERVER` for ``key`` (a client's, for real clients to find it) in ``env``'s
    TMPDIR, up: (process, socket); the caller stops it."""
    with open(log, "w") as fh:
        proc = subprocess.Popen([sys.executable, "-c", LIGHT_SERVER.format(before=before), key, str(idle_s)],
                                cwd=ROOT, env=env, stdout=fh, stderr=subprocess.STDOUT)
    try:
        return proc, forkserver.listening(proc, forkserver.socket_path(key, env["TMPDIR"]), 60.0)
    except RuntimeError as exc:
        pytest.fail(f"{exc}:\n{log.read_text()[-3000:]}")


class Lazy:
    """A server ``start()`` makes ((process, socket)), started at the first :meth:`up` and again
    whenever it has stopped (a server idles out, and a worker's tests that use it may be far
    apart). A start that raised RuntimeError is not tried again: :meth:`up` raises it."""

    def __init__(self, start: Callable[[], tuple[subprocess.Popen, Path]]):
        self._start = start
        self._proc: subprocess.Popen | None = None
        self._sock: Path | None = None
        self._failed: RuntimeError | None = None

    def up(self) -> Path:
        if self._failed is not None:
            raise self._failed
        if self._proc is None or self._proc.poll() is not None:
            try:
                self._proc, self._sock = self._start()
            except RuntimeError as exc:
                self._failed = exc
                raise
        return self._sock

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
