"""Fork servers a test starts for real `ttsim` clients (fixtures/forkserver.py): keyed as a client
with the same environment computes its key, so `python -m fixtures.cli` finds it on its own."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest

from fixtures import forkserver

ROOT = Path(__file__).resolve().parents[2]


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
    out = subprocess.run([sys.executable, "-c", "from fixtures.forkserver import key; print(key())"], env=env,
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def start(env, log: Path, idle_s: float = 120.0):
    """A server for ``env``'s clients, logging to ``log``: (process, socket); the caller stops it."""
    with open(log, "w") as fh:
        try:
            return forkserver.spawn(key_of(env), env, idle_s=idle_s, log=fh)
        except RuntimeError as exc:
            pytest.fail(f"{exc}:\n{log.read_text()[-3000:]}")
