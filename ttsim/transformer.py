"""``ttnn.transformer``: attention and gated-delta-rule ops under their real names."""

from .ops.attention import (
    chunk_gated_delta_rule,
    chunked_scaled_dot_product_attention,
    fused_recurrent_gated_delta_rule,
    paged_scaled_dot_product_attention_decode,
    scaled_dot_product_attention,
    scaled_dot_product_attention_decode,
)
from .ops.joint_attention import joint_scaled_dot_product_attention

__all__ = [
    "chunk_gated_delta_rule",
    "chunked_scaled_dot_product_attention",
    "fused_recurrent_gated_delta_rule",
    "joint_scaled_dot_product_attention",
    "paged_scaled_dot_product_attention_decode",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
]

