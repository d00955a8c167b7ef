"""Append benchmark records to bench/runs/<name>.jsonl, with enough context to compare runs."""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path
from typing import Callable

RUNS = Path(__file__).resolve().parent / "runs"


def _git_rev() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).resolve().parent, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


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


def write(name: str, record: dict, runs_dir: Path | None = None) -> Path:
    """Append ``record`` (plus context) as one JSON line to ``runs_dir/name.jsonl``
    (default: $TTSIM_RUNS_DIR, else bench/runs)."""
    runs_dir = Path(runs_dir or os.environ.get("TTSIM_RUNS_DIR") or RUNS)
    runs_dir.mkdir(parents=True, exist_ok=True)
    path = runs_dir / f"{name}.jsonl"
    with path.open("a") as f:
        f.write(json.dumps({"bench": name, **context(), **record}, sort_keys=True) + "\n")
    return path


def side_by_side(fns: dict[str, Callable[[], None]], repeats: int, warmup: int = 2) -> dict[str, float]:
    """Median seconds per call of each fn, interleaved round-robin so machine noise hits all alike."""
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    samples: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}
