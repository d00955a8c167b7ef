"""What one run is: the run specification a command builds once from its options (preflight)
and hands down explicitly: through a sweep's jobs, the scenario, the system, the runner and
the scheduler. Every replay line is derived from it (:meth:`RunSpec.replay_command`).

The choices a user makes on the command line live here too, each in one table with one
default: the models, the step policies, the user's generator. Nothing here imports torch or
vLLM, so parsing a command stays light.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

#: the models a system can be assembled with (harness.system.System): the sweep model, and the
#: Qwen3.6-style hybrid's presets
MODELS = ("markov", "tiny", "small")
DEFAULT_MODEL = "markov"


@dataclass(frozen=True)
class StepPolicy:
    """How the engine's steps are cut, and the decode layout the runner gives the generator.

    ``scheduler_cls`` is vLLM's ``scheduler_cls`` (the class EngineCore builds, by dotted path;
    None: vLLM's own choice, its ``AsyncScheduler`` under async scheduling); ``plugin_layout``: the Tenstorrent plugin's decode layout (rows condensed and padded to
    capacity, ``reset_batch`` whenever the padded layout changed since the last decode)."""
    name: str
    scheduler_cls: str | None
    plugin_layout: bool

    def __str__(self) -> str:
        return self.name


#: vLLM's stock token-budget steps: prefill and decode in one step
MIXED = StepPolicy("mixed", None, plugin_layout=False)
#: the Tenstorrent plugin's: every step all-prefill or all-decode (harness.engine.scheduler)
PHASED = StepPolicy("phased", "harness.engine.scheduler.PhasedScheduler", plugin_layout=True)
STEP_POLICIES = {p.name: p for p in (MIXED, PHASED)}
#: what production runs (the plugin's scheduler), so what every sweep and test runs unless told
DEFAULT_STEP_POLICY = PHASED


def step_policy(name: str) -> StepPolicy:
    """The policy called ``name``; ValueError naming the choices."""
    if name not in STEP_POLICIES:
        raise ValueError(f"unknown step policy {name!r}; choose from {', '.join(STEP_POLICIES)}")
    return STEP_POLICIES[name]


#: the plugin's ``sample_on_device_mode`` values (None: host sampling, where no merge runs)
SAMPLE_ON_DEVICE = ("all", "decode_only", None)


@dataclass(frozen=True)
class TraceMode:
    """The Tenstorrent plugin's ``trace_mode`` and the order its warm-up captures in
    (vllm-tt-plugin ``model_runner.py`` @ e3fc8494 ``warmup_model``; model/serving.py
    start_generator). ``trace_prefill``: prefill is traced (captured in the warm-up, replayed by
    requests); ``decode_first``: phase 2 captures decode before prefill (vllm-tt-plugin PR #122,
    reverted by PR #126): a what-if."""
    name: str
    trace_prefill: bool
    decode_first: bool = False

    @property
    def what_if(self) -> bool:
        return self.decode_first

    def __str__(self) -> str:
        return self.name


#: the plugin's default: prefill and decode traced, prefill captured first
TRACE_ALL = TraceMode("all", trace_prefill=True)
#: decode traced, prefill eager: a model's prefill state is first allocated by the first request
TRACE_DECODE_ONLY = TraceMode("decode_only", trace_prefill=False)
#: what-if, not production: PR #122's order, decode captured before prefill (shipped, then reverted)
TRACE_DECODE_FIRST = TraceMode("decode-first", trace_prefill=True, decode_first=True)
TRACE_MODES = {m.name: m for m in (TRACE_ALL, TRACE_DECODE_ONLY, TRACE_DECODE_FIRST)}
DEFAULT_TRACE_MODE = TRACE_ALL


def trace_mode(name: str) -> TraceMode:
    """The trace mode called ``name``; ValueError naming the choices."""
    if name not in TRACE_MODES:
        raise ValueError(f"unknown trace mode {name!r}; choose from {', '.join(TRACE_MODES)}")
    return TRACE_MODES[name]


# -- the user's generator, as named on the command line ---------------------------------------

class GeneratorSpecError(ValueError):
    """A --generator that cannot be loaded: one line naming what is wrong."""


@dataclass(frozen=True)
class GeneratorSpec:
    """``--generator MODULE:ATTR [--tt-metal PATH]``: what to load (harness.loader loads it)."""
    module: str
    attr: str
    tt_metal: str | None = None

    @property
    def text(self) -> str:
        return f"{self.module}:{self.attr}"

    def replay_args(self) -> str:
        extra = f" --tt-metal {self.tt_metal}" if self.tt_metal else ""
        return f" --generator {self.text}{extra}"


def parse_generator(text: str | None, tt_metal: str | None = None) -> GeneratorSpec | None:
    """The generator ``--generator``/``--tt-metal`` name (None: ours), or GeneratorSpecError."""
    if text is None:
        if tt_metal is not None:
            raise GeneratorSpecError("--tt-metal needs --generator")
        return None
    module, sep, attr = text.rpartition(":")
    if not sep or not module or not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", attr):
        raise GeneratorSpecError(f"--generator must look like MODULE:ATTR (a module path or a .py file, then a "
                                 f"class or factory), got {text!r}")
    if tt_metal is not None:
        if not (Path(tt_metal) / "models").is_dir():
            raise GeneratorSpecError(f"--tt-metal {tt_metal}: no models/ package there (point it at a tt-metal checkout)")
        tt_metal = os.path.abspath(tt_metal)
    if is_file_module(module):  # absolute, so a served worker or a replay elsewhere finds the same file
        module = os.path.abspath(module)
    return GeneratorSpec(module, attr, tt_metal)


def is_file_module(module: str) -> bool:
    """``--generator``'s MODULE names a file (``x.py``, ``dir/x``) rather than a dotted module."""
    return module.endswith(".py") or os.sep in module


# -- the run ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSpec:
    """Everything that decides a run besides its arm and its workload.

    ``generator``: the user's (None: ours, model.generator.Generator). ``backend``: what the
    device code runs on (harness.system's ``SimBackend``/``CardBackend``; None: ttsim, chosen
    where the mesh opens). ``merge_trace``: a JSONL path each run appends its merges to.
    ``generator_options``: more keywords for OUR generator, and ``scenario`` the named upstream
    scenario (harness.upstream_bugs) whose side they configure; read, never changed.
    ``call_deadline``: seconds each call into the generator (and each wait on its events) may
    take (harness/deadline.py); it changes no result, so no replay line carries it.
    ``trace_mode``: the plugin's trace mode and warm-up order (:class:`TraceMode`).

    A spec without a backend pickles: a sweep's job is a spec (its seed one of the sweep's).
    """
    seed: int = 0
    model: str = DEFAULT_MODEL
    step_policy: StepPolicy = DEFAULT_STEP_POLICY
    sample_on_device: str | None = "decode_only"
    mesh_cols: int = 1
    generator: GeneratorSpec | None = None
    backend: Any = None
    merge_trace: str | None = None
    generator_options: dict = field(default_factory=dict)
    scenario: str | None = None
    call_deadline: float = 300.0
    trace_mode: TraceMode = DEFAULT_TRACE_MODE

    def __post_init__(self):
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; choose from {', '.join(MODELS)}")
        if not isinstance(self.step_policy, StepPolicy):
            raise TypeError(f"step_policy must be a StepPolicy (harness.base.spec.step_policy(name)), "
                            f"got {self.step_policy!r}")
        if self.sample_on_device not in SAMPLE_ON_DEVICE:
            raise ValueError(f"sample_on_device must be one of {SAMPLE_ON_DEVICE}, got {self.sample_on_device!r}")
        if self.mesh_cols not in (1, 2):
            raise ValueError(f"mesh_cols must be 1 or 2, got {self.mesh_cols!r}")
        if not self.call_deadline > 0:
            raise ValueError(f"--call-deadline must be > 0 seconds, got {self.call_deadline!r}")
        if not isinstance(self.trace_mode, TraceMode):
            raise TypeError(f"trace_mode must be a TraceMode (harness.base.spec.trace_mode(name)), "
                            f"got {self.trace_mode!r}")

    def with_seed(self, seed: int) -> "RunSpec":
        return replace(self, seed=seed)

    def replay_command(self, arm: str) -> str:
        """The command that runs ``arm`` on this spec's seed again, step by step. The one
        builder of replay lines: every failure a run reports prints this. A named scenario's
        side runs again with its own command (both sides, its configuration)."""
        if self.scenario is not None:
            return f"bin/ttsim scenario {self.scenario} --seed {self.seed}"
        extra = "" if self.model == DEFAULT_MODEL else f" --model {self.model}"
        if self.step_policy != DEFAULT_STEP_POLICY:
            extra += f" --step-policy {self.step_policy}"
        if self.trace_mode != DEFAULT_TRACE_MODE:
            extra += f" --trace-mode {self.trace_mode}"
        if self.generator is not None:
            extra += self.generator.replay_args()
        return f"bin/ttsim replay --arm {arm} --seed {self.seed}{extra}"
