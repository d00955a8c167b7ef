"""Benchmark helpers: records are written by :mod:`harness.base.records` (the runs folder, or
$TTSIM_RUNS_DIR); :func:`side_by_side` times candidates interleaved."""

from __future__ import annotations

import statistics
import time
from typing import Callable

from harness.base.records import context, runs_dir, write  # noqa: F401 - the one record writer

__all__ = ["context", "peak_rss", "runs_dir", "side_by_side", "write"]


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


def peak_rss(fn: Callable[[], object]) -> dict:
    """Bytes of resident memory ``fn()`` adds at its peak (in this process): the peak-RSS
    counter is reset (``/proc/self/clear_refs`` <- 5) right before the call and ``VmHWM``
    read after it, minus the RSS just before; ``ru_maxrss`` where clear_refs is unavailable
    (noted in ``method``). Returns ``{"peak_bytes", "method", "result"}``."""
    import resource

    def status(key: str) -> int:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        raise KeyError(key)

    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        method = "VmHWM after clear_refs"
    except OSError:
        method = "ru_maxrss"
    base = status("VmRSS")
    result = fn()
    peak = status("VmHWM") if method != "ru_maxrss" else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peak_bytes": max(0, peak - base), "method": method, "result": result}
