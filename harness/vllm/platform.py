"""The ttsim platform for vLLM 0.33 (out of tree: ``PlatformEnum.OOT``)."""

from __future__ import annotations

import torch
from vllm.platforms.interface import Platform, PlatformEnum

from harness.base.spec import DEFAULT_STEP_POLICY, STEP_POLICIES, StepPolicy


def step_policy(additional_config) -> StepPolicy:
    """``--additional-config``'s ``step_policy`` (default: the plugin's, "phased"), checked."""
    name = (additional_config or {}).get("step_policy", DEFAULT_STEP_POLICY.name)
    if name not in STEP_POLICIES:
        raise ValueError(f"--additional-config step_policy must be one of {', '.join(STEP_POLICIES)}, got {name!r}")
    return STEP_POLICIES[name]


class TtsimPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name = "ttsim"
    # the worker's torch tensors (block tables, host mirrors) live on the CPU; the model's
    # tensors live on the ttsim mesh, which torch never sees
    device_type = "cpu"
    dispatch_key = "CPU"
    dist_backend = "gloo"
    # the Tenstorrent plugin's device-control variable (cards by id)
    device_control_env_var = "TT_VISIBLE_DEVICES"

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.float32, torch.bfloat16]

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return "ttsim p150a"

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return 32 * 1024**3  # one p150a: 32 GB DRAM

    @classmethod
    def inference_mode(cls):
        return torch.no_grad()

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        return False

    @classmethod
    def check_and_update_config(cls, vllm_config) -> None:
        pc = vllm_config.parallel_config
        if pc.worker_cls == "auto":
            pc.worker_cls = "harness.vllm.worker.TtsimWorker"
        if pc.world_size != 1:
            # TP=2 is the mesh inside one worker (the model all-reduces across it), as on cards
            raise ValueError(f"ttsim: one worker drives the whole mesh; got tensor/pipeline parallel "
                             f"world size {pc.world_size} (use --additional-config '{{\"mesh_cols\": 2}}')")
        pc.distributed_executor_backend = "uni"
        # the Tenstorrent plugin's check_and_update_config sets its own scheduler class
        # (TTScheduler: all-prefill or all-decode steps); "mixed" keeps vLLM's stock steps
        vllm_config.scheduler_config.scheduler_cls = step_policy(vllm_config.additional_config).scheduler_cls
        # no torch.compile / CUDA graphs: the decode is a ttnn trace captured by the generator
        from vllm.config import CompilationMode, CUDAGraphMode

        cc = vllm_config.compilation_config
        cc.mode = CompilationMode.NONE
        cc.cudagraph_mode = CUDAGraphMode.NONE
        vllm_config.model_config.enforce_eager = True if vllm_config.model_config else None

    @classmethod
    def validate_request(cls, processed_inputs, params) -> None:
        """The runner samples greedily on the device (argmax into the trace's token buffer);
        anything else is refused as a client error (HTTP 400) naming the parameter."""
        from vllm.exceptions import VLLMValidationError
        from vllm.sampling_params import SamplingParams

        if not isinstance(params, SamplingParams):
            raise VLLMValidationError("ttsim serves generation only")
        if params.temperature not in (0, 0.0):
            raise VLLMValidationError("ttsim samples greedily on the device (argmax): pass temperature=0",
                                      parameter="temperature", value=params.temperature)
        if params.structured_outputs is not None:
            raise VLLMValidationError("ttsim does not apply structured-output grammars (sampling is on the device)",
                                      parameter="structured_outputs")
        if params.logprobs or params.prompt_logprobs:
            raise VLLMValidationError("ttsim returns no logprobs (sampling is on the device)", parameter="logprobs")
