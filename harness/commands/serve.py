"""`bin/ttsim serve`: `vllm serve` on the fake device, in the foreground, on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import socket
import tempfile

from hil import lifeline


def run(args) -> int:
    """`ttsim serve` (--seed resolved by harness.commands.preflight.serve): bad input is refused in one
    line before vLLM starts."""
    from harness.base.errors import UsageError as usage_error
    from harness.base.settings import generator_env, read_start_env
    from harness.engine import modeldir
    from harness.vllm import server

    try:  # the worker reads these at start; refuse here with one line rather than a traceback there
        read_start_env()
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    _check_port(args.port, usage_error)
    if args.model_dir is not None:
        if not os.path.isdir(args.model_dir):
            raise usage_error(f"model directory {args.model_dir} does not exist")
        try:
            modeldir.read_model(args.model_dir)
        except ValueError as exc:
            raise usage_error(str(exc)) from None
        path = args.model_dir
    else:
        try:
            path = modeldir.write(tempfile.mkdtemp(prefix="ttsim-model-"), args.model)
        except OSError as exc:  # the generated directory goes under the temp dir (TMPDIR)
            raise usage_error(f"cannot write the model directory under {tempfile.gettempdir()}: "
                              f"{exc.strerror or exc}") from None
    if not server.plugin_installed():
        raise usage_error("the harness.vllm platform plugin is not installed (vLLM reads installed entry points); "
                          "run bin/setup")
    spec = args.spec
    from harness.system import generator_errors, generator_loaded

    with generator_loaded(spec):  # loaded and probed here: a bad one never starts vLLM
        if spec.generator is not None:
            from harness.scenario import probe

            try:
                probe(spec)
            except generator_errors() as exc:
                raise usage_error(str(exc)) from None
    cmd = server.serve_command(path, args.port, server.additional_config(mesh_cols=spec.mesh_cols,
                                                                         step_policy=spec.step_policy))
    overrides = {"TTSIM_SEED": str(spec.seed)}
    if spec.generator is not None:  # the worker loads it from its environment (harness.base.settings)
        overrides.update(generator_env(spec.generator.text, spec.generator.tt_metal))
    env = server.serve_env(overrides)
    print(f"ttsim serve: model {path} on http://127.0.0.1:{args.port} (seed {spec.seed}, {spec.step_policy} "
          f"steps; fix flags and "
          f"QWEN36_SDPA_STREAMING from the environment)\n  {' '.join(cmd)}", flush=True)
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)  # `kill` stops the server too, as Ctrl-C does
    proc, life = lifeline.spawn(cmd, env=env, cwd=server.ROOT)  # ends with this process, even on SIGKILL
    running = server.Server(f"http://127.0.0.1:{args.port}", args.port, proc, None, lifeline=life)
    try:
        return proc.wait()
    except KeyboardInterrupt:  # Ctrl-C: stop the API server and its engine core, then reap them
        return 0
    finally:
        running.stop()


def _check_port(port: int, usage_error) -> None:
    """Refuse a port vLLM could not serve on in one line, before vLLM starts (it would print a
    traceback ~20 s later). A port taken between this check and vLLM's bind still fails there."""
    if not 1 <= port <= 65535:
        raise usage_error(f"--port must be in 1..65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no obstacle
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise usage_error(f"--port {port}: cannot bind 127.0.0.1:{port} ({exc.strerror or exc}); "
                              f"is another server running there?") from None
