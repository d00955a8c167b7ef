"""Every environment variable the system under test reads, read here and nowhere else.

Production reads its switches once, at start: the fix flags (QWEN36_PREFILLED_SLOTS_FIX,
QWEN36_MERGE_BATCH_GUARD, QWEN36_POSITION_CLAMP, QWEN36_ASYNC_MERGE and the two candidate
fixes; see model.flags.GeneratorFlags.ENV) and the prefill attention path,
``QWEN36_SDPA_STREAMING``: ``"1"`` selects streaming (production's patch 0020: chunked SDPA
over the paged KV cache); anything else, unset included, the legacy path (earlier K/V
materialised, full-sequence SDPA with an explicit causal-offset mask). The model takes the
choice as a constructor argument; only a model built without one reads it here.
"""

from __future__ import annotations

import os
from typing import Mapping

from .flags import GeneratorFlags

STREAMING_ENV = "QWEN36_SDPA_STREAMING"

#: the line production's readiness probe requires in the server log when streaming is engaged
STREAMING_BANNER = "QWEN36_SDPA_STREAMING engaged"


def generator_flags(env=None) -> GeneratorFlags:
    """The fix flags as the process environment (or ``env``) sets them; ValueError names a bad variable."""
    return GeneratorFlags.from_env(os.environ if env is None else env)


def sdpa_streaming(env: Mapping[str, str] | None = None) -> bool:
    """True iff ``QWEN36_SDPA_STREAMING`` is exactly ``"1"`` in the process environment (or ``env``)."""
    return (os.environ if env is None else env).get(STREAMING_ENV) == "1"
