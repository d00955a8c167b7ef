"""Where a sweep's per-seed jobs run: the interface every strategy speaks (one file per
strategy beside this one: local.py, ray.py; chosen by name from harness.sweep.EXECUTORS).

An executor maps a picklable job function over jobs and yields results in COMPLETION order;
the sweep orders them by seed, so its report does not depend on the executor, the number
of workers or their timing. Closing the iterator early (or an exception in its consumer,
such as an interrupt) ends the workers at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol


class Executor(Protocol):
    def imap_unordered(self, fn: Callable, jobs: Iterable) -> Iterator: ...
