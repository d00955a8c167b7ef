"""What production's clamp changes under public mechanics (docs/fidelity.md,
"What the clamp changes"): not an answer but the guard's rejections.

A garbage position (two bf16 activations read as one int32, reaching a width's inputs through
trace-buffer reuse) never equals a host position or one past it, so the keep rule alone already
gives that row the host's values. Without the clamp the guard counts it as a valid row; with
the clamp it is -1, and where it sits under a row the host has active the guard sees a pattern
mismatch and restages the whole batch from the (fresh) host. Over seeds 0..199 that is 104 more
rejections (4697 -> 4801) in 48 seeds, and not one answer differs. Seed 36: 13 -> 17."""

from __future__ import annotations

import pytest

from harness.base.spec import RunSpec
from harness import scenario
from harness.workloads import stage3
from model.flags import arm_flags
from model.merge_rule import decide_merge

pytestmark = [pytest.mark.needs_fault_injection, pytest.mark.our_generator]

SEED = 36


def _junk_under_active(event) -> bool:
    return any(r.host_pos >= 0 and not -1 <= p < event.inputs.max_context
               for p, r in zip(event.inputs.dev_positions, event.rows))


@pytest.fixture(scope="module")
def runs():
    workload = stage3(SEED)
    return scenario.run_arms(workload, ["slots+guard", "all"], RunSpec(seed=SEED), record_merges=True, expected=scenario.serial_answers(workload, RunSpec(seed=SEED)))


def test_the_clamp_adds_guard_rejects_and_changes_no_answer(runs):
    guard, clamp = runs["slots+guard"], runs["all"]
    assert [v.got for v in guard.verdicts] == [v.got for v in clamp.verdicts]
    assert clamp.guard_rejects > guard.guard_rejects
    extra = {e.step for e in clamp.merges if e.guard_rejected} - {e.step for e in guard.merges if e.guard_rejected}
    assert len(extra) == clamp.guard_rejects - guard.guard_rejects
    assert all(_junk_under_active(e) for e in clamp.merges if e.step in extra)


def test_re_decided_without_the_clamp_each_extra_reject_writes_the_same_inputs(runs):
    """Each merge of `all`, re-decided on its own reads under slots+guard (no clamp): where the
    guard's verdict differs, garbage sat under an active row, and the merged inputs are equal."""
    no_clamp = arm_flags("slots+guard")
    differ = 0
    for e in runs["all"].merges:
        host_tok, host_pos = [r.host_token for r in e.rows], [r.host_pos for r in e.rows]
        marks = [r.prefilled for r in e.rows]
        with_clamp = decide_merge(arm_flags("all"), e.inputs.max_context, e.inputs.dev_tokens,
                                  e.inputs.dev_positions, host_tok, host_pos, marks)
        without = decide_merge(no_clamp, e.inputs.max_context, e.inputs.dev_tokens, e.inputs.dev_positions,
                               host_tok, host_pos, marks)
        assert with_clamp.guard_rejected == e.guard_rejected
        if with_clamp.guard_rejected != without.guard_rejected:
            differ += 1
            assert with_clamp.guard_rejected and _junk_under_active(e)
            live = [i for i, p in enumerate(host_pos) if p >= 0]
            (a_tok, a_pos), (b_tok, b_pos) = (d.merged(e.inputs.dev_tokens, host_tok, host_pos)
                                              for d in (with_clamp, without))
            assert [(a_tok[i], a_pos[i]) for i in live] == [(b_tok[i], b_pos[i]) for i in live]
    assert differ == runs["all"].guard_rejects - runs["slots+guard"].guard_rejects
