"""A fork server for the heavy commands: one process per machine pays for importing torch
and vLLM (about 10 s of a replay's 14), then forks a child per command.

The child is the command: it gets the client's stdin/stdout/stderr (passed over a Unix
socket), its working directory, its whole environment and its argv, and runs
``harness.commands.cli.main`` exactly as ``python -m harness.commands.cli`` would. The parent has only
imported modules: no vLLM config, scheduler, device or seed exists before the fork, so the
child builds every real vLLM object itself and its output is byte for byte a fresh
process's (tests compare them).

One server per *key*: the interpreter, this checkout, the import path, the hash seed, the
variables vLLM and torch read at import, and the size and mtime of every source file of ours. An edit
changes the key, so a stale server never runs old code; it idles out (IDLE_S) unused.

``TTSIM_FORKSERVER=0`` turns it off. A cold ``bin/ttsim replay`` run from a terminal starts
one in the background for the next (scripts and tests use a server that is up, never start
one). Only stdlib at module level: the client must stay light.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from harness.base import settings

ROOT = Path(__file__).resolve().parents[2]  # harness/commands/forkserver.py -> the checkout
PACKAGES = ("ttsim", "model", "harness", "fixtures", "hil")
#: what a served command imports before its first line of work: the server imports it once
PRELOAD = ("torch", "vllm.config", "vllm.v1.core.sched.async_scheduler", "vllm.v1.request",
           "vllm.sampling_params", "harness.commands.cli", "harness.replay", "harness.scenario", "harness.system",
           "harness.engine.config", "harness.engine.scheduler", "model.generator", "model.qwen36", "ttsim")
#: variables read at import by the preloaded modules: a server serves only clients that agree
IMPORT_ENV_PREFIXES = ("VLLM_", "HF_", "TRANSFORMERS_", "TORCH", "PYTORCH_", "OMP_", "MKL_", "CUDA_")
#: what a child may run, by the name a request gives: the CLI's entry (which itself asks this
#: module for a server), and pytest's (a suite's inner sessions: tests/conftest.py's inner_pytest)
COMMANDS = {"ttsim": "harness.commands.cli:main", "pytest": "pytest:main"}
IDLE_S = 600.0
#: a child's exit status travels as one signed int
_STATUS = struct.Struct("!i")


def key() -> str:
    """What a server must share with a client to serve it (module docstring)."""
    h = hashlib.sha256()
    env = settings.whole_env()
    imported = sorted((k, v) for k, v in env.items() if k.startswith(IMPORT_ENV_PREFIXES))
    import_path = list(dict.fromkeys(sys.path[1:]))  # [0] is the working directory, which the child takes on
    h.update(json.dumps([sys.executable, str(ROOT), env.get("PYTHONHASHSEED"), import_path, imported]).encode())
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            st = path.stat()
            h.update(f"{path.relative_to(ROOT)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:20]


def socket_path(k: str, tmp: str | None = None) -> Path:
    """A short path (Unix sockets allow ~100 bytes), private to this user, under ``tmp``
    (default: this process's temporary folder, which $TMPDIR sets)."""
    return Path(tmp or tempfile.gettempdir()) / f"ttsim-fork-{os.getuid()}" / f"{k}.sock"


# -- client ---------------------------------------------------------------------------------

def run(argv: list[str]) -> int | None:
    """Run ``ttsim argv`` in a forked child of this key's server and return its exit code;
    None when no server answers (the caller runs the command itself; from a terminal, a
    server is started in the background for next time)."""
    if not settings.forkserver_enabled():
        return None
    k = key()
    code = request(socket_path(k), "ttsim", argv)
    if code is None and sys.stderr.isatty():  # someone at a shell, who will likely replay again; never a test's child
        start_server(k)
    return code


def request(path: Path, command: str, argv: list[str], *, stdio: tuple[int, int, int] = (0, 1, 2),
            cwd: str | None = None, env: dict[str, str] | None = None, timeout: float | None = None) -> int | None:
    """Run ``command`` (a name of COMMANDS) with ``argv`` in a child of the server at ``path``,
    on the descriptors ``stdio`` (default: this process's own), in ``cwd`` with ``env`` (default:
    this process's); its exit code, or None when no server answers there. Past ``timeout``
    seconds the child is killed and TimeoutError raised."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    with conn:
        body = {"argv": argv, "cwd": cwd or os.getcwd(), "env": settings.whole_env() if env is None else env,
                "command": command}
        data = json.dumps(body).encode()
        socket.send_fds(conn, [_STATUS.pack(len(data)) + data], list(stdio))
        pid = _read_status(conn)
        if pid is None:
            return None
        forward = {sig: signal.signal(sig, lambda s, _f: _kill(pid, s)) for sig in (signal.SIGINT, signal.SIGTERM,
                                                                                    signal.SIGHUP)}
        conn.settimeout(timeout)
        try:
            status = _read_status(conn)
        except TimeoutError:
            _kill(pid, signal.SIGKILL)
            raise TimeoutError(f"{command} {' '.join(argv)}: no exit after {timeout} s (killed)") from None
        finally:
            for sig, handler in forward.items():
                signal.signal(sig, handler)
    if status is None:  # the server died under the child: say so rather than guess a code
        print("ttsim: the fork server went away during the command; rerun with TTSIM_FORKSERVER=0",
              file=sys.stderr)
        return 1
    return status


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _read_status(conn: socket.socket) -> int | None:
    data = b""
    while len(data) < _STATUS.size:
        chunk = conn.recv(_STATUS.size - len(data))
        if not chunk:
            return None
        data += chunk
    return _STATUS.unpack(data)[0]


def start_server(k: str) -> None:
    """Start this key's server, detached (its own session: the terminal's Ctrl-C is the
    client's), logging to the runs folder."""
    from harness.base.records import runs_dir

    log_dir = runs_dir() / "forkserver"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        log = open(log_dir / f"{k}.log", "ab")
    except OSError:
        return  # no writable runs folder: go on without a server
    with log:
        subprocess.Popen([sys.executable, "-m", "harness.commands.forkserver", k], cwd=ROOT, stdin=subprocess.DEVNULL,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)


def spawn(k: str, env: dict[str, str], *, idle_s: float = IDLE_S, log=subprocess.DEVNULL,
          deadline_s: float = 180.0) -> tuple[subprocess.Popen, Path]:
    """Start a server for ``k`` that the caller owns and stops (a test's, a benchmark's), with
    ``env`` (its TMPDIR places the socket), output to ``log``; return once it listens:
    (process, socket). RuntimeError, the server killed, if it does not within ``deadline_s``."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.commands.forkserver", k, str(idle_s)], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    return proc, listening(proc, socket_path(k, env.get("TMPDIR")), deadline_s)


def listening(proc: subprocess.Popen, sock: Path, deadline_s: float) -> Path:
    """``sock`` once the server ``proc`` listens on it. RuntimeError, the server killed, if it
    exits or ``deadline_s`` passes first."""
    deadline = time.monotonic() + deadline_s
    while not sock.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise RuntimeError(f"the fork server for {sock.stem} did not come up (exit {proc.returncode})")
        time.sleep(0.1)
    return sock


# -- server ---------------------------------------------------------------------------------

def serve(k: str, idle_s: float = IDLE_S) -> None:
    """Preload, then serve ``k``'s socket until ``idle_s`` pass with no command running."""
    from harness.engine.prepare import prepare_vllm

    prepare_vllm()  # what a fresh `python -m harness.commands.cli` does before vLLM's first import
    for name in PRELOAD:
        importlib.import_module(name)
    path = socket_path(k)
    path.parent.mkdir(mode=0o700, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    staging = path.with_suffix(f".{os.getpid()}.tmp")
    try:
        listener.bind(str(staging))
        listener.listen(16)
        os.replace(staging, path)  # clients see the socket only once it listens
        ours = path.stat().st_ino
    except OSError as exc:
        print(f"forkserver: cannot serve {path}: {exc}", flush=True)
        return
    print(f"forkserver {k}: pid {os.getpid()} serving {path}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # stop: the finally below removes the socket
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    # pidfd -> (pid, client connection); the client sends nothing after its request, so its
    # connection turns readable only when the client goes away
    children: dict[int, tuple[int, socket.socket]] = {}
    idle_since = time.monotonic()
    try:
        while children or time.monotonic() - idle_since < idle_s:
            for sk, _ in sel.select(timeout=5.0):
                if sk.data == "client":  # readable before its child ended: the client is gone
                    pid = next(p for p, c in children.values() if c.fileno() == sk.fd)
                    sel.unregister(sk.fd)
                    _kill(pid, signal.SIGTERM)  # what the client's own death would have done to its command
                elif sk.data is None:
                    # a stop waits until the new child is registered: the finally below stops
                    # only the children it knows, and one forked just before would run on alone
                    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
                    try:
                        conn, _ = listener.accept()
                        forked = _fork_child(conn, [listener, *(c for _, c in children.values())], list(children))
                        if forked is None:
                            conn.close()
                            continue
                        pid, argv = forked
                        pidfd = os.pidfd_open(pid)
                        children[pidfd] = (pid, conn)
                        sel.register(pidfd, selectors.EVENT_READ, "child")
                        sel.register(conn, selectors.EVENT_READ, "client")
                        print(f"child {pid}: {' '.join(argv)}", flush=True)
                    finally:
                        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
                else:
                    pid, conn = children.pop(sk.fd)
                    sel.unregister(sk.fd)
                    os.close(sk.fd)
                    with contextlib.suppress(KeyError):
                        sel.unregister(conn)
                    _, wait_status = os.waitpid(pid, 0)
                    print(f"child {pid}: exit {_exit_code(wait_status)}", flush=True)
                    try:
                        conn.sendall(_STATUS.pack(_exit_code(wait_status)))
                    except OSError:
                        pass  # the client went away; its child is reaped all the same
                    conn.close()
                    idle_since = time.monotonic()
    finally:
        for pid, _ in children.values():  # stopped under running commands: they stop too
            _kill(pid, signal.SIGTERM)
        with contextlib.suppress(OSError):
            if path.stat().st_ino == ours:  # another server of this key may have taken the path since
                path.unlink()


def _exit_code(wait_status: int) -> int:
    """A shell's view: the code, or 128 + the signal that killed the child."""
    code = os.waitstatus_to_exitcode(wait_status)
    return 128 - code if code < 0 else code


def _fork_child(conn: socket.socket, servers: list[socket.socket], pidfds: list[int]) -> tuple[int, list[str]] | None:
    """Fork the command ``conn`` asks for; the child closes what is the server's (``servers``:
    its listener and other clients' connections, ``pidfds``)."""
    conn.settimeout(10.0)  # a client that connects and says nothing must not stall the server
    fds: list[int] = []
    try:
        header, fds, _, _ = socket.recv_fds(conn, _STATUS.size, 3)
        if len(header) < _STATUS.size or len(fds) != 3:
            raise ValueError("a request is a length, a JSON body and three descriptors")
        size = _STATUS.unpack(header)[0]
        body = b""
        while len(body) < size:
            chunk = conn.recv(size - len(body))
            if not chunk:
                raise ValueError("the request ended early")
            body += chunk
        request = json.loads(body)
        if not (isinstance(request, dict) and {"argv", "cwd", "env"} <= request.keys()):
            raise ValueError("a request names argv, cwd and env")
        request.setdefault("command", "ttsim")
        if request["command"] not in COMMANDS:
            raise ValueError(f"no command {request['command']!r}")
    except (OSError, ValueError) as exc:
        print(f"refused a request: {exc}", flush=True)
        for fd in fds:
            os.close(fd)
        return None
    pid = os.fork()
    if pid:
        for fd in fds:
            os.close(fd)
        conn.sendall(_STATUS.pack(pid))
        return pid, [request["command"], *request["argv"]]
    # the child: become the client's command
    code = 1
    try:
        for s in (*servers, conn):
            s.close()
        for fd in pidfds:
            os.close(fd)
        code = _run_child(request, fds)
    except BaseException:  # what an uncaught exception does to a fresh interpreter
        traceback.print_exc()
    finally:
        atexit._run_exitfuncs()  # a fresh process runs them at exit (the same modules registered them)
        os._exit(code)


def in_child() -> bool:
    """Whether this process is a forked command (it must not ask a server again)."""
    return _IN_CHILD


_IN_CHILD = False


def _run_child(request: dict, fds: list[int]) -> int:
    global _IN_CHILD
    _IN_CHILD = True
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    # stdio as a fresh interpreter opens it on these descriptors (line-buffered on a terminal)
    sys.stdin = open(0, closefd=False)
    sys.stdout = open(1, "w", buffering=1 if os.isatty(1) else -1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False, errors="backslashreplace")
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # forked while the server held stops back
    os.chdir(request["cwd"])
    settings.replace_env(request["env"])
    tempfile.tempdir = None  # the server's cached folder (its $TMPDIR): a fresh process reads the client's
    sys.path[0] = request["cwd"]  # `python -m` puts the working directory first
    module, _, name = COMMANDS[request["command"]].partition(":")
    main = getattr(importlib.import_module(module), name)  # named, not imported: the CLI imports us
    sys.argv = [sys.modules[module].__file__, *request["argv"]]
    try:
        code = main(request["argv"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int) and exc.code is not None:
            print(exc.code, file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return int(code or 0)


if __name__ == "__main__":
    # serve from the importable module: its in_child() is the one harness.commands.cli reads (this
    # file run as __main__ is a second copy whose flag the CLI never sees)
    from harness.commands.forkserver import serve as _serve

    _serve(sys.argv[1], *(float(a) for a in sys.argv[2:3]))
