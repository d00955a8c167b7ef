"""Benchmark helpers: records are written by :mod:`fixtures.records` (the runs folder, or
$TTSIM_RUNS_DIR); :func:`side_by_side` times candidates interleaved."""

from __future__ import annotations

import statistics
import time
from typing import Callable

from fixtures.records import context, runs_dir, write  # noqa: F401 - the one record writer

__all__ = ["context", "runs_dir", "side_by_side", "write"]


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
