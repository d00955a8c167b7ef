"""Pure-torch numerical kernels wrapped by ttsim's device layer (no ttsim imports here)."""

from .attention import (
    SKIP_POSITION,
    chunked_sdpa_paged,
    paged_fill_cache,
    paged_sdpa_decode,
    paged_update_cache,
    sdpa_legacy,
    sdpa_streaming,
)

__all__ = [
    "SKIP_POSITION",
    "chunked_sdpa_paged",
    "paged_fill_cache",
    "paged_sdpa_decode",
    "paged_update_cache",
    "sdpa_legacy",
    "sdpa_streaming",
]
