"""What the worker reads from the environment at start (no vLLM import: the CLI checks it too)."""

from __future__ import annotations

import os

STREAMING_ENV = "QWEN36_SDPA_STREAMING"


def read_start_env(env=os.environ):
    """Everything the worker reads from the environment, once; ValueError names the variable."""
    from model.flags import GeneratorFlags
    from ttsim.seed import parse_seed

    flags = GeneratorFlags.from_env(env)
    streaming = env.get(STREAMING_ENV, "0")
    if streaming not in ("0", "1"):
        raise ValueError(f"{STREAMING_ENV} must be 0 or 1, got {streaming!r}")
    raw = env.get("TTSIM_SEED")
    import ttsim

    seed = parse_seed(raw, "TTSIM_SEED") if raw else ttsim.DEFAULT_SEED
    return flags, streaming == "1", seed
