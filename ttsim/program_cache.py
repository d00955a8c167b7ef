"""The program cache of a device, modelled honestly: an op dispatched with the same program
key as an earlier one (op, input and output tensor specs: shapes, dtypes, layouts, memory
configs) reuses that program; anything else compiles a new entry. tt-metal's tests assert
``device.num_program_cache_entries()`` after running an op twice; this is what they count.

An op may add the attributes tt-metal hashes into its program (``attributes``: SDPA decode
keys its scale, program config, causality and window, as tt-metal's compute_program_hash).
Not modelled elsewhere: attributes that change a real program without changing any tensor
spec (e.g. a different scalar operand of the same shapes counts as a hit here).
"""

from __future__ import annotations


_SPECS: dict[tuple, int] = {}  # every distinct spec seen, numbered in order of first sight


def spec(t) -> int:
    """The part of a tensor a compiled program depends on (never its address or values), as
    the number of its distinct spec: computed once per tensor (a tensor's spec never changes),
    so a dispatch hashes small ints instead of shapes, enums and memory configs."""
    key = t.__dict__.get("_program_spec")
    if key is None:
        mc = t._memory_config
        # an interleaved config compares by value (a frozen dataclass); a sharded one by its text
        full = (tuple(t._shape), t._dtype, t._layout, mc if mc is None or mc.shard_spec is None else repr(mc))
        key = _SPECS.setdefault(full, len(_SPECS))
        t._program_spec = key
    return key


class ProgramCache:
    def __init__(self):
        self.enabled = True
        self._entries: set[tuple] = set()
        self.hits = 0
        self.misses = 0

    def dispatch(self, op: str, inputs, outputs, attributes: tuple = ()) -> None:
        """Record one dispatch of ``op`` (host side, at the call); ``attributes`` (hashable) are
        the op's compiled-in parameters that are part of its program key."""
        if not self.enabled:
            self.misses += 1
            return
        key = (op, attributes, tuple(map(spec, inputs)), tuple(map(spec, outputs)))
        if key in self._entries:
            self.hits += 1
        else:
            self._entries.add(key)
            self.misses += 1

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
