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

    Candidate fixes found with this framework (not in production; off by default), each for
    a mechanism upstream has:
    merge_from_last_run  QWEN36_MERGE_FROM_LAST_RUN: read the device state from the trace
                         that ran last (where it lives) instead of the trace about to run,
                         whose buffers a bucket change leaves from an older batch (qwen36's
                         per-width decode stores).
    marks_follow_remap   QWEN36_MARKS_FOLLOW_REMAP: force the host on the row a prefilled
                         slot's state was gathered to (row i where slot_remap[i] is the slot);
                         tt-metal's generator.py @ 50868c00 forces row == slot after the gather,
                         which misses a prefilled request the plugin's condense moved.

    What-if knobs: mechanisms BEYOND upstream, modelled to ask "what if production did
    this?". Off in every production arm; only the labelled ``what-if`` arm turns them on.
    whatif_async_merge_read   TTSIM_WHATIF_ASYNC_MERGE_READ: the merge's reads are
                              non-blocking copies into host mirrors, synchronised on the last
                              output read's event, which does not cover them (upstream's
                              merge read is a blocking ``to_torch``).
    whatif_never_run_bucket   TTSIM_WHATIF_NEVER_RUN_BUCKET: every width's trace inputs are
                              ``allocate_tensor_on_device`` (uninitialized) before any capture,
                              and a width's first decode merges what that memory holds
                              (upstream creates inputs from host values and merges only into a
                              captured trace).
    """

    prefilled_slots_fix: bool = True
    merge_batch_guard: bool = True
    position_clamp: bool = True
    merge: bool = True
    merge_from_last_run: bool = False
    marks_follow_remap: bool = False
    whatif_async_merge_read: bool = False
    whatif_never_run_bucket: bool = False

    ENV = {
        "prefilled_slots_fix": "QWEN36_PREFILLED_SLOTS_FIX",
        "merge_batch_guard": "QWEN36_MERGE_BATCH_GUARD",
        "position_clamp": "QWEN36_POSITION_CLAMP",
        "merge": "QWEN36_ASYNC_MERGE",
        "merge_from_last_run": "QWEN36_MERGE_FROM_LAST_RUN",
        "marks_follow_remap": "QWEN36_MARKS_FOLLOW_REMAP",
        "whatif_async_merge_read": "TTSIM_WHATIF_ASYNC_MERGE_READ",
        "whatif_never_run_bucket": "TTSIM_WHATIF_NEVER_RUN_BUCKET",
    }
    DEFAULT_OFF = ("merge_from_last_run", "marks_follow_remap", "whatif_async_merge_read", "whatif_never_run_bucket")
    WHAT_IF = ("whatif_async_merge_read", "whatif_never_run_bucket")

    @property
    def candidate(self) -> bool:
        """Any candidate fix on (found with this framework, not production's)."""
        return self.merge_from_last_run or self.marks_follow_remap

    @property
    def what_if(self) -> bool:
        """Any beyond-upstream knob on (never in a production arm)."""
        return any(getattr(self, k) for k in self.WHAT_IF)

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
    "all+last-run": GeneratorFlags(merge_from_last_run=True),
    "all+remap-marks": GeneratorFlags(marks_follow_remap=True),
    # labelled what-if: `all` under the mechanisms beyond upstream that the first model had
    "what-if": GeneratorFlags(whatif_async_merge_read=True, whatif_never_run_bucket=True),
}

#: arms whose every mechanism is upstream's or production's (what `ttsim arms` runs by default)
PRODUCTION_ARMS = tuple(a for a, f in ARMS.items() if not f.what_if)

#: the generator as it is, no switch of ours set: the one arm of a generator that honours none
#: of these flags (upstream's Generator, a user's own). For a generator that honours them it is
#: production's configuration, the flags' defaults (the same as ``all``)
AS_IS = "as-is"
#: what a user's generator honours unless it declares otherwise (``ttsim_flags``): the switches
#: the documented factory contract (docs/generators.md) hands it, production's three fixes and the merge itself
USER_FLAGS = ("prefilled_slots_fix", "merge_batch_guard", "position_clamp", "merge")
ALL_FLAGS = tuple(GeneratorFlags.ENV)


def arm_flags(arm: str) -> GeneratorFlags:
    """The flags of ``arm`` (one of ARMS, or AS_IS)."""
    if arm == AS_IS:
        return GeneratorFlags()
    if arm not in ARMS:
        raise KeyError(f"unknown arm {arm!r}; choose from {', '.join((*ARMS, AS_IS))}")
    return ARMS[arm]


def unhonoured(arm: str, honoured) -> list[str]:
    """The switches ``arm`` sets away from production's defaults that a generator honouring
    ``honoured`` (flag names) would ignore: the arm means nothing for it unless this is empty."""
    flags, default = arm_flags(arm), GeneratorFlags()
    return [name for name in ALL_FLAGS if getattr(flags, name) != getattr(default, name) and name not in honoured]
