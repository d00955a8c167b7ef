"""Every environment variable ttsim reads, read here and nowhere else.

TTSIM_SEED       the seed when none was set in-process (``ttsim.set_seed`` wins)
TTSIM_NUM_CHIPS  chips in the simulated system (default 2: the production host's two p150a)
"""

from __future__ import annotations

import os

SEED_ENV = "TTSIM_SEED"
NUM_CHIPS_ENV = "TTSIM_NUM_CHIPS"


def seed_text() -> str | None:
    """TTSIM_SEED as written (parsed by ``ttsim.seed.parse_seed``), or None when unset/empty."""
    return os.environ.get(SEED_ENV) or None


def num_chips_text(default: int) -> str:
    return os.environ.get(NUM_CHIPS_ENV, str(default))
