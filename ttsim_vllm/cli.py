"""`bin/ttsim serve`: `vllm serve` on the fake device, in the foreground, on 127.0.0.1."""

from __future__ import annotations

import os
import signal
import tempfile

from hil import lifeline


def serve(args, usage_error) -> int:
    from . import modeldir, server
    from .settings import read_start_env

    try:  # the worker reads these at start; refuse here with one line rather than a traceback there
        read_start_env()
    except ValueError as exc:
        raise usage_error(str(exc)) from None
    if args.model_dir is not None:
        if not os.path.isdir(args.model_dir):
            raise usage_error(f"model directory {args.model_dir} does not exist")
        try:
            modeldir.read_model(args.model_dir)
        except ValueError as exc:
            raise usage_error(str(exc)) from None
        path = args.model_dir
    else:
        path = modeldir.write(tempfile.mkdtemp(prefix="ttsim-model-"), args.model)
    if not server.plugin_installed():
        raise usage_error("the ttsim_vllm platform plugin is not installed (vLLM reads installed entry points); "
                          "run bin/setup")
    extra = ("--additional-config", f'{{"mesh_cols": {args.mesh_cols}}}') if args.mesh_cols != 1 else ()
    cmd = server.serve_command(path, args.port, extra)
    env = server.serve_env({"TTSIM_SEED": str(args.seed)})
    print(f"ttsim serve: model {path} on http://127.0.0.1:{args.port} (seed {args.seed}; fix flags and "
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
