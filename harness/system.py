"""The composition root: the one place that chooses a backend and assembles the system
under test (mesh, model, generator, runner) for every caller: the pytest fixtures, the
sweeps and replays, and the served worker.

Production facts it carries: the runner's geometry (8 stable slots, 32-token blocks), and
the device parameters production opens its devices with. Sim-green must mean card-ready:
ttsim refuses what a card refuses (a trace outgrowing its region, cq 1 on one command
queue, a collective without a fabric), so everything that runs the model passes the
values production passes.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from types import ModuleType

from hil import devices
from model.flags import GeneratorFlags

from harness.base import seeds
from harness.base.errors import UsageError
from harness.base.spec import MODELS, GeneratorSpecError, RunSpec
from harness.engine.sizes import BLOCK_SIZE, MAX_BATCHED, MAX_SLOTS, NUM_BLOCKS
from harness.loader import UserGenerator, loaded
from harness.workloads import FaultKnobs

#: trace_region_size the Tenstorrent vLLM plugin opens its mesh with
VLLM_TRACE_REGION_SIZE = 50_000_000
#: trace_region_size tt-metal's qwen36 traced model tests open their mesh with
QWEN36_TRACE_REGION_SIZE = 805_306_368
#: the traced model tests' device_params, as tt-metal's qwen36 tests spell them
TRACED_DEVICE_PARAMS = {"trace_region_size": QWEN36_TRACE_REGION_SIZE}
#: what production opens its serving mesh with: the vLLM plugin's trace region (decode is
#: traced; ttnn 0.81.1's default trace region is 0)
SERVING_DEVICE_PARAMS = {"trace_region_size": VLLM_TRACE_REGION_SIZE}


# -- the backend: chosen here and nowhere else -------------------------------------------------

class BackendRefused(RuntimeError):
    """``hil=True`` without a usable card: the message is the one-line cause."""


@dataclass(frozen=True)
class SimBackend:
    """ttsim, or a wrapper of it (a call recorder). The seed and the device knobs are ttsim's own
    state, set on ttsim itself, not through ``ttnn``: a wrapper sees only ttnn's calls."""
    ttnn: ModuleType

    def seed(self, seed: int) -> None:
        """Every random byte the device produces from now on (junk, lag) follows ``seed``."""
        import ttsim

        ttsim.set_seed(seed)

    def open(self, seed: int, knobs: FaultKnobs, shape, params: dict) -> devices.Opened:
        """The mesh, opened under ``seed`` and the seed's device knobs (ttsim's readback lag)."""
        import ttsim

        self.seed(seed)
        with ttsim.device_knobs(readback_lag=knobs.readback_lag):
            return devices.open_mesh(self.ttnn, shape, params)

    def diagnostics(self, mesh) -> list[str]:
        """The stray accesses ttsim recorded on ``mesh``, as lines."""
        from ttsim import diagnostics
        from ttsim.device import MeshDevice

        return [e.line() for e in diagnostics.entries(mesh)] if isinstance(mesh, MeshDevice) else []

    @property
    def device_timeout(self) -> tuple[type[BaseException], ...]:
        """What a hung device raises: the run ends there, and the sweep goes on."""
        from ttsim.stray import DeviceTimeout

        return (DeviceTimeout,)


@dataclass(frozen=True)
class CardBackend:
    """The real ttnn on cards; ``hardware``: what the card probe found. A card has no seed and no
    knobs to set (its bytes and its timing are its own), so a card run never imports ttsim."""
    ttnn: ModuleType
    hardware: dict = field(default_factory=dict)
    #: a card's hang is not told apart from other errors yet: it ends the run with its exception
    device_timeout = ()

    def seed(self, seed: int) -> None:
        """Nothing to seed: a card's bytes are its own."""

    def open(self, seed: int, knobs: FaultKnobs, shape, params: dict) -> devices.Opened:
        return devices.open_mesh(self.ttnn, shape, params)

    def diagnostics(self, mesh) -> list[str]:
        return []  # a card records no stray access


Backend = SimBackend | CardBackend


def choose_backend(*, hil: bool, cards: list[int] | None = None, probe: bool = True) -> Backend:
    """ttsim, or the real ttnn on the selected ``cards``. ``probe``: check the cards first in a
    subprocess (fail closed with BackendRefused); a pytest ``--hil`` session has already done so
    before any test ran."""
    if not hil:
        import ttsim

        return SimBackend(ttsim)
    if not probe:
        import ttnn  # the session probe already proved this is the real package with cards behind it

        return CardBackend(ttnn)
    from hil import cards as hil_cards

    try:
        ttnn, pr = hil_cards.real_ttnn(cards)
    except hil_cards.Refused as exc:
        raise BackendRefused(str(exc)) from None
    return CardBackend(ttnn, hardware={
        "card_ids": pr.card_ids, "ttnn_version": pr.ttnn_version, "python": pr.python,
        "knobs": "the seed's workload and host-side knobs as on ttsim; readback_lag is not applied "
                 "(the cards' own timing is the fault source)"})


