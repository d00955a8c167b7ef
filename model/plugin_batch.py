"""The Tenstorrent vLLM plugin's decode layout: persistent batch rows and per-request state slots.

Read from ``tenstorrent/vllm-tt-plugin`` @ e3fc8494 (``model_runner.py`` ``_update_states``,
``_alloc_prefill_state_slots``, ``_decode_state_slot_remap``; ``input_batch.py`` ``condense``);
facts carried over, our code:

- Rows. Each step the persistent batch drops finished requests and every request the step
  does not schedule (in a prefill step, the whole decode batch), then adds the new and the
  re-scheduled ones, filling the smallest freed row first, else appending; holes left are
  closed by moving the last rows down into them. Any of that marks the decode layout as
  changed, sticky until a decode consumes it (``reset_batch``).
- State slots. A request's device state (the model's per-slot state, the trace's token and
  position rows) lives in a state slot that follows the request, not the row. A prefill
  takes its own row's slot unless an off-batch request holds it, else the first free one.
  A decode sends ``slot_remap`` (row ``i`` reads slot ``remap[i]``; the decoding rows' slots
  first, the rest in order) and commits the move: afterwards each request's slot is the row
  its state was gathered to.
"""

from __future__ import annotations


class PluginBatch:
    def __init__(self, capacity: int):
        self.capacity = capacity
        self.rows: list[str | None] = []  # persistent batch: row -> request
        self.slot_of: dict[str, int] = {}  # request -> state slot

    @property
    def row_ids(self) -> list[str]:
        return [r for r in self.rows if r is not None]

    # -- rows (``_update_states``) ---------------------------------------------------------
    def update(self, finished, scheduled, new_ids, cached_ids, live) -> bool:
        """Apply one step; returns whether the persistent batch's layout changed.
        ``scheduled``: the step's request ids; ``new_ids`` / ``cached_ids``: its new and
        cached requests in the scheduler's order; ``live``: requests the runner still holds."""
        changed = False
        removed: list[int] = []
        for rid in finished:
            if rid in self.rows:
                removed.append(self._remove(rid))
                changed = True
        for rid in [r for r in self.rows if r is not None and r not in scheduled]:
            removed.append(self._remove(rid))
            changed = True
        to_add = list(new_ids) + [rid for rid in cached_ids if rid not in self.rows]
        removed.sort(reverse=True)
        for rid in to_add:
            self._add(rid, removed.pop() if removed else None)
            changed = True
        if removed:
            self._condense(removed)
            changed = True
        for rid in [r for r in self.slot_of if r not in live]:  # finished or preempted
            del self.slot_of[rid]
        return changed

    def _remove(self, rid: str) -> int:
        i = self.rows.index(rid)
        self.rows[i] = None
        return i

    def _add(self, rid: str, index: int | None) -> None:
        if index is None:
            index = len(self.row_ids)
        if index >= self.capacity:
            raise RuntimeError(f"persistent batch: row {index} exceeds the capacity {self.capacity}")
        if index == len(self.rows):
            self.rows.append(rid)
        else:
            self.rows[index] = rid

    def _condense(self, empty: list[int]) -> None:
        """Move the last rows down into the holes (``empty``: sorted descending)."""
        n = len(self.row_ids)
        if n == 0:
            self.rows.clear()
            return
        last = n + len(empty) - 1
        while empty:
            while last in empty:
                last -= 1
            hole = empty.pop()
            if hole >= last:
                break
            self.rows[hole], self.rows[last] = self.rows[last], None
            last -= 1
        del self.rows[n:]

    # -- state slots -------------------------------------------------------------------------
    def prefill_slots(self, row_ids: list[str], live) -> list[int]:
        """Each prefilling request's state slot (``_alloc_prefill_state_slots``)."""
        if len(row_ids) > self.capacity:
            raise RuntimeError(f"{len(row_ids)} prefills exceed the {self.capacity} device state slots")
        prefilling = set(row_ids)
        held = {s for rid, s in self.slot_of.items() if rid not in prefilling and rid in live}
        slots = []
        for row, rid in enumerate(row_ids):
            if row in held:
                free = [s for s in range(self.capacity) if s not in held]
                if not free:
                    raise RuntimeError(f"no free device state slot: held={sorted(held)}, map={self.slot_of}")
                row = free[0]
            held.add(row)
            self.slot_of[rid] = row
            slots.append(row)
        return slots

    def decode_remap(self, row_ids: list[str]) -> list[int] | None:
        """The gather taking each decoding request's state to its row, committed to the map
        (``_decode_state_slot_remap``); None when it is the identity."""
        want = []
        for rid in row_ids:
            if rid not in self.slot_of:
                raise RuntimeError(f"decoding request {rid!r} has no device state slot: map={self.slot_of}")
            want.append(self.slot_of[rid])
        if len(set(want)) != len(want):
            raise RuntimeError(f"device state slots are not a permutation: want={want}, map={self.slot_of}")
        remap = want + [s for s in range(self.capacity) if s not in set(want)]
        by_slot: dict[int, list[str]] = {}
        for rid, s in self.slot_of.items():
            by_slot.setdefault(s, []).append(rid)
        moved = dict(self.slot_of)
        for row, s in enumerate(remap):
            for rid in by_slot.get(s, ()):
                moved[rid] = row
        self.slot_of = moved
        return None if remap == list(range(self.capacity)) else remap
