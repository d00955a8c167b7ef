"""Contiguous (non-paged) KV cache writes: ttnn.update_cache and ttnn.fill_cache.

Cache ``[B, nkv, S, d]`` (one row of ``S`` positions per user)."""

from __future__ import annotations

from ..tensor import Tensor, _describe
from ..types import TILE_SIZE, TTFatal
from .base import require_device_tensor, require_same_device, run_inplace


def _cache(op: str, cache, x) -> tuple[int, int, int, int]:
    c = require_device_tensor(op, "cache", cache)
    require_device_tensor(op, "input", x)
    require_same_device(op, {"cache": c, "input": x})
    if len(c.shape) != 4 or len(x.shape) != 4:
        raise TTFatal(f"{op}: cache and input must be rank 4: {_describe(c)}, {_describe(x)}")
    return tuple(c.shape)


def update_cache(cache: Tensor, input: Tensor, update_idx: int, *, batch_offset: int = 0,  # noqa: A002
                 compute_kernel_config=None) -> Tensor:
    """Write one token per user at position ``update_idx``: ``input [1, nkv, Bp, d]`` holds the
    users along dim -2 (padded to 32 when B < 32); users ``batch_offset .. batch_offset + B``
    of it go to cache rows ``0 .. B``. In place; returns the cache."""
    op = "update_cache"
    b, nkv, s, d = _cache(op, cache, input)
    xs = tuple(input.shape)
    if xs[0] != 1 or xs[1] != nkv or xs[3] != d:
        raise TTFatal(f"{op}: input must be [1, {nkv}, users, {d}] for cache {_describe(cache)}, got {_describe(input)}")
    if isinstance(update_idx, bool) or not isinstance(update_idx, int) or not 0 <= update_idx < s:
        raise TTFatal(f"{op}: update_idx={update_idx!r} is outside the cache's {s} positions")
    if isinstance(batch_offset, bool) or not isinstance(batch_offset, int) or batch_offset < 0 \
            or batch_offset + b > xs[2]:
        raise TTFatal(f"{op}: batch_offset={batch_offset!r} + {b} users exceeds input's {xs[2]} rows")

    def write(store, x, _chip):
        store[:b, :, update_idx, :] = x[0, :, batch_offset:batch_offset + b, :].transpose(0, 1).to(store.dtype)

    run_inplace(op, cache, [input], write)
    return cache


def fill_cache(cache_tensor: Tensor, input_tensor: Tensor, batch_idx: int, *, update_idx: int = 0) -> Tensor:
    """Write ``input_tensor [1, nkv, s, d]`` into user ``batch_idx`` at positions
    ``update_idx .. update_idx + s`` (``update_idx`` a multiple of 32). In place; returns the cache."""
    op = "fill_cache"
    b, nkv, s, d = _cache(op, cache_tensor, input_tensor)
    xs = tuple(input_tensor.shape)
    if xs[0] != 1 or xs[1] != nkv or xs[3] != d:
        raise TTFatal(f"{op}: input_tensor must be [1, {nkv}, seq, {d}] for cache {_describe(cache_tensor)}, "
                      f"got {_describe(input_tensor)}")
    if isinstance(batch_idx, bool) or not isinstance(batch_idx, int) or not 0 <= batch_idx < b:
        raise TTFatal(f"{op}: batch_idx={batch_idx!r} is outside the cache's {b} users")
    if isinstance(update_idx, bool) or not isinstance(update_idx, int) or update_idx < 0 or update_idx % TILE_SIZE:
        raise TTFatal(f"{op}: update_idx={update_idx!r} must be a non-negative multiple of {TILE_SIZE}")
    if update_idx + xs[2] > s:
        raise TTFatal(f"{op}: update_idx {update_idx} + {xs[2]} positions exceeds the cache's {s}")

    def write(store, x, _chip):
        store[batch_idx, :, update_idx:update_idx + xs[2], :] = x[0].to(store.dtype)

    run_inplace(op, cache_tensor, [input_tensor], write)
    return cache_tensor