# -- the user's generator: named by the run's spec, loaded against its backend -----------------

@contextlib.contextmanager
def generator_loaded(spec: RunSpec) -> Iterator[UserGenerator | None]:
    """The generator ``spec`` names (None: ours), loaded against the spec's backend and held
    loaded for the block (harness.loader.loaded); what cannot be loaded is a UsageError, in
    one line, before any device opens."""
    backend = spec.backend or choose_backend(hil=False)
    with contextlib.ExitStack() as stack:
        try:  # only loading is bad input; what the block raises passes through
            user = stack.enter_context(loaded(spec.generator, backend.ttnn))
        except GeneratorSpecError as exc:
            raise UsageError(str(exc)) from None
        yield user


def honoured_flags(user: UserGenerator | None) -> tuple:
    """The flags a generator switches: the user's, or every flag (ours)."""
    from model.flags import ALL_FLAGS

    return user.honoured if user is not None else ALL_FLAGS


def check_arms(arms, user: UserGenerator | None) -> None:
    """Refuse, in one line, an arm ``user``'s generator cannot have: one that sets a switch
    the generator does not honour (it would run ``as-is`` under another name)."""
    from model.flags import AS_IS, unhonoured

    for arm in arms:
        missing = unhonoured(arm, honoured_flags(user))
        if missing:
            raise UsageError(f"arm {arm!r} needs {', '.join(missing)}, which {user.spec.text} does not honour "
                             f"(its ttsim_flags: {', '.join(user.honoured) or 'none'}); run --arms {AS_IS}, or "
                             f"declare the flags it switches")


def _load(spec: RunSpec, ttnn) -> UserGenerator:
    from harness.loader import load

    try:
        return load(spec.generator, ttnn)
    except GeneratorSpecError as exc:
        raise UsageError(str(exc)) from None


class GeneratorFailed(RuntimeError):
    """The user's generator raised while serving a seed: one line with the seed's replay command."""


def generator_errors() -> tuple:
    """What a user's generator can fail with (evaluated only when something was raised)."""
    from model.protocol import GeneratorProtocolError

    from harness.deadline import CallDeadlineExceeded

    return GeneratorFailed, GeneratorProtocolError, CallDeadlineExceeded


# -- the system under test ----------------------------------------------------------------------

@functools.lru_cache(maxsize=4)
def _weights(config_name: str, seed: int):
    from model import config as mc
    from model.weights import generate_weights

    return generate_weights(getattr(mc, config_name), seed)


def model_config(model: str):
    """The config of ``model`` (one of MODELS)."""
    if model not in MODELS:
        raise KeyError(f"unknown model {model!r}; choose from {', '.join(MODELS)}")
    if model == "markov":
        from model.markov import MARKOV

        return MARKOV
    from model import config as mc

    return getattr(mc, model.upper())


def on_cards(backend) -> bool:
    return isinstance(backend, CardBackend)


class System:
    """A fresh seeded mesh with the model on it (one per scenario run, so seeds replay alone).

    ``spec`` decides it: its seed, its model ("markov", the sweep model: full serving-path
    fidelity, no transformer math; "tiny" or "small", the Qwen3.6-style hybrid presets), its
    mesh (1x1 or 1x2), its backend (None: ttsim; see :func:`choose_backend`) and the generator
    it builds (the user's when the spec names one). It opens the mesh through hil.devices with
    ``device_params`` (default: production's, SERVING_DEVICE_PARAMS), seeded and under the
    seed's device knobs where it has them (ttsim's readback lag).
    """

    def __init__(self, spec: RunSpec, knobs: FaultKnobs, *, weight_seed: int = 0, device_params: dict | None = None):
        self.spec = spec
        self.config = model_config(spec.model)
        self.backend = choose_backend(hil=False) if spec.backend is None else spec.backend
        self.ttnn = self.backend.ttnn
        #: the user's generator, loaded against this system's ttnn (None: ours)
        self.user = None if spec.generator is None else _load(spec, self.ttnn)
        params = SERVING_DEVICE_PARAMS if device_params is None else device_params
        self._opened = self.backend.open(spec.seed, knobs, self.ttnn.MeshShape(1, spec.mesh_cols), params)
        self.mesh = self._opened.mesh
        if spec.model == "markov":
            from model.markov import MarkovModel

            self.model = MarkovModel(self.ttnn, self.mesh, self.config, max_slots=MAX_SLOTS)
        else:
            from model.qwen36 import Qwen36Model

            self.model = Qwen36Model(self.ttnn, self.mesh, self.config, _weights(spec.model.upper(), weight_seed),
                                     max_slots=MAX_SLOTS, num_blocks=NUM_BLOCKS)
        self.max_pages = self.config.max_context // BLOCK_SIZE

    def generator(self, cls=None, **kw):
        """A generator of this system's model: ``cls``, else the user's (the spec's), else
        model.generator.Generator; ``kw``: its flags (or a shared-arms generator's arms) and
        options (the factory signature in harness.loader)."""
        from model.generator import Generator
        from model.protocol import check

        user = None if cls is not None else self.user
        factory = cls or (user.factory if user is not None else Generator)
        try:
            gen = factory(self.model, self.ttnn, self.mesh, max_context=self.config.max_context,
                          max_pages=self.max_pages, max_slots=MAX_SLOTS, **kw)
        except Exception as exc:  # the user's constructor: one line, as a raising import is
            if user is None:
                raise
            raise GeneratorFailed(f"--generator: building {user.spec.text} raised {type(exc).__name__}: {exc}") from exc
        if user is not None:
            check(gen, f"--generator {user.spec.text} built a {type(gen).__name__}, which")
        return gen

    def kv_cache_spec(self, blocks: int):
        """What the plugin asks the model class to allocate: vLLM's paged KV spec over ``blocks``
        blocks, one entry per attention layer (the GDN layers' state is per slot, not paged)."""
        import torch

        from model.serving import KvCacheSpec

        c = self.config  # the numbers harness.engine.config.kv_spec gives vLLM (its dtype float32)
        layers = len(c.attention_layers) if hasattr(c, "attention_layers") else 1
        return KvCacheSpec((blocks, getattr(c, "num_kv_heads", 1), BLOCK_SIZE, getattr(c, "head_dim", 32)),
                           torch.float32, layers)

    def close(self) -> None:
        devices.close(self.ttnn, self._opened)


