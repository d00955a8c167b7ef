"""Child processes that end with the process that started them, however it ends (SIGKILL too).

A server started with ``start_new_session=True`` (so a stop can signal its whole group) is
out of reach of anything that ends its starter: a CI timeout or an OOM kill of pytest left
`vllm serve` holding its port and its engine core. Two mechanisms, because each alone has
a hole:

- ``prctl(PR_SET_PDEATHSIG)`` (Linux, :func:`die_with_parent`): the kernel signals the child
  when the THREAD that forked it exits, not the process. Safe only when that thread outlives
  the child: the main thread (it lives as long as the process) or a caller blocked on the
  child (``subprocess.run``). It reaches the direct child only: vLLM's API server forks its
  engine core, which would be left behind.
- a watcher (:class:`Lifeline`, this module's ``__main__``): a small process in its own
  session holding the read end of a pipe whose write end only the starter holds. The kernel
  closes that end when the starter dies, however it dies (any thread may have started the
  child); the watcher reads EOF and ends the child's whole process group (SIGTERM, SIGKILL
  after a grace). A normal stop releases the watcher first, and the watcher leaves once the
  group is empty, so it never signals a group id the system may have given to someone else.

    python -m hil.lifeline <pgid> <grace-seconds>
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time

from . import settings

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
RELEASE = b"release\n"
_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def close_and_reap(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """Close a helper process's stdin (its signal to leave), wait for it, kill it if it lingers."""
    try:
        proc.stdin.close()
    except (BrokenPipeError, ValueError):
        pass
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def die_with_parent(sig: int = signal.SIGKILL):
    """A ``preexec_fn`` asking the kernel to send ``sig`` to the child when the forking thread
    exits (see the module docstring for when that is safe); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)  # loaded here: the child between fork and exec only calls it
    parent = os.getpid()

    def preexec() -> None:
        if libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0) != 0:
            os._exit(126)  # refuse to run unguarded; the starter sees the child exit at once
        if os.getppid() != parent:  # the parent died before the prctl took hold
            os.kill(os.getpid(), sig)

    return preexec


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of process group ``pgid``."""
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except (ProcessLookupError, PermissionError):
            return []
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone while we looked
        fields = stat[stat.rindex(b")") + 2:].split()  # after "(comm)": state ppid pgrp ...
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            pids.append(int(name))
    return pids


class Lifeline:
    """The starter's end of a watcher on process group ``pgid``."""

    def __init__(self, pgid: int, grace: float = 10.0, stderr=None):
        self.pgid = pgid
        # own session: a signal to the starter's group (Ctrl-C, a CI tree kill) must not take
        # the watcher down with the starter before it has done its job
        self.proc = subprocess.Popen([sys.executable, "-m", "hil.lifeline", str(pgid), repr(grace)],
                                     stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, cwd=_ROOT,
                                     start_new_session=True,
                                     env=settings.child_env(_ROOT))

    def release(self) -> None:
        """The group was stopped on purpose: the watcher leaves without signalling anyone."""
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(RELEASE)
                self.proc.stdin.flush()
            except (BrokenPipeError, ValueError):
                pass
        close_and_reap(self.proc)


def spawn(cmd: list[str], *, grace: float = 10.0, **popen_kwargs) -> tuple[subprocess.Popen, Lifeline]:
    """``Popen(cmd)`` as the leader of a new process group that ends with this process: the
    watcher always; PDEATHSIG (SIGTERM: vLLM's own shutdown also stops its engine core) when
    started from the main thread, which also covers the moment before the watcher is up."""
    preexec = die_with_parent(signal.SIGTERM) if threading.current_thread() is threading.main_thread() else None
    proc = subprocess.Popen(cmd, start_new_session=True, preexec_fn=preexec, **popen_kwargs)
    log = popen_kwargs.get("stdout")  # the watcher's one line goes where the server logs, if to a file
    try:
        return proc, Lifeline(proc.pid, grace, None if log in (None, subprocess.PIPE, subprocess.STDOUT) else log)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


def watch(pgid: int, grace: float, stdin_fd: int = 0, poll_s: float = 1.0) -> int:
    """The watcher: wait for the starter's end of the pipe to close (EOF) or say release; on
    EOF end the group. Leaves by itself once the group has no live process."""
    for s in (signal.SIGINT, signal.SIGHUP):  # the pipe decides, not a terminal
        signal.signal(s, signal.SIG_IGN)
    buf = b""
    while True:
        ready, _, _ = select.select([stdin_fd], [], [], poll_s)
        if not ready:
            if not group_members(pgid):
                return 0  # the group ended on its own; its id may be reused from now on
            continue
        chunk = os.read(stdin_fd, 4096)
        buf += chunk
        if RELEASE in buf:
            return 0
        if not chunk:
            break
    members = group_members(pgid)
    if not members:
        return 0
    try:
        sys.stderr.write(f"hil.lifeline: the process that started process group {pgid} is gone; "
                         f"ending {len(members)} process(es) of it\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass  # the starter's stderr may be gone with it
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while group_members(pgid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_members(pgid):  # stragglers, e.g. an engine core whose API server died first
        _signal_group(pgid, signal.SIGKILL)
    return 1


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        raise SystemExit(2)
    raise SystemExit(watch(int(sys.argv[1]), float(sys.argv[2])))
