"""Every environment variable the framework reads or sets, in one place.

TTSIM_RUNS_DIR       where run records go (default: <checkout>/runs, or the XDG state dir)
XDG_STATE_HOME       the state dir of an installed copy (default ~/.local/state)
TTSIM_VLLM_PLATFORM  "1": the vLLM platform plugin answers (set for served engines only)
TTSIM_SEED           the seed when none is given (pytest's session, selfcheck, the served worker)
TTSIM_GENERATOR      the served worker's generator, MODULE:ATTR (harness.loader); unset: ours
TTSIM_TT_METAL       with TTSIM_GENERATOR: the tt-metal checkout it imports from
TTSIM_FORKSERVER     "0": heavy commands run in this process, never in a fork server's child

Child processes (the served engine, Ray's workers) get the variables they need through
:func:`child_env` or :func:`environ`, never by module import.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

RUNS_DIR_ENV = "TTSIM_RUNS_DIR"
PLATFORM_ENV = "TTSIM_VLLM_PLATFORM"
#: the variable ttsim itself reads too (ttsim/settings.py) when used on its own
SEED_ENV = "TTSIM_SEED"


def runs_dir_override() -> Path | None:
    value = os.environ.get(RUNS_DIR_ENV)
    return Path(value) if value else None


def state_home() -> Path:
    return Path(os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state"))


def forkserver_enabled() -> bool:
    return os.environ.get("TTSIM_FORKSERVER", "1") != "0"


def whole_env() -> dict[str, str]:
    """This process's whole environment, copied (what a fork server's child must take on)."""
    return dict(os.environ)


def replace_env(env: dict[str, str]) -> None:
    """Make ``env`` this process's whole environment (a fork server's child becoming its client)."""
    os.environ.clear()
    os.environ.update(env)


def platform_enabled() -> bool:
    return os.environ.get(PLATFORM_ENV) == "1"


def child_env(overrides: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> dict[str, str]:
    """This process's environment for a child, with ``overrides`` set and ``drop`` removed."""
    env = dict(os.environ)
    for name in drop:
        env.pop(name, None)
    env.update(overrides or {})
    return env


def set_default_env(values: dict[str, str]) -> None:
    """Set each variable unless the user already set it (read by a library at its import)."""
    for name, value in values.items():
        os.environ.setdefault(name, value)


@contextlib.contextmanager
def environ(values: dict[str, str]):
    """``values`` in this process's environment for the block (a library that reads them at
    import, and the children it starts, see them), restored afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def read_seed(env=None) -> int:
    """TTSIM_SEED from ``env`` (default: this process's environment), else the default seed;
    ValueError names a malformed one."""
    from harness.base.seeds import DEFAULT_SEED, parse_seed

    raw = (os.environ if env is None else env).get(SEED_ENV)
    return parse_seed(raw, SEED_ENV) if raw else DEFAULT_SEED


def read_start_env(env=None):
    """What the served worker reads at start, once, from ``env`` (default: this process's
    environment): ``(flags, streaming, seed)``; ValueError names a bad variable (the CLI checks
    it before vLLM starts)."""
    from model.settings import STREAMING_ENV, generator_flags, sdpa_streaming

    env = os.environ if env is None else env
    flags = generator_flags(env)
    if env.get(STREAMING_ENV, "0") not in ("0", "1"):  # stricter than the model: a typo refuses to start
        raise ValueError(f"{STREAMING_ENV} must be 0 or 1, got {env.get(STREAMING_ENV)!r}")
    return flags, sdpa_streaming(env), read_seed(env)


GENERATOR_ENV = "TTSIM_GENERATOR"
TT_METAL_ENV = "TTSIM_TT_METAL"


def generator_env(spec: str, tt_metal: str | None) -> dict[str, str]:
    """The variables that hand a served worker the user's generator."""
    return {GENERATOR_ENV: spec, **({TT_METAL_ENV: tt_metal} if tt_metal else {})}


def read_generator_env(env=None) -> tuple[str | None, str | None]:
    """``(MODULE:ATTR, tt-metal path)`` a served worker is told to load, or ``(None, None)``."""
    env = os.environ if env is None else env
    return env.get(GENERATOR_ENV) or None, env.get(TT_METAL_ENV) or None
