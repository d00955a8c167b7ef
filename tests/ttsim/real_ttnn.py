"""The dump of the REAL ttnn 0.81.1 package that ttsim is held to (shared by the tests here).

The session fixture ``real`` (tests/ttsim/conftest.py) builds (or reuses) ``.venv-ttnn``
with conformance/setup_ttnn_venv.sh and runs conformance/dump_ttnn.py there once; the dump
is cached as ``.venv-ttnn/dump-<sha256 of the conformance tooling>.json``. If the venv or
the dump cannot be produced the tests FAIL: CI must run them. See conformance/README.md.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conformance"
VENV = ROOT / ".venv-ttnn"
#: the files that decide what the dump contains; their hash names the cached dump
KEY_FILES = ("dump_ttnn.py", "setup_ttnn_venv.sh", "blackhole_p150_cluster.yaml")


# ---------------------------------------------------------------------------- the dump


def _dump_key() -> str:
    h = hashlib.sha256()
    for name in KEY_FILES:
        h.update(name.encode() + b"\0" + (CONF / name).read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _run(cmd: list[str], what: str, timeout: int) -> None:
    env = dict(os.environ, TTNN_VENV=str(VENV))
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.fail(f"conformance: {what} failed to run: {e!r}", pytrace=False)
    if p.returncode != 0:
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-25:])
        pytest.fail(f"conformance: {what} failed (exit {p.returncode}); the real-ttnn comparison cannot run.\n"
                    f"$ {' '.join(cmd)}\n{tail}", pytrace=False)


def load_dump() -> dict:
    """The real package's dump (built once, then reused while the tooling is unchanged)."""
    cache = VENV / f"dump-{_dump_key()}.json"
    # xdist workers (and parallel CI jobs on one checkout) must not build the venv twice at once
    lock = Path(tempfile.gettempdir()) / f"ttsim-conformance-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}.lock"
    with open(lock, "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        if not cache.exists():
            _run(["bash", str(CONF / "setup_ttnn_venv.sh")], "building the real-ttnn venv (setup_ttnn_venv.sh)", 3600)
            tmp = cache.with_suffix(".json.tmp")
            _run([str(VENV / "bin" / "python"), str(CONF / "dump_ttnn.py"), str(tmp)], "dump_ttnn.py", 900)
            for old in VENV.glob("dump-*.json"):
                old.unlink()
            os.replace(tmp, cache)
    data = json.loads(cache.read_text())
    assert data["meta"]["ttnn_version"] == "0.81.1", data["meta"]
    return data
