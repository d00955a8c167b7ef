"""``ttnn.experimental``: the experimental ops ttsim mirrors, under their real names.

Use it as ttnn code does: ``ttnn.experimental.rotary_embedding_llama(...)``.
"""

from __future__ import annotations

# -- rotary embeddings (ttsim/ops/rotary.py) ------------------------------------------
from .ops.rotary import rotary_embedding, rotary_embedding_hf, rotary_embedding_llama

# -- paged KV cache ops (ttsim/ops/attention.py) -------------------------------------------
from .ops.attention import paged_fill_cache, paged_fused_update_cache, paged_update_cache
from .ops.layout_ops import view

# -- attention heads and in-place slice writes --------------------------------------------
from .ops.heads import nlp_concat_heads, nlp_concat_heads_decode, nlp_create_qkv_heads, nlp_create_qkv_heads_decode
from .ops.split import slice_write

# -- asynchronous collectives (ttsim/ops/ccl_async.py) and the fast N/C reduction ---------
from .ops.ccl_async import (
    all_gather_async,
    all_gather_minimal_matmul_async,
    matmul_reduce_scatter_async,
    reduce_scatter_minimal_async,
)
from .ops.reduction import fast_reduce_nc

__all__ = [
    "all_gather_async",
    "all_gather_minimal_matmul_async",
    "fast_reduce_nc",
    "matmul_reduce_scatter_async",
    "reduce_scatter_minimal_async",
    "nlp_concat_heads",
    "nlp_concat_heads_decode",
    "nlp_create_qkv_heads",
    "nlp_create_qkv_heads_decode",
    "slice_write",
    "paged_fill_cache",
    "paged_fused_update_cache",
    "paged_update_cache",
    "view",
    "rotary_embedding",
    "rotary_embedding_hf",
    "rotary_embedding_llama",
]
