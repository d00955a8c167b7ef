"""`ttsim arms --executor local`: an arms sweep's per-seed jobs on this machine's processes."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Callable, Iterable, Iterator

from harness.base.interrupts import quiet_worker


class LocalExecutor:
    """This machine (harness.sweep.executor.Executor): in-process for one worker, else a fork
    pool whose workers inherit what ``warm_up`` paid for once (vLLM's imports and config)."""

    def __init__(self, workers: int, warm_up: Callable[[], None] | None = None):
        self.workers = workers
        self.warm_up = warm_up

    def imap_unordered(self, fn: Callable, jobs: Iterable) -> Iterator:
        if self.workers <= 1:
            yield from map(fn, jobs)
            return
        if self.warm_up is not None:
            self.warm_up()
        import os

        # the workers die with this process however it dies (quiet_worker: the parent-death signal)
        pool = mp.get_context("fork").Pool(self.workers, initializer=quiet_worker, initargs=(os.getpid(),))
        try:
            # one seed per task: a seed costs ~0.3-0.5 s against ~0.1 ms of IPC, and bigger
            # chunks leave one worker idle at the end while the other finishes its chunk
            yield from pool.imap_unordered(fn, jobs, chunksize=1)
        except BaseException:  # interrupted, failed or closed early: the queued seeds must not run
            pool.terminate()
            raise
        else:
            pool.close()
        finally:
            pool.join()
