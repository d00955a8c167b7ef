"""A per-slot state gather's remap, checked: new slot ``i`` takes old slot ``remap[i]``.

Both models validate with this one function (the sweep model has no per-slot state, so
validating is all its ``gather_slots`` does), so a bad remap is refused with the same
message whichever model is under test.
"""

from __future__ import annotations


def check_remap(remap, max_slots: int) -> list[int]:
    """``remap`` (a list of ints, or a 1-D int tensor) as a list of ints, or ValueError naming
    the problem: not a sequence, a wrong length, a non-int entry, an entry out of range, a
    repeated old slot (so another is missing)."""
    values = remap.tolist() if hasattr(remap, "tolist") else remap
    if isinstance(values, (str, bytes)) or not hasattr(values, "__len__"):
        raise ValueError(f"gather_slots: remap must be a list of {max_slots} slot ids, got {type(remap).__name__}")
    values = list(values)
    if len(values) != max_slots:
        raise ValueError(f"gather_slots: remap must name one old slot for each of the {max_slots} slots, "
                         f"got {len(values)} entries")
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"gather_slots: remap[{i}] must be an int slot id, got {v!r}")
        if not 0 <= v < max_slots:
            raise ValueError(f"gather_slots: remap[{i}] = {v} is outside 0..{max_slots - 1}")
    seen: dict[int, int] = {}
    for i, v in enumerate(values):
        if v in seen:
            missing = sorted(set(range(max_slots)) - set(values))
            raise ValueError(f"gather_slots: remap is not a permutation of 0..{max_slots - 1}: old slot {v} is "
                             f"taken by new slots {seen[v]} and {i}, and old slot {missing[0]} by none")
        seen[v] = i
    return values
