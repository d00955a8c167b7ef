"""Model configuration of the tiny Qwen3.6-style hybrid (Gated DeltaNet + gated attention, 3:1)."""

from __future__ import annotations

from dataclasses import dataclass, fields

TILE = 32


@dataclass(frozen=True)
class ModelConfig:
    """Shapes of the model. Layer ``i`` is full attention iff ``(i + 1) % 4 == 0``
    (three Gated DeltaNet layers, then one gated-attention layer, as Qwen3-Next / Qwen3.6)."""

    vocab_size: int = 256  # byte-level
    hidden_size: int = 64
    num_layers: int = 4
    # gated full attention
    num_heads: int = 4
    num_kv_heads: int = 2
    head_dim: int = 32
    rope_theta: float = 10000.0
    # gated DeltaNet
    linear_num_key_heads: int = 2
    linear_num_value_heads: int = 4
    linear_key_head_dim: int = 32
    linear_value_head_dim: int = 32
    conv_kernel_size: int = 4
    # MLP
    intermediate_size: int = 128
    rms_norm_eps: float = 1e-6
    # serving geometry
    max_context: int = 4096
    block_size: int = 32
    prefill_chunk: int = 128
    sdpa_chunk: int = 32  # SDPA q/k chunk sizes (prefill_chunk must be a multiple)

    # -- derived -------------------------------------------------------------------
    @property
    def rotary_dim(self) -> int:
        """Partial RoPE: the first quarter of each head is rotated (rotate_half convention)."""
        return self.head_dim // 4

    def is_attention_layer(self, i: int) -> bool:
        return (i + 1) % 4 == 0

    @property
    def attention_layers(self) -> list[int]:
        return [i for i in range(self.num_layers) if self.is_attention_layer(i)]

    @property
    def gdn_layers(self) -> list[int]:
        return [i for i in range(self.num_layers) if not self.is_attention_layer(i)]

    @property
    def conv_channels(self) -> int:
        """Channels of the causal depthwise conv: [q | k | v]."""
        return 2 * self.linear_num_key_heads * self.linear_key_head_dim + \
            self.linear_num_value_heads * self.linear_value_head_dim

    @property
    def max_pages(self) -> int:
        return -(-self.max_context // self.block_size)

    # -- validation ----------------------------------------------------------------
    def validate(self, tp: int = 1) -> "ModelConfig":
        """Raise ValueError naming the offending field; returns self."""
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "rope_theta" or f.name == "rms_norm_eps":
                if not isinstance(v, (int, float)) or v <= 0:
                    raise ValueError(f"ModelConfig.{f.name} must be a positive number, got {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"ModelConfig.{f.name} must be a positive int, got {v!r}")
        if isinstance(tp, bool) or not isinstance(tp, int) or tp <= 0:
            raise ValueError(f"tp (tensor-parallel degree) must be a positive int, got {tp!r}")
        for name in ("head_dim", "linear_key_head_dim", "linear_value_head_dim", "hidden_size",
                     "block_size", "sdpa_chunk"):
            if getattr(self, name) % TILE:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)} must be a multiple of {TILE} (tile-aligned)")
        if self.head_dim % 8:
            raise ValueError(f"ModelConfig.head_dim={self.head_dim}: rotary_dim = head_dim // 4 must be even")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"ModelConfig.num_heads={self.num_heads} must be a multiple of "
                             f"num_kv_heads={self.num_kv_heads} (GQA)")
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(f"ModelConfig.linear_num_value_heads={self.linear_num_value_heads} must be a multiple "
                             f"of linear_num_key_heads={self.linear_num_key_heads}")
        for name in ("num_heads", "num_kv_heads", "linear_num_key_heads", "linear_num_value_heads"):
            if getattr(self, name) % tp:
                raise ValueError(f"ModelConfig.{name}={getattr(self, name)} is not divisible by the TP degree {tp}")
        if self.intermediate_size % (TILE * tp):
            raise ValueError(f"ModelConfig.intermediate_size={self.intermediate_size} must be a multiple of "
                             f"{TILE} * tp = {TILE * tp}")
        if self.vocab_size % TILE:
            raise ValueError(f"ModelConfig.vocab_size={self.vocab_size} must be a multiple of {TILE}")
        if self.prefill_chunk % self.block_size or self.prefill_chunk % self.sdpa_chunk:
            raise ValueError(f"ModelConfig.prefill_chunk={self.prefill_chunk} must be a multiple of "
                             f"block_size={self.block_size} and sdpa_chunk={self.sdpa_chunk}")
        if self.max_context % self.block_size:
            raise ValueError(f"ModelConfig.max_context={self.max_context} must be a multiple of "
                             f"block_size={self.block_size}")
        if self.conv_kernel_size < 2:
            raise ValueError(f"ModelConfig.conv_kernel_size={self.conv_kernel_size} must be >= 2")
        if self.num_layers < 1:
            raise ValueError("ModelConfig.num_layers must be >= 1")
        return self


#: The cheapest faithful size (sweeps, CI): 3 GDN layers + 1 attention layer; TP=2 splits every head group.
TINY = ModelConfig()

#: A larger model for benchmarks: 6 GDN + 2 attention layers.
SMALL = ModelConfig(
    hidden_size=256,
    num_layers=8,
    num_heads=8,
    num_kv_heads=2,
    head_dim=64,
    linear_num_key_heads=4,
    linear_num_value_heads=8,
    linear_key_head_dim=64,
    linear_value_head_dim=64,
    intermediate_size=512,
    max_context=8192,
)
