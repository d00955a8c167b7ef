"""The ttsim worker: vLLM's EngineCore drives the project's ``TTRunner`` on a seeded ttsim mesh.

Read once at worker start, as production does: the fix flags (``model.flags.GeneratorFlags.from_env``:
QWEN36_PREFILLED_SLOTS_FIX, QWEN36_MERGE_BATCH_GUARD, QWEN36_POSITION_CLAMP, ...),
``QWEN36_SDPA_STREAMING`` (checked here; the model reads it through ``model.settings`` when
it is built and logs the readiness banner itself, which this worker routes into the server
log) and ``TTSIM_SEED`` (the device's seed: junk in never-written memory, command-queue lag,
and the seed's swarm knobs). A bad value refuses to start,
naming the variable. ``--additional-config`` takes ``{"mesh_cols": 1|2, "knobs": "swarm"|"quiet",
"step_policy": "phased"|"mixed"}``: "phased" (default) is the Tenstorrent plugin's scheduler
(harness.vllm.platform sets it) with its decode layout, "mixed" vLLM's stock steps.

Async scheduling: ``execute_model`` enqueues the step on the
device and returns nothing; ``sample_tokens`` hands back an ``AsyncModelRunnerOutput`` whose
``get_output`` reads the device only when EngineCore blocks on it (one step later).
"""

from __future__ import annotations

import logging
import sys
import time

import torch
from vllm.v1.kv_cache_interface import FullAttentionSpec
from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT, AsyncModelRunnerOutput
from vllm.v1.worker.worker_base import CompilationTimes, WorkerBase

from harness.base.settings import read_start_env
from harness.engine.config import KV_LAYER, kv_spec
from harness.engine.sizes import MAX_SLOTS, NUM_BLOCKS
from harness.vllm.platform import step_policy