def bucket_policy(knobs: FaultKnobs, seed: int):
    """The decode bucket for a batch of ``rows``: the nearest, or with the seed's churn knob a
    bigger one (a forced batch-bucket change)."""
    from model.generator import BUCKETS, nearest_bucket

    rng = seeds.stream("bucket-churn", seed=seed)

    def policy(rows: int) -> int:
        b = nearest_bucket(rows)
        if knobs.bucket_churn and rng.random() < knobs.bucket_churn:
            bigger = [x for x in BUCKETS if x > b]
            if bigger:
                return bigger[int(rng.integers(len(bigger)))]
        return b

    return policy


def scratch_allocations(system: System, knobs: FaultKnobs, seed: int):
    """Allocator reuse knob: short-lived device buffers between steps (host-side sampling
    scratch, logits copies) that shift where later allocations land."""
    if not knobs.scratch_allocs:
        return None
    import torch

    rng = seeds.stream("scratch", seed=seed)

    def scratch():
        if rng.random() < knobs.scratch_allocs:
            n = int(rng.integers(1, 9)) * 32
            t = system.ttnn.from_torch(
                torch.randn(1, n, generator=torch.Generator().manual_seed(int(rng.integers(2**31)))),
                dtype=system.ttnn.bfloat16, device=system.mesh)
            system.ttnn.deallocate(t)

    return scratch


def build_runner(system: System, flags: GeneratorFlags, knobs: FaultKnobs, *, on_merge=None,
                 shared_arms: dict[str, GeneratorFlags] | None = None, start: bool = True, guard=None):
    """The model runner both serving paths drive: the in-process ``Engine`` (sweeps) and
    vLLM's real EngineCore through the ``harness.vllm`` worker, as ``system.spec`` says (its
    step policy's decode layout, its sampling mode, our generator's options). Returns
    (generator, runner). ``shared_arms``: decide every merge for these arms at once
    (harness.shared_arms) instead of for ``flags`` alone. ``start=False``: the caller starts it
    later (``runner.start()``; the served worker does in ``compile_or_warm_up_model``, where
    the plugin warms up). ``guard``: the deadline on each call into the generator
    (harness.deadline; None: none)."""
    from model.serving import TTRunner, unguarded

    spec = system.spec
    kw = {"bucket_policy": bucket_policy(knobs, spec.seed), **spec.generator_options}
    if shared_arms is None:
        gen = system.generator(flags=flags, **kw)
    else:
        from harness.shared_arms import SharedArmsGenerator

        gen = system.generator(SharedArmsGenerator, arms=shared_arms, **kw)
    runner = TTRunner(gen, system.ttnn, max_slots=MAX_SLOTS, max_pages=system.max_pages,
                      prefill_chunk=system.config.prefill_chunk, kv=system.kv_cache_spec(knobs.kv_blocks),
                      scratch=scratch_allocations(system, knobs, spec.seed), on_merge=on_merge,
                      plugin_layout=spec.step_policy.plugin_layout, sample_on_device=spec.sample_on_device,
                      guard=guard or unguarded, trace_prefill=spec.trace_mode.trace_prefill,
                      decode_first=spec.trace_mode.decode_first)
    if start:
        runner.start()
    return gen, runner


def make_scheduler(spec: RunSpec, num_blocks: int = NUM_BLOCKS):
    """vLLM's real scheduler for ``spec``'s model on the runner's geometry (harness.engine.config):
    the class its step policy names, on ``num_blocks`` KV blocks."""
    from harness.engine.config import make_scheduler as vllm_scheduler

    return vllm_scheduler(spec.model, model_config(spec.model), spec.step_policy, num_blocks=num_blocks,
                          max_batched=MAX_BATCHED, max_slots=MAX_SLOTS, block_size=BLOCK_SIZE)
