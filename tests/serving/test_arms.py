"""The three production defects, each reproduced from a named seed, with negative controls.

Each pinned seed was found by `bin/ttsim arms` (sweep model); a test runs the arm with the
fix switched off and expects the failure of exactly that class, then the arm with the fix
on and expects the request to pass. Replay any of them with the printed command.
"""

import dataclasses

import pytest

from fixtures import scenario
from fixtures.sweep.arms import replay_command
from fixtures.workloads import stage3

pytestmark = pytest.mark.needs_fault_injection

# (defect class, seed, failing request, arm without the fix, arm with it)
PINNED = [
    ("slot-reuse", 29, "req-19", "control", "slots"),
    ("slot-reuse", 33, "req-24", "control", "slots"),  # under KV pressure (preemption)
    ("stale-position-buffer", 22, "req-25", "slots", "slots+guard"),
]


def _run(seed: int, arm: str, **kw) -> scenario.ScenarioResult:
    workload = stage3(seed)
    return scenario.run_scenario(workload, arm, seed, expected=scenario.serial_answers(workload, seed), **kw)


@pytest.mark.parametrize("defect, seed, request_id, without_fix, with_fix", PINNED,
                         ids=[f"{p[0]}-seed{p[1]}" for p in PINNED])
def test_defect_emerges_without_its_fix_and_not_with_it(defect, seed, request_id, without_fix, with_fix):
    bad = _run(seed, without_fix)
    failed = {v.request_id: v.defect for v in bad.failed}
    request_id = request_id or next(iter(failed), None)
    assert failed.get(request_id) == defect, (
        f"seed {seed} arm {without_fix}: expected {request_id} to fail with {defect}, got {failed}; "
        f"replay: {replay_command(without_fix, seed, 'markov')}"
    )
    good = _run(seed, with_fix)
    still = {v.request_id: v for v in good.failed}
    assert request_id not in still, (
        f"seed {seed} arm {with_fix}: {request_id} still fails ({still[request_id].defect}: expected "
        f"{still[request_id].expected}, got {still[request_id].got}) with the fix on; "
        f"replay: {replay_command(with_fix, seed, 'markov')}")


@pytest.mark.parametrize("seed", [22, 29, 33])
def test_all_fixes_pass_the_pinned_seeds(seed):
    result = _run(seed, "all")
    assert result.failed == [], f"replay: bin/ttsim replay --arm all --seed {seed}"


def test_no_merge_restages_stale_host_tokens():
    result = _run(0, "no-merge")
    assert len(result.failed) > len(result.verdicts) // 2
    assert {v.defect for v in result.failed} == {"stale-host-token"}


def test_a_seed_replays_exactly():
    a, b = _run(29, "control", record_merges=True), _run(29, "control", record_merges=True)
    assert [(v.request_id, v.got) for v in a.verdicts] == [(v.request_id, v.got) for v in b.verdicts]
    assert a.merges == b.merges and a.device_stats == b.device_stats


def test_guard_on_live_buffers_rejects_exactly_the_pattern_changes():
    """Production measured the guard as not over-rejecting. With no read lag every merge read
    lands, so a merge in the bucket that just ran reads live buffers: the device pattern is
    the previous batch's. Production's guard then rejects exactly when the host's active
    pattern changed since the previous merge (a row joined or left), never otherwise, and
    its host fallback never costs a request, because
    the runner's host is fresh at batch changes."""
    for seed in range(4):
        workload = stage3(seed)
        calm = dataclasses.replace(workload, knobs=dataclasses.replace(workload.knobs, readback_lag=0.0))
        expected = scenario.serial_answers(calm, seed)
        result = scenario.run_scenario(calm, "slots+guard", seed, expected=expected, record_merges=True)
        assert result.failed == [], f"replay: bin/ttsim replay --arm slots+guard --seed {seed}"
        pattern = [tuple(r.host_pos >= 0 for r in e.rows) for e in result.merges]
        live = [k for k, e in enumerate(result.merges)
                if k and e.previous_bucket == e.bucket and not e.fresh_trace]
        assert live, "the workload must exercise merges on live buffers"
        changed = {k for k in live if pattern[k] != pattern[k - 1]}
        rejected = {k for k in live if result.merges[k].guard_rejected}
        assert rejected == changed, f"seed {seed}: guard rejects on live buffers at merges {sorted(rejected ^ changed)}"
        assert result.guard_rejects >= len(rejected)


def test_production_fixes_leave_a_residual_the_candidate_fixes_close():
    """Seed 36 (the first of `all`'s 15 failing seeds in 1000): at a batch change within
    bucket 4 the merge's non-blocking reads have not landed when it synchronises on the last
    output's event, so the host mirrors still hold an earlier read of this bucket -- another
    batch with the same four rows active. Production's guard compares patterns, so it cannot
    see it, and a row whose stale position is one ahead of the host's keeps the device's
    (wrong) position. Waiting for the merge's own reads, and reading the trace that ran last
    (arm all+reads), closes it."""
    residual = _run(36, "all")
    assert {v.defect for v in residual.failed} == {"stale-position-buffer"}, (
        "replay: bin/ttsim replay --arm all --seed 36"
    )
    assert _run(36, "all+reads").failed == []


def test_the_full_pattern_guard_catches_in_range_residue_in_a_never_run_bucket():
    """Seed 844: a never-run bucket's position buffer lands on a freed prefill position
    tensor, so its 'garbage' is in range and collides with a host position: the clamp alone
    cannot tell. It failed `all` under the weaker guard this project used to run (rows the
    host continues only); production's guard compares the whole bucket's pattern, sees the
    residue's extra valid rows and falls back to the host."""
    without_guard = _run(844, "slots")
    assert without_guard.failed, "replay: bin/ttsim replay --arm slots --seed 844"
    assert _run(844, "all").failed == [], "replay: bin/ttsim replay --arm all --seed 844"


def test_preempted_requests_resume_and_match_their_serial_answers():
    """A tight KV budget makes vLLM preempt running requests (their slots are freed) and
    resume them later with a fresh prefill of prompt + outputs into a new slot."""
    workload = stage3(0)
    tight = dataclasses.replace(workload, knobs=dataclasses.replace(workload.knobs, kv_blocks=14))
    result = scenario.run_scenario(tight, "all+reads", 0, expected=scenario.serial_answers(tight, 0))
    assert result.preemptions > 0
    assert result.failed == []
