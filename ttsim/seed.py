"""One seed fixes every random byte ttsim produces.

The seed comes from ``TTSIM_SEED`` (default :data:`DEFAULT_SEED`) or :func:`set_seed`.
Every consumer derives its own named stream from it (``stream("device", 3, "queue")``),
so adding a device or a new consumer never perturbs the bytes another one sees.
Derivation uses SHA-256 of the names, never Python's ``hash``, so results do not
depend on ``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib

import numpy as np

from . import settings

DEFAULT_SEED = 20260531

_seed: int | None = None


def parse_seed(value: str, what: str = "TTSIM_SEED") -> int:
    """A seed from text (decimal or 0x...), or ValueError naming ``what``."""
    try:
        seed = int(value, 0)
    except ValueError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if seed < 0:
        raise ValueError(f"{what} must be >= 0, got {seed}")
    return seed


def get_seed() -> int:
    """The seed in force: set_seed() wins, then TTSIM_SEED, then DEFAULT_SEED."""
    global _seed
    if _seed is None:
        env = settings.seed_text()
        _seed = parse_seed(env, settings.SEED_ENV) if env else DEFAULT_SEED
    return _seed


def set_seed(seed: int) -> None:
    """Fix the seed for devices opened from now on."""
    global _seed
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    _seed = seed


def derive(*names: object, seed: int | None = None) -> int:
    """A 64-bit key for the stream named by ``names`` under ``seed``."""
    text = "/".join([str(get_seed() if seed is None else seed), *map(str, names)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def stream(*names: object, seed: int | None = None) -> np.random.Generator:
    """An independent, reproducible random stream named by ``names``."""
    return np.random.Generator(np.random.Philox(key=derive(*names, seed=seed)))


_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def junk_bytes(key: int, start: int, nbytes: int) -> np.ndarray:
    """Deterministic junk for byte addresses [start, start + nbytes).

    A counter-based hash (splitmix64) of the 8-byte word index, so the junk at an
    address depends only on (key, address), never on allocation order.
    """
    if nbytes <= 0:
        return np.zeros(0, dtype=np.uint8)
    first, last = start // 8, (start + nbytes + 7) // 8
    with np.errstate(over="ignore"):
        z = np.arange(first, last, dtype=np.uint64) * _GOLDEN + np.uint64(key)
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        z = z ^ (z >> np.uint64(31))
    raw = z.view(np.uint8)
    off = start - first * 8
    return raw[off : off + nbytes].copy()
