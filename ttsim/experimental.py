"""``ttnn.experimental``: the experimental ops ttsim mirrors, under their real names.

Use it as ttnn code does: ``ttnn.experimental.rotary_embedding_llama(...)``.
"""

from __future__ import annotations

# -- rotary embeddings (ttsim/ops/rotary.py) ------------------------------------------
from .ops.rotary import rotary_embedding, rotary_embedding_hf, rotary_embedding_llama

# -- paged KV cache ops (ttsim/ops/attention.py) -------------------------------------------
from .ops.attention import paged_fill_cache, paged_update_cache
from .ops.layout_ops import view

# -- attention heads and in-place slice writes --------------------------------------------
from .ops.heads import nlp_concat_heads, nlp_concat_heads_decode, nlp_create_qkv_heads, nlp_create_qkv_heads_decode
from .ops.split import slice_write

__all__ = [
    "nlp_concat_heads",
    "nlp_concat_heads_decode",
    "nlp_create_qkv_heads",
    "nlp_create_qkv_heads_decode",
    "slice_write",
    "paged_fill_cache",
    "paged_update_cache",
    "view",
    "rotary_embedding",
    "rotary_embedding_hf",
    "rotary_embedding_llama",
]