log = logging.getLogger("harness.vllm")
if not log.handlers:  # the worker runs in vLLM's engine process; make our lines reach its log
    # the interpreter's own stderr, never closed: sys.stderr at import may be a caller's capture
    # (an in-process `ttsim serve-replay` under pytest's capsys), closed long before later lines
    _h = logging.StreamHandler(sys.__stderr__)
    _h.setFormatter(logging.Formatter("(ttsim) %(levelname)s %(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.INFO)
    log.propagate = False
    # the model's own lines (the QWEN36_SDPA_STREAMING banner the readiness probe needs) go to the same log
    _model_log = logging.getLogger("model")
    _model_log.addHandler(_h)
    _model_log.setLevel(logging.INFO)


class _DeviceOutput(AsyncModelRunnerOutput):
    """A step whose sampled tokens are still on the device; read when EngineCore asks."""

    def __init__(self, result):
        self._result = result

    def get_output(self):
        return self._result()

    def get_kv_connector_output(self):
        return None


class TtsimWorker(WorkerBase):
    def init_device(self) -> None:
        import contextlib

        from harness import loader
        from harness.base.spec import RunSpec, parse_generator
        from harness.engine.modeldir import read_model
        from harness.base.settings import read_generator_env
        from harness.system import System, choose_backend
        from harness.workloads import FaultKnobs

        try:
            self.flags, self.streaming, self.seed = read_start_env()
            text, tt_metal = read_generator_env()
            generator = parse_generator(text, tt_metal)
            self.generator_env = None if generator is None else {"spec": text, "tt_metal": tt_metal}
            # the user's generator (TTSIM_GENERATOR) serves, loaded for the worker's lifetime
            self._loaded = contextlib.ExitStack()
            self._loaded.enter_context(loader.loaded(generator, choose_backend(hil=False).ttnn))
            if generator is not None:
                log.info("generator %s (TTSIM_GENERATOR)", text)
        except ValueError as exc:  # GeneratorSpecError is one
            log.error("ttsim worker refuses to start: %s", exc)
            raise
        extra = dict(self.vllm_config.additional_config or {})
        mesh_cols = extra.pop("mesh_cols", 1)
        knob_mode = extra.pop("knobs", "swarm")
        policy = step_policy(extra)  # the platform chose the scheduler from the same key
        extra.pop("step_policy", None)
        # a replay's records appear whole when it finishes (harness.vllm.rerun; never a server's)
        staged = extra.pop("staged_records", False)
        if extra:
            raise ValueError(f"--additional-config: unknown key(s) {sorted(extra)}; known: mesh_cols, knobs, "
                             f"step_policy")
        if mesh_cols not in (1, 2):
            raise ValueError(f"--additional-config mesh_cols must be 1 or 2, got {mesh_cols!r}")
        if knob_mode not in ("swarm", "quiet"):
            raise ValueError(f"--additional-config knobs must be 'swarm' or 'quiet', got {knob_mode!r}")
        self.knobs = FaultKnobs.swarm(self.seed) if knob_mode == "swarm" else FaultKnobs()
        self.model_name = read_model(self.model_config.model)
        if self.scheduler_config.max_num_seqs > MAX_SLOTS:
            raise ValueError(f"--max-num-seqs {self.scheduler_config.max_num_seqs} exceeds the runner's "
                             f"{MAX_SLOTS} slots")
        # the seed's KV budget, but never below one max-length request (+ vLLM's null block):
        # vLLM refuses to start a server whose cache cannot hold --max-model-len
        need = -(-self.model_config.max_model_len // self.cache_config.block_size) + 1
        self.kv_blocks = min(max(self.knobs.kv_blocks, need), NUM_BLOCKS)
        self.device = torch.device("cpu")
        torch.set_num_threads(1)  # two cores shared with the API server process: no OpenMP spinning
        self.spec = RunSpec(seed=self.seed, model=self.model_name, step_policy=policy, mesh_cols=mesh_cols,
                            generator=generator)
        if generator is not None:  # the user's: a wrong output shape is refused now, not served
            from harness.scenario import probe
            from harness.system import generator_errors

            try:
                probe(self.spec)
            except generator_errors() as exc:
                log.error("ttsim worker refuses to start: %s", exc)
                raise
        t0 = time.perf_counter()
        # the one call that opens the worker's mesh (harness.system.System, as the sweeps)
        # production's device parameters (the vLLM plugin's trace region): System's default
        self.system = System(self.spec, self.knobs)
        self.open_s = time.perf_counter() - t0
        log.info("ttsim mesh 1x%d open: seed %d, model %s, flags %s, knobs %s", mesh_cols, self.seed,
                 self.model_name, self.flags, self.knobs.describe())
        from harness.base.records import runs_dir
        from harness.served import READY_PREFIX, ServedRecords

        # every merge decision and every finished request, for `ttsim serve-explain`
        self.records = ServedRecords(runs_dir(), seed=self.seed, model=self.model_name, flags=self.flags,
                                     knobs=knob_mode, step_policy=policy.name, mesh_cols=mesh_cols,
                                     sdpa_streaming=self.streaming, generator=self.generator_env,
                                     staged=staged is True)
        log.info("%s %s", READY_PREFIX, self.records.dir)

    def load_model(self, *, load_dummy_weights: bool = False) -> None:
        from harness.system import build_runner

        # the weights were generated from the seed when System built the model; this builds the
        # runner on the layout of the scheduler the platform chose (default the plugin's: phased
        # steps, condensed rows, slot_remap); it starts in compile_or_warm_up_model, as the plugin's
        self.generator, self.model_runner = build_runner(self.system, self.flags, self.knobs, start=False,
                                                         on_merge=self.records.on_merge)
        self.model_runner.on_finish = self.records.finish
        self.steps = 0  # engine steps executed (the records' admission steps)
        self._pending = None

    def get_model(self):
        return self.system.model

    def get_supported_tasks(self):
        return ("generate",)

    # -- KV cache ---------------------------------------------------------------------------
    def _spec(self) -> FullAttentionSpec:
        return kv_spec(self.system.config, self.system.config.block_size)

    def get_kv_cache_spec(self):
        # one attention group: the GDN layers' conv/recurrent state lives per slot on the
        # device (as in the model), not in vLLM's blocks
        return {KV_LAYER: self._spec()}

    def get_supported_kv_cache_layouts(self) -> list[str]:
        # no vLLM attention backend runs here (the base asks CUDA/CPU backends); the model's
        # paged cache is [blocks, kv_heads, block_size, head_dim] per layer: NHD per block
        return ["NHD"]

    def determine_available_memory(self) -> int:
        # the model's paged KV cache was sized when the model was built: exactly kv_blocks
        return self.kv_blocks * self._spec().page_size_bytes

    def initialize_from_config(self, kv_cache_config) -> None:
        if kv_cache_config.num_blocks > NUM_BLOCKS:
            raise ValueError(f"vLLM planned {kv_cache_config.num_blocks} KV blocks; the device cache has {NUM_BLOCKS}")
        self.cache_config.num_gpu_blocks = kv_cache_config.num_blocks

    def update_max_model_len(self, max_model_len: int) -> None:
        self.model_config.max_model_len = max_model_len

    def compile_or_warm_up_model(self) -> CompilationTimes:
        """The plugin's start-up, once (``TTRunner.start``, as the sweeps): the KV cache through
        the model and the two-phase warm-up; then say which prefill path the model engaged (the
        model logged the streaming banner when it was built)."""
        t0 = time.perf_counter()
        self.model_runner.start()
        log.info("warm-up: the plugin's two-phase warm-up (%s steps) in %.2f s", self.spec.step_policy,
                 time.perf_counter() - t0)
        if self.model_name == "markov":
            # no attention layer, no streaming path: no banner (the readiness probe fails closed)
            sdpa = "no SDPA (sweep model)"
        else:
            sdpa = "streaming SDPA" if self.system.model.sdpa_streaming else "legacy SDPA"
        log.info("ttsim worker ready: %s", sdpa)
        return CompilationTimes(language_model=0.0, encoder=0.0)

    # -- steps ------------------------------------------------------------------------------
    def execute_model(self, scheduler_output):
        self.steps += 1
        for nr in scheduler_output.scheduled_new_reqs:  # the engine's admission schedule, recorded
            self.records.admit(nr.req_id, nr.sampling_params.max_tokens, self.steps)
        result = self.model_runner.execute(scheduler_output)
        if scheduler_output.total_num_scheduled_tokens == 0:
            # EngineCore samples nothing for an empty step and wants its output now
            out = result()
            return out if out.req_ids else EMPTY_MODEL_RUNNER_OUTPUT
        self._pending = result
        return None

    def sample_tokens(self, grammar_output):
        if grammar_output is not None:
            raise RuntimeError("ttsim cannot apply a structured-output grammar (sampling is on the device)")
        result, self._pending = self._pending, None
        if result is None:
            raise RuntimeError("sample_tokens without a preceding execute_model")
        return _DeviceOutput(result)

    def take_draft_token_ids(self):
        return None

    def check_health(self) -> None:
        if getattr(self.system.mesh, "closed", False):
            raise RuntimeError("ttsim mesh is closed")

    def synchronize_device(self) -> None:
        self.system.model.ttnn.synchronize_device(self.system.mesh)

    def shutdown(self) -> None:
        system = getattr(self, "system", None)
        if system is not None and not getattr(system.mesh, "closed", False):
            release = getattr(self.generator, "release", None)  # optional beyond the protocol
            if callable(release):
                release()
            system.close()
        loaded = getattr(self, "_loaded", None)
        if loaded is not None:  # the user's generator's `import ttnn` alias goes with the worker
            loaded.close()
