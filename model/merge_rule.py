"""The merge decision as a pure function of what the merge read and the host's inputs.

The generator calls it on live reads; ``ttsim replay --trace`` calls the same function on
reads recorded from any run (sim or card), so a recorded failure is re-decided by exactly
the code that made it. Reading the device (which buffers, which event) stays in the
generator: the flags ``merge_from_last_run`` and ``synced_merge_reads`` change what is
read, not how it is decided.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .flags import GeneratorFlags


@dataclass
class MergeDecision:
    dev_pos: torch.Tensor  # device positions after the clamp (what the rule compared)
    keep: torch.Tensor  # bool per row: the device's token/position wins
    reasons: list[str]
    guard_rejected: bool

    def merged(self, dev_tok: torch.Tensor, host_tok: torch.Tensor,
               host_pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.where(self.keep, dev_tok, host_tok), torch.where(self.keep, self.dev_pos, host_pos)


def decide_merge(flags: GeneratorFlags, max_context: int, dev_tok: torch.Tensor, dev_pos: torch.Tensor,
                 host_tok: torch.Tensor, host_pos: torch.Tensor, prefilled: torch.Tensor) -> MergeDecision:
    """Production's rule with the switchable fixes. ``dev_*`` are the reads padded to the
    bucket (rows the source trace never had: token 0, position -1); ``prefilled`` marks slots
    prefilled since their last decode (consulted only with the prefilled-slot fix)."""
    del dev_tok  # the decision depends on positions only; kept in the signature for symmetry
    if not flags.merge:  # pre-merge behaviour: the host's inputs always
        bucket = host_pos.shape[0]
        return MergeDecision(dev_pos, torch.zeros(bucket, dtype=torch.bool),
                             ["inactive" if p < 0 else "no merge" for p in host_pos.tolist()], False)
    if flags.position_clamp:
        dev_pos = torch.where((dev_pos < 0) | (dev_pos >= max_context), torch.full_like(dev_pos, -1), dev_pos)
    host_active = host_pos >= 0
    keep = host_active & ((dev_pos == host_pos) | (dev_pos == host_pos + 1))
    reasons = ["inactive" if not a else ("device ahead/equal" if k else "positions differ")
               for a, k in zip(host_active.tolist(), keep.tolist())]
    if flags.prefilled_slots_fix:
        for r in prefilled.nonzero().flatten().tolist():
            if keep[r]:
                reasons[r] = "prefilled slot: host forced"
            keep[r] = False
    rejected = False
    if flags.merge_batch_guard and not torch.equal(dev_pos != -1, host_pos != -1):
        # production's guard (patch 0022): the whole bucket's valid pattern, device against
        # host; any difference means the buffer belongs to another batch, so every row
        # takes the host's token and position. With the clamp on, out-of-range garbage is
        # already -1 here, so the one comparison catches garbage too.
        rejected = True
        keep[:] = False
        reasons = ["guard: pattern mismatch" if a else "inactive" for a in host_active.tolist()]
    return MergeDecision(dev_pos, keep, reasons, rejected)
