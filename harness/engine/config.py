"""vLLM's configuration for the runner's geometry: one architecture, one model directory,
one KV-cache spec, shared by the in-process sweeps and the served worker.

The sweeps build vLLM's real ``AsyncScheduler`` from it; the worker hands vLLM the same
KV spec. Nothing is downloaded: the model directory is generated (harness.engine.modeldir).
"""

from __future__ import annotations

import functools
import tempfile

from harness.engine.prepare import prepare_vllm

#: the one attention layer vLLM allocates blocks for (the GDN layers' state is per slot on the device)
KV_LAYER = "model.layers.3.self_attn.attn"


def kv_spec(config, block_size: int):
    """The paged KV cache's spec as vLLM sees it: ``[blocks, kv_heads, block_size, head_dim]``."""
    import torch
    from vllm.v1.kv_cache_interface import FullAttentionSpec

    return FullAttentionSpec(block_size=block_size, num_kv_heads=getattr(config, "num_kv_heads", 1),
                             head_size=getattr(config, "head_dim", 32), dtype=torch.float32)


@functools.lru_cache(maxsize=None)
def model_dir(model: str) -> str:
    """A generated model directory for ``model``, once per process."""
    from harness.engine import modeldir

    return modeldir.write(tempfile.mkdtemp(prefix="ttsim-vllm-"), model)


@functools.lru_cache(maxsize=None)
def vllm_config(model: str, max_len: int, num_blocks: int, max_batched: int, max_slots: int, block_size: int,
                prefix_caching: bool = False):
    """The engine settings: ``max_slots`` sequences, chunked prefill of ``max_batched`` tokens,
    async scheduling; prefix caching only where the served engine has it (the sweeps: off)."""
    prepare_vllm()
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig

    from harness.engine.arch import register_arch

    register_arch()
    model_config = ModelConfig(model=model_dir(model), skip_tokenizer_init=True, max_model_len=max_len,
                               dtype="float32", seed=0)
    sched = SchedulerConfig(max_num_seqs=max_slots, max_num_batched_tokens=max_batched, enable_chunked_prefill=True,
                            async_scheduling=True, max_model_len=max_len, is_encoder_decoder=False)
    cfg = VllmConfig(model_config=model_config, scheduler_config=sched,
                     cache_config=CacheConfig(block_size=block_size, enable_prefix_caching=prefix_caching),
                     device_config=DeviceConfig(device="cpu"))
    cfg.cache_config.num_gpu_blocks = num_blocks
    return cfg


def scheduler_class(policy, cfg):
    """The scheduler class a step policy (harness.base.spec.StepPolicy) names, imported; vLLM's
    own choice on ``cfg`` where it names none (as EngineCore's ``get_scheduler_cls``)."""
    import importlib

    if policy.scheduler_cls is None:
        return cfg.scheduler_config.get_scheduler_cls()
    module, _, name = policy.scheduler_cls.rpartition(".")
    return getattr(importlib.import_module(module), name)


def make_scheduler(model: str, config, policy, *, num_blocks: int, max_batched: int, max_slots: int,
                   block_size: int):
    """vLLM's real scheduler over ``num_blocks`` KV blocks of ``config``'s model, of the class
    ``policy`` names: vLLM's ``AsyncScheduler`` (mixed steps), or the Tenstorrent plugin's
    all-prefill-or-all-decode steps on it (phased: harness.engine.scheduler)."""
    cfg = vllm_config(model, config.max_context, num_blocks, max_batched, max_slots, block_size)
    return scheduler_for(cfg, config, num_blocks, scheduler_class(policy, cfg))


def scheduler_for(cfg, config, num_blocks: int, cls):
    """Scheduler class ``cls`` on vLLM config ``cfg`` over ``num_blocks`` KV blocks of ``config``'s
    model (the served engine's replay hands the worker's own config and the class it names)."""
    from vllm.v1.core.kv_cache_utils import resolve_kv_cache_block_sizes
    from vllm.v1.kv_cache_interface import KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    kv = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                       kv_cache_groups=[KVCacheGroupSpec([KV_LAYER], kv_spec(config, cfg.cache_config.block_size))])
    sched_bs, hash_bs = resolve_kv_cache_block_sizes(kv, cfg)
    return cls(vllm_config=cfg, kv_cache_config=kv, structured_output_manager=StructuredOutputManager(cfg),
               block_size=sched_bs, hash_block_size=hash_bs, log_stats=False)
