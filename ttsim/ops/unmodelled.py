"""Refusing keywords ttsim does not model (see ttsim/hints.py for the rule).

A keyword that would change values on a card must either be modelled or refused here when
given anything but its default: accepting and ignoring it would be a silent wrong answer.
"""

from __future__ import annotations

from ..types import TTFatal


def refuse_unmodelled(op: str, **given) -> None:
    """TT_FATAL naming the first keyword that is set (not None / False / 0 / empty)."""
    for name, value in given.items():
        if value is None or value is False or (isinstance(value, (list, tuple)) and not value):
            continue
        if isinstance(value, int) and not isinstance(value, bool) and value == 0:
            continue
        raise TTFatal(f"{op}: {name}={value!r} is not modelled by ttsim")
