"""``ttnn.transformer``: attention and gated-delta-rule ops under their real names."""

from .ops.attention import (
    chunk_gated_delta_rule,
    chunked_scaled_dot_product_attention,
    fused_recurrent_gated_delta_rule,
    paged_scaled_dot_product_attention_decode,
    scaled_dot_product_attention,
    scaled_dot_product_attention_decode,
)

__all__ = [
    "chunk_gated_delta_rule",
    "chunked_scaled_dot_product_attention",
    "fused_recurrent_gated_delta_rule",
    "paged_scaled_dot_product_attention_decode",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_decode",
]


def joint_scaled_dot_product_attention(input_tensor_q, input_tensor_k, input_tensor_v, joint_tensor_q, joint_tensor_k,
                                       joint_tensor_v, *, joint_strategy: str, program_config, scale=None,
                                       compute_kernel_config=None):
    """Not modelled: refused by name (the joint layout and its output split are not pinned down
    from tt-metal's tests; a guess would be a silent wrong answer)."""
    from .types import TTFatal

    raise TTFatal("transformer.joint_scaled_dot_product_attention is not modelled by ttsim")


__all__.append("joint_scaled_dot_product_attention")
