"""``ttnn.transformer``: attention and gated-delta-rule ops under their real names."""

from .ops.attention import (
    chunked_scaled_dot_product_attention,
    paged_scaled_dot_product_attention_decode,
    scaled_dot_product_attention,
    scaled_dot_product_attention_decode,
)
from .ops.gdn import chunk_gated_delta_rule, fused_recurrent_gated_delta_rule, gated_delta_attn_seq
from .ops.joint_attention import joint_scaled_dot_product_attention

__all__ = [
    "chunk_gated_delta_rule",
    "chunked_scaled_dot_product_attention",
    "fused_recurrent_gated_delta_rule",
    "gated_delta_attn_seq",
    "joint_scaled_dot_product_attention",
    "paged_scaled_dot_product_attention_decode",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
]

