"""The harness's seed: what it parses, its default, and the named streams the workload draws.

A seed names one workload and one set of knob rates on either backend, so a run on cards
draws its prompts from here and never imports the simulator. ttsim derives its device-side
bytes (junk, lag) from the same seed the same way: the backend hands it the seed when it opens
a mesh (harness.system.Backend.open). The derivation is written here and in ``ttsim/seed.py``
because ttsim imports no package of ours and a card run imports no ttsim; a test pins the two
byte for byte. SHA-256 of the names, never Python's ``hash``: the draws do not depend on
``PYTHONHASHSEED``.
"""

from __future__ import annotations

import hashlib

import numpy as np

#: the seed when none is given (ttsim's own default, so a bare run means one seed everywhere)
DEFAULT_SEED = 20260531


def parse_seed(value: str, what: str) -> int:
    """A seed from text (decimal or 0x...), or ValueError naming ``what``."""
    try:
        seed = int(value, 0)
    except ValueError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if seed < 0:
        raise ValueError(f"{what} must be >= 0, got {seed}")
    return seed


def stream(*names: object, seed: int) -> np.random.Generator:
    """An independent, reproducible random stream named by ``names`` under ``seed``."""
    text = "/".join([str(seed), *map(str, names)])
    key = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    return np.random.Generator(np.random.Philox(key=key))
