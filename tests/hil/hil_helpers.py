"""Helpers for testing hil: the REAL ttnn venv (Python 3.12, no torch) and subprocess runs."""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENV_TTNN = ROOT / ".venv-ttnn"
FAKE_TTNN = Path(__file__).resolve().parent / "fake_ttnn"
MOCK_CLUSTER = ROOT / "conformance" / "blackhole_p150_cluster.yaml"


def build_real_python() -> Path:
    """The interpreter of the real-ttnn venv that conformance builds (idempotent set-up script,
    run under the conformance tests' lock so parallel workers never build it twice)."""
    lock = Path(tempfile.gettempdir()) / f"ttsim-conformance-{hashlib.sha256(str(ROOT).encode()).hexdigest()[:12]}.lock"
    with open(lock, "w") as lk:
        fcntl.flock(lk, fcntl.LOCK_EX)
        p = subprocess.run(["bash", str(ROOT / "conformance" / "setup_ttnn_venv.sh")], cwd=ROOT, capture_output=True,
                           text=True, env=dict(os.environ, TTNN_VENV=str(VENV_TTNN)), timeout=3600)
    if p.returncode != 0:
        pytest.fail(f"building the real-ttnn venv failed (exit {p.returncode}):\n{p.stdout[-2000:]}{p.stderr[-2000:]}",
                    pytrace=False)
    return VENV_TTNN / "bin" / "python"


def clean_env(**extra) -> dict:
    """The environment minus anything that would steer ttnn or the session."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("TT_VISIBLE_DEVICES", "TT_METAL_MOCK_CLUSTER_DESC_PATH", "TT_MESH_GRAPH_DESC_PATH",
                        "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_ADDOPTS", "PYTHONPATH")}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run(cmd: list, *, cwd, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def inner_pytest() -> list:
    """pytest in the project's own venv (this interpreter), without the cache plugin (nor faker's
    plugin: no inner session uses its fixture, and importing it costs each process ~0.5 s)."""
    return [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:faker"]
