"""JSONL run records: one line per run, appended, with enough context to compare runs.

Where records go (first that applies):
  1. ``$TTSIM_RUNS_DIR``;
  2. in a source checkout (the package sits next to the repository's ``pyproject.toml``):
     ``<checkout>/runs/``, which ``.gitignore`` ignores, so runs never dirty the tree;
  3. an installed copy: ``$XDG_STATE_HOME/ttsim/runs`` (default ``~/.local/state/ttsim/runs``).
Curated records that the README quotes are copied by hand to ``docs/records/``.
"""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

from hil.record import git_rev

from harness.base import settings
from harness.base.errors import check_writable as check_file
from harness.base.errors import check_writable_dir

_PACKAGE_PARENT = Path(__file__).resolve().parents[2]  # harness/base/records.py -> the checkout


def checkout_root() -> Path | None:
    """The source checkout this package runs from, or None for an installed copy."""
    if (_PACKAGE_PARENT / "pyproject.toml").is_file() and (_PACKAGE_PARENT / "ttsim").is_dir():
        return _PACKAGE_PARENT
    return None


def runs_dir() -> Path:
    override = settings.runs_dir_override()
    if override is not None:
        return override
    root = checkout_root()
    if root is not None:
        return root / "runs"
    return settings.state_home() / "ttsim" / "runs"


def _git_rev() -> str:
    root = checkout_root()
    return "installed" if root is None else git_rev(root, short=True)


def context() -> dict:
    import torch

    return {
        "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "git_rev": _git_rev(),
        "machine": f"{platform.machine()} {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
    }


def check_writable(name: str) -> Path:
    """Refuse, before the run, a records folder (or ``<name>.jsonl`` in it) that :func:`write`
    could not write after it; returns that file's path."""
    directory = runs_dir()
    override = settings.runs_dir_override() is not None
    check_writable_dir(str(directory), f"the records folder (${settings.RUNS_DIR_ENV})" if override
                       else "the records folder")
    path = directory / f"{name}.jsonl"
    if directory.is_dir():  # else write() creates both
        check_file(str(path), "the run record")
    return path


def write(name: str, record: dict, directory: Path | None = None) -> Path:
    """Append ``record`` (plus context) as one JSON line to ``<runs dir>/<name>.jsonl``."""
    directory = Path(directory) if directory is not None else runs_dir()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.jsonl"
    with path.open("a") as f:
        f.write(json.dumps({"bench": name, **context(), **record}, sort_keys=True) + "\n")
    return path
