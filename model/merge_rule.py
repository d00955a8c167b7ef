"""The merge decision as a pure function of what the merge read and the host's inputs.

The generator calls it on live reads; ``ttsim replay --trace`` calls the same function on
reads recorded from any run (sim or card), so a recorded failure is re-decided by exactly
the code that made it. Reading the device (which buffers, which event) stays in the
generator: the flag ``merge_from_last_run`` and the what-if ``whatif_async_merge_read``
change what is read, not how it is decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from .flags import GeneratorFlags


def int_list(x) -> list:
    """A row of the merge's inputs as Python values: a merge compares at most 8 rows, and one
    torch op on a tensor that small costs more than the whole rule in plain ints."""
    return x.tolist() if hasattr(x, "tolist") else list(x)  # a tensor or an array; no torch import here


@dataclass
class MergeDecision:
    dev_pos: list[int]  # device positions after the clamp (what the rule compared)
    keep: list[bool]  # per row: the device's token/position wins
    reasons: list[str]
    guard_rejected: bool

    def merged(self, dev_tok, host_tok, host_pos) -> tuple[list[int], list[int]]:
        """The inputs the decode writes: per row the device's token and position where kept."""
        rows = zip(self.keep, int_list(dev_tok), self.dev_pos, int_list(host_tok), int_list(host_pos), strict=True)
        tok, pos = [], []
        for k, dt, dp, ht, hp in rows:
            tok.append(dt if k else ht)
            pos.append(dp if k else hp)
        return tok, pos


def decide_merge(flags: GeneratorFlags, max_context: int, dev_tok, dev_pos, host_tok, host_pos,
                 prefilled) -> MergeDecision:
    """Production's rule with the switchable fixes. ``dev_*`` are the reads padded to the
    bucket (rows the source trace never had: token 0, position -1); ``prefilled`` marks the
    rows whose index is a slot prefilled since the last decode (consulted only with the
    prefilled-slot fix; upstream indexes rows by slot after the remap gather). Each
    argument is a row of ints (bools for ``prefilled``): a list or a 1-D tensor."""
    del dev_tok  # the decision depends on positions only; kept in the signature for symmetry
    dev_pos, host_pos = int_list(dev_pos), int_list(host_pos)
    if not flags.merge:  # pre-merge behaviour: the host's inputs always
        return MergeDecision(dev_pos, [False] * len(host_pos),
                             ["inactive" if p < 0 else "no merge" for p in host_pos], False)
    if len(dev_pos) != len(host_pos):
        raise ValueError(f"decide_merge: {len(dev_pos)} device positions for {len(host_pos)} host rows")
    if flags.position_clamp:
        dev_pos = [-1 if p < 0 or p >= max_context else p for p in dev_pos]
    host_active = [p >= 0 for p in host_pos]
    # upstream (tt-metal generator.py @ 50868c00) applies the rule to EVERY row: a padding row
    # (host -1) keeps the device's token and position where the device shows -1 or 0
    keep = [d == h or d == h + 1 for d, h in zip(dev_pos, host_pos)]
    reasons = [("device ahead/equal" if k else "positions differ") if a
               else ("pad row: device kept" if k and d >= 0 else "inactive")
               for a, k, d in zip(host_active, keep, dev_pos)]
    if flags.prefilled_slots_fix:
        for r, pre in enumerate(int_list(prefilled)):
            if pre:
                if keep[r]:
                    reasons[r] = "prefilled slot: host forced"
                keep[r] = False
    rejected = False
    if flags.merge_batch_guard and [p != -1 for p in dev_pos] != [p != -1 for p in host_pos]:
        # production's guard (patch 0022): torch.equal(dev_pos != -1, host_pos != -1), the
        # whole bucket's valid pattern, device against host; any difference means the buffer
        # belongs to another batch, so every row takes the host's token and position. With
        # the clamp on, out-of-range garbage is already -1 here, so the one comparison
        # catches garbage too.
        rejected = True
        keep = [False] * len(keep)
        reasons = ["guard: pattern mismatch" if a else "inactive" for a in host_active]
    return MergeDecision(dev_pos, keep, reasons, rejected)
