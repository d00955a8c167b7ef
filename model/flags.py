"""The generator's switchable fixes, and the named arms that combine them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GeneratorFlags:
    """Each production fix, switchable per run.

    prefilled_slots_fix  QWEN36_PREFILLED_SLOTS_FIX: record slots prefilled since the last
                         decode and force the host token for them at the merge.
    merge_batch_guard    QWEN36_MERGE_BATCH_GUARD: production's patch 0022,
                         ``torch.equal(dev_pos != -1, host_pos != -1)`` over the whole bucket
                         (after the clamp); any difference falls back to the host's tokens
                         and positions for every row.
    position_clamp       QWEN36_POSITION_CLAMP: device positions outside [0, max_ctx) are
                         invalid (-1) before any comparison.
    merge                merge device state at batch resets; off = always restage the
                         host's tokens and positions (the pre-merge behaviour).

    Two candidate fixes found with this framework (not in production; off by default):
    merge_from_last_run  QWEN36_MERGE_FROM_LAST_RUN: read the device state from the trace
                         that ran last (where it lives) instead of the trace about to run,
                         whose buffers a bucket change leaves from an older batch.
    synced_merge_reads   QWEN36_SYNCED_MERGE_READS: wait for the merge's own reads (an
                         event recorded after them) instead of the last output's event.
    """

    prefilled_slots_fix: bool = True
    merge_batch_guard: bool = True
    position_clamp: bool = True
    merge: bool = True
    merge_from_last_run: bool = False
    synced_merge_reads: bool = False

    ENV = {
        "prefilled_slots_fix": "QWEN36_PREFILLED_SLOTS_FIX",
        "merge_batch_guard": "QWEN36_MERGE_BATCH_GUARD",
        "position_clamp": "QWEN36_POSITION_CLAMP",
        "merge": "QWEN36_ASYNC_MERGE",
        "merge_from_last_run": "QWEN36_MERGE_FROM_LAST_RUN",
        "synced_merge_reads": "QWEN36_SYNCED_MERGE_READS",
    }
    DEFAULT_OFF = ("merge_from_last_run", "synced_merge_reads")

    @classmethod
    def from_env(cls, env) -> "GeneratorFlags":
        """Flags as production reads them from ``env`` (a mapping; model.settings passes the
        process's): each variable "0"/"1"; unset = on for the production fixes, off for the
        candidates."""
        values = {}
        for field, var in cls.ENV.items():
            raw = env.get(var, "0" if field in cls.DEFAULT_OFF else "1")
            if raw not in ("0", "1"):
                raise ValueError(f"{var} must be 0 or 1, got {raw!r}")
            values[field] = raw == "1"
        return cls(**values)


ARMS: dict[str, GeneratorFlags] = {
    "control": GeneratorFlags(prefilled_slots_fix=False, merge_batch_guard=False, position_clamp=False),
    "slots": GeneratorFlags(prefilled_slots_fix=True, merge_batch_guard=False, position_clamp=False),
    "slots+guard": GeneratorFlags(prefilled_slots_fix=True, merge_batch_guard=True, position_clamp=False),
    "all": GeneratorFlags(prefilled_slots_fix=True, merge_batch_guard=True, position_clamp=True),
    "no-merge": GeneratorFlags(merge=False),
    "all+reads": GeneratorFlags(merge_from_last_run=True, synced_merge_reads=True),
}
