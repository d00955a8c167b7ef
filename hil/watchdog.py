"""A per-test watchdog in its own process (``--hil-timeout``), as tt-metal's conftest keeps one.

A test hung inside the runtime may hold the GIL, so no thread of the test process can act: the
watchdog is a separate process fed ``arm <seconds> <nodeid>`` / ``cancel`` lines on its stdin. When
an armed deadline passes it prints one line naming the test and the timeout, closes the
session record (if it was given one) and SIGKILLs the test process. Under xdist that is the
worker, which xdist reports as crashed while running that test and replaces. When its stdin
closes (the test process ended) it exits.

    python -m hil.watchdog <pid> <option> [<partial-record-path>]

The same process backs ``--call-deadline`` on cards (harness/deadline.py): armed per call into
the generator with that call's line, it names the option it enforces.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from . import record, settings
from .lifeline import close_and_reap


class Watchdog:
    """The test process's handle on its watchdog process."""

    def __init__(self, timeout: float, partial_record: str | None = None, target_pid: int | None = None,
                 option: str = "--hil-timeout"):
        if timeout <= 0:
            raise ValueError(f"{option} must be > 0 seconds, got {timeout:g}")
        self.timeout = timeout
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = settings.child_env(root)
        args = [sys.executable, "-m", "hil.watchdog", str(target_pid or os.getpid()), option]
        if partial_record:
            args.append(str(partial_record))
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, text=True, env=env)

    def _send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def arm(self, label: str, timeout: float | None = None) -> None:
        """Kill the process unless cancelled within ``timeout`` (default the watchdog's) seconds;
        ``label`` (a test id, a call's line) is what the kill line names."""
        self._send(f"arm {self.timeout if timeout is None else timeout!r} {label}")

    def cancel(self) -> None:
        self._send("cancel")

    def stop(self) -> None:
        close_and_reap(self.proc)


def run(pid: int, partial: str | None, stdin=sys.stdin, stderr=sys.stderr, option: str = "--hil-timeout") -> int:
    deadline = None
    nodeid = timeout = None
    buf = ""
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([stdin], [], [], wait)
        if ready:
            chunk = os.read(stdin.fileno(), 4096).decode()
            if not chunk:
                return 0  # the test process closed the pipe or died
            buf += chunk
            while "\n" in buf:
                line, buf = buf.split("\n", 1)
                cmd, _, rest = line.partition(" ")
                if cmd == "arm":
                    t, _, nodeid = rest.partition(" ")
                    timeout = float(t)
                    deadline = time.monotonic() + timeout
                elif cmd == "cancel":
                    deadline = None
            continue
        if deadline is not None and time.monotonic() >= deadline:
            reason = f"{nodeid} did not finish within {option}={timeout:g} s"
            stderr.write(f"\nhil watchdog: {reason}; killing the test process (pid {pid}). The cards may need a "
                         f"reset: rerun with --hil-reset, or `tt-smi -r <ids>`.\n")
            stderr.flush()
            if partial:
                record.finish_partial(partial, f"watchdog: {reason}")
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return 3


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(run(int(sys.argv[1]), sys.argv[3] if len(sys.argv) == 4 else None, option=sys.argv[2]))
