"""Every environment variable the system under test reads, read here and nowhere else.

Production reads its switches once, at start: the fix flags (QWEN36_PREFILLED_SLOTS_FIX,
QWEN36_MERGE_BATCH_GUARD, QWEN36_POSITION_CLAMP, QWEN36_ASYNC_MERGE and the two candidate
fixes; see model.flags.GeneratorFlags.ENV).
"""

from __future__ import annotations

import os

from .flags import GeneratorFlags


def generator_flags(env=None) -> GeneratorFlags:
    """The fix flags as the process environment (or ``env``) sets them; ValueError names a bad variable."""
    return GeneratorFlags.from_env(os.environ if env is None else env)
