"""The ttsim worker: vLLM's EngineCore drives the project's ``TTRunner`` on a seeded ttsim mesh.

Read once at worker start, as production does: the fix flags (``model.flags.GeneratorFlags.from_env``:
QWEN36_PREFILLED_SLOTS_FIX, QWEN36_MERGE_BATCH_GUARD, QWEN36_POSITION_CLAMP, ...),
``QWEN36_SDPA_STREAMING`` and ``TTSIM_SEED`` (the device's seed: junk in never-written
memory, command-queue lag, and the seed's swarm knobs). A bad value refuses to start,
naming the variable. ``--additional-config`` takes ``{"mesh_cols": 1|2, "knobs": "swarm"|"quiet"}``.

Async scheduling: ``execute_model`` enqueues the step on the
device and returns nothing; ``sample_tokens`` hands back an ``AsyncModelRunnerOutput`` whose
``get_output`` reads the device only when EngineCore blocks on it (one step later).
"""

from __future__ import annotations

import logging
import time

import torch
from vllm.v1.kv_cache_interface import FullAttentionSpec
from vllm.v1.outputs import EMPTY_MODEL_RUNNER_OUTPUT, AsyncModelRunnerOutput
from vllm.v1.worker.worker_base import CompilationTimes, WorkerBase

from .settings import read_start_env

log = logging.getLogger("ttsim_vllm")
if not log.handlers:  # the worker runs in vLLM's engine process; make our lines reach its log
    _h = logging.StreamHandler()
    _h.setFormatter(logging.Formatter("(ttsim) %(levelname)s %(message)s"))
    log.addHandler(_h)
    log.setLevel(logging.INFO)
    log.propagate = False

KV_LAYER = "model.layers.3.self_attn.attn"


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
        from fixtures.scenario import MAX_SLOTS, NUM_BLOCKS, System
        from fixtures.workloads import FaultKnobs

        from .modeldir import read_model

        try:
            self.flags, self.streaming, self.seed = read_start_env()
        except ValueError as exc:
            log.error("ttsim worker refuses to start: %s", exc)
            raise
        extra = dict(self.vllm_config.additional_config or {})
        mesh_cols = extra.pop("mesh_cols", 1)
        knob_mode = extra.pop("knobs", "swarm")
        if extra:
            raise ValueError(f"--additional-config: unknown key(s) {sorted(extra)}; known: mesh_cols, knobs")
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
        t0 = time.perf_counter()
        # the one call that opens the worker's mesh (fixtures.scenario.System, as the sweeps)
        # production's device parameters (the vLLM plugin's trace region): System's default
        self.system = System(self.seed, self.knobs, model=self.model_name, mesh_cols=mesh_cols)
        self.open_s = time.perf_counter() - t0
        log.info("ttsim mesh 1x%d open: seed %d, model %s, flags %s, knobs %s", mesh_cols, self.seed,
                 self.model_name, self.flags, self.knobs.describe())

    def load_model(self, *, load_dummy_weights: bool = False) -> None:
        from fixtures.scenario import build_runner

        # weights are generated from a seed when System builds the model; here the runner
        self.generator, self.model_runner = build_runner(self.system, self.flags, self.knobs, self.seed)
        self._pending = None

    def get_model(self):
        return self.system.model

    def get_supported_tasks(self):
        return ("generate",)

    # -- KV cache ---------------------------------------------------------------------------
    def _spec(self) -> FullAttentionSpec:
        cfg = self.system.config
        heads = getattr(cfg, "num_kv_heads", 1)
        head = getattr(cfg, "head_dim", 32)
        return FullAttentionSpec(block_size=cfg.block_size, num_kv_heads=heads, head_size=head, dtype=torch.float32)

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
        from fixtures.scenario import NUM_BLOCKS

        if kv_cache_config.num_blocks > NUM_BLOCKS:
            raise ValueError(f"vLLM planned {kv_cache_config.num_blocks} KV blocks; the device cache has {NUM_BLOCKS}")
        self.cache_config.num_gpu_blocks = kv_cache_config.num_blocks

    def update_max_model_len(self, max_model_len: int) -> None:
        self.model_config.max_model_len = max_model_len

    def compile_or_warm_up_model(self) -> CompilationTimes:
        """Capture every decode trace and run one prefill chunk (the chunked-prefill SDPA
        kernel logs the streaming banner on first dispatch), then print the readiness banner."""
        t0 = time.perf_counter()
        self.generator.warm_up()
        cfg = self.system.config
        if self.model_name != "markov":
            row = torch.zeros(self.system.max_pages, dtype=torch.int32)  # vLLM's null block 0
            self.system.model.prefill(list(b"warm-up" * (cfg.prefill_chunk // 7)), slot=0, page_table_row=row)
        log.info("warm-up: %d decode traces captured, prefill kernel run in %.2f s",
                 len(self.generator._traces), time.perf_counter() - t0)
        if self.model_name == "markov":
            # no attention layer: no SDPA kernel runs, so no banner (the readiness probe fails closed)
            sdpa = "no SDPA (sweep model)"
        elif self.streaming:
            # the kernel logged it on dispatch (ttsim's logger); repeat it in the worker's log
            log.warning("QWEN36_SDPA_STREAMING engaged")
            sdpa = "streaming SDPA"
        else:
            sdpa = "legacy SDPA"
        log.info("ttsim worker ready: %s", sdpa)
        return CompilationTimes(language_model=0.0, encoder=0.0)

    # -- steps ------------------------------------------------------------------------------
    def execute_model(self, scheduler_output):
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
            self.generator.release()
            system.close()
