"""The engine's sizes, in one place: the runner's geometry (production's: 8 stable slots, 32-token
blocks), the device's KV cache, and the budgets vLLM's scheduler is configured with, shared by
the in-process sweeps, the served engine (harness.vllm.server) and its replay."""

#: decode rows: the plugin's ``max_batch_size`` (production runs 8 stable slots)
MAX_SLOTS = 8
#: tokens per KV block: vLLM's block size and the device cache's page
BLOCK_SIZE = 32
#: KV blocks the device cache holds (a seed's KV budget is at most this)
NUM_BLOCKS = 48
#: vLLM's ``max_num_batched_tokens``: the prefill chunk one step schedules
MAX_BATCHED = 128
#: the served engine's ``--max-model-len``
MAX_MODEL_LEN = 1024
