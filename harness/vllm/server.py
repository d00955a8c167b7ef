"""Start and stop a sim-backed `vllm serve` on 127.0.0.1 (tests, `bin/ttsim serve`, bench).

One command line for every caller (:func:`serve_command`); readiness is /health answering
200 AND the worker's ready line in the log, awaited with a deadline; the process group is
always reaped, and the server ends with the process that started it, even on SIGKILL
(:mod:`hil.lifeline`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from hil import lifeline
from hil.gates import health

from harness.base.settings import PLATFORM_ENV, child_env
from harness.engine.prepare import VLLM_ENV
from harness.engine.sizes import BLOCK_SIZE, MAX_BATCHED, MAX_MODEL_LEN, MAX_SLOTS

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the served engine imports this tree
SERVED_NAME = "ttsim"
READY_LINE = "ttsim worker ready"

# Production-like engine settings on the runner's geometry: 8 stable slots, 32-token blocks,
# 128-token prefill chunks, async scheduling (the batch queue of 2), prefix caching, the
# hermes tool parser (the chat template asks for <tool_call>{json}</tool_call>).
# (``harness.vllm.rerun`` builds the same engine in process from these numbers.)
SERVE_ARGS = (
    "--served-model-name", SERVED_NAME,
    "--max-model-len", str(MAX_MODEL_LEN), "--max-num-seqs", str(MAX_SLOTS),
    "--max-num-batched-tokens", str(MAX_BATCHED),
    "--block-size", str(BLOCK_SIZE), "--dtype", "float32", "--async-scheduling",
    "--enable-prefix-caching", "--enable-prompt-tokens-details",
    "--enable-auto-tool-choice", "--tool-call-parser", "hermes",
    "--generation-config", "vllm", "--disable-uvicorn-access-log",
)


class ServerError(RuntimeError):
    """The server did not come up (its log tail is in the message)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_command(model_dir: str, port: int, extra: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", model_dir,
            "--host", "127.0.0.1", "--port", str(port), *SERVE_ARGS, *extra]


def additional_config(**settings) -> tuple[str, ...]:
    """``--additional-config`` for the worker's settings (mesh_cols, knobs, step_policy: a
    harness.base.spec.StepPolicy) that differ from its defaults; nothing when none do."""
    from harness.base.spec import DEFAULT_STEP_POLICY

    if "step_policy" in settings:
        settings["step_policy"] = settings["step_policy"].name
    defaults = {"mesh_cols": 1, "knobs": "swarm", "step_policy": DEFAULT_STEP_POLICY.name}
    given = {k: v for k, v in settings.items() if v != defaults[k]}
    return ("--additional-config", json.dumps(given, sort_keys=True)) if given else ()


def serve_env(overrides: dict[str, str] | None = None) -> dict[str, str]:
    # vLLM's offline/no-telemetry defaults, but its own log level: the server log is for people
    quiet = {k: v for k, v in VLLM_ENV.items() if k != "VLLM_LOGGING_LEVEL"}
    env = child_env({**quiet, PLATFORM_ENV: "1",
                     "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
                     # the CLI defaults to spawn: the engine core would import vLLM and torch again
                     # (~10 s); nothing here initialises CUDA, so fork is safe and vLLM's library default
                     "VLLM_WORKER_MULTIPROC_METHOD": "fork"},
                    drop=("VLLM_TARGET_DEVICE",))  # "cpu" would override every platform plugin
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(overrides or {})
    return env


@dataclass
class Server:
    url: str
    port: int
    proc: subprocess.Popen
    log_path: Path
    startup_s: float = 0.0
    lifeline: lifeline.Lifeline | None = None  # ends the group if this process dies first

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-n:])

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server's process group (API server + engine core), SIGKILL after ``timeout``."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        try:  # a straggling engine core in the same group
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.lifeline is not None:
            self.lifeline.release()


def plugin_installed() -> bool:
    """vLLM finds platform plugins through the INSTALLED distribution's entry points."""
    from importlib.metadata import entry_points

    return any(ep.value.startswith("harness.vllm:") for ep in entry_points(group="vllm.platform_plugins"))


def start(model_dir: str, log_path: Path, *, env: dict[str, str] | None = None, deadline_s: float = 240.0,
          extra: tuple[str, ...] = ()) -> Server:
    """Start the server and wait until it is ready; ServerError (with the log tail) otherwise."""
    if not plugin_installed():
        raise ServerError("the harness.vllm platform plugin is not installed: vLLM reads platform plugins from "
                          "installed entry points (pyproject.toml); run bin/setup to reinstall the project")
    port = free_port()
    log_path = Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(log_path, "wb") as log:
        proc, life = lifeline.spawn(serve_command(model_dir, port, extra), stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=serve_env(env), cwd=ROOT)
    server = Server(f"http://127.0.0.1:{port}", port, proc, log_path, lifeline=life)
    try:
        while True:
            if proc.poll() is not None:
                raise ServerError(f"vllm serve exited with {proc.returncode} before it was ready "
                                  f"(log {log_path}):\n{server.log_tail()}")
            if READY_LINE in server.log_text() and health(server.url) == 200:
                server.startup_s = time.perf_counter() - t0
                return server
            if time.perf_counter() - t0 > deadline_s:
                raise ServerError(f"vllm serve not ready after {deadline_s:.0f} s (log {log_path}):\n"
                                  f"{server.log_tail()}")
            time.sleep(0.25)
    except BaseException:
        server.stop()
        raise
