"""The three production defects on OUR generator, each reproduced from a named seed, with
negative controls.

Each pinned seed was found by `bin/ttsim arms` (sweep model) for model.generator.Generator;
a test runs the arm with the fix switched off and expects the failure of exactly that class,
then the arm with the fix on and expects the request to pass. Replay any of them with the
printed command. Another generator issues other device commands, so these seeds say nothing
about it: under --generator these tests are skipped, and the user's generator is judged by
the incident replays (test_incidents.py) and the fixes' rates (test_fix_rates.py).
"""

import dataclasses

import pytest

from harness import scenario
from harness.base.spec import RunSpec
from harness.workloads import stage3

pytestmark = [pytest.mark.needs_fault_injection, pytest.mark.our_generator]

# (defect class, seed, failing request, arm without the fix, arm with it)
# under the production step policy (phased) and upstream's mechanisms
PINNED = [
    ("slot-reuse", 27, "req-14", "control", "slots"),
    ("slot-reuse", 48, "req-11", "control", "slots"),
    # the residual of `all`, part 1: F1 forces row == slot after the remap gather, and the
    # plugin's condense moved the prefilled request to another row
    ("slot-reuse", 1, "req-02", "all", "all+remap-marks"),
    ("stale-position-buffer", 267, "req-22", "slots", "slots+guard"),
    # the residual of `all`, part 2: the target width's store holds an older batch with the same pattern
    ("stale-position-buffer", 84, "req-10", "all", "all+last-run"),
]


def _run(seed: int, arm: str, **kw) -> scenario.ScenarioResult:
    workload, spec = stage3(seed), RunSpec(seed=seed)
    return scenario.run_scenario(workload, arm, spec, expected=scenario.serial_answers(workload, spec), **kw)


def replay_command(arm: str, seed: int) -> str:
    return RunSpec(seed=seed).replay_command(arm)


@pytest.mark.parametrize("defect, seed, request_id, without_fix, with_fix", PINNED,
                         ids=[f"{p[0]}-seed{p[1]}" for p in PINNED])
def test_defect_emerges_without_its_fix_and_not_with_it(defect, seed, request_id, without_fix, with_fix):
    bad = _run(seed, without_fix)
    failed = {v.request_id: v.defect for v in bad.failed}
    assert failed.get(request_id) == defect, (
        f"seed {seed} arm {without_fix}: expected {request_id} to fail with {defect}, got {failed}; "
        f"replay: {replay_command(without_fix, seed)}"
    )
    good = _run(seed, with_fix)
    still = {v.request_id: v for v in good.failed}
    assert request_id not in still, (
        f"seed {seed} arm {with_fix}: {request_id} still fails ({still[request_id].defect}: expected "
        f"{still[request_id].expected}, got {still[request_id].got}) with the fix on; "
        f"replay: {replay_command(with_fix, seed)}")


@pytest.mark.parametrize("seed", [27, 32, 48])
def test_all_fixes_pass_the_pinned_seeds(seed):
    result = _run(seed, "all")
    assert result.failed == [], f"replay: {replay_command('all', seed)}"


def test_no_merge_restages_stale_host_tokens():
    result = _run(0, "no-merge")
    assert len(result.failed) > len(result.verdicts) // 2
    assert {v.defect for v in result.failed} == {"stale-host-token"}


def test_a_seed_replays_exactly():
    a, b = _run(29, "control", record_merges=True), _run(29, "control", record_merges=True)
    assert [(v.request_id, v.got) for v in a.verdicts] == [(v.request_id, v.got) for v in b.verdicts]
    assert a.merges == b.merges and a.device_stats == b.device_stats


def test_guard_on_live_buffers_rejects_exactly_the_pattern_changes():
    """Production measured the guard as not over-rejecting. With no read lag, a merge into the
    width that just ran (and whose previous reload was a merge) reads live buffers: the
    pattern the previous merge WROTE, advanced by the device (``plus_one`` keeps -1 at -1).
    That includes a pad row upstream's rule brought alive (it kept a device 0). Production's
    guard then rejects exactly when the host's active pattern differs from that, never
    otherwise, and its host fallback never costs a request, because the runner's host is fresh
    at every reload. (Seed 1 is left out: it fails `slots+guard` by F1's marks after the gather,
    pinned in PINNED.)"""
    for seed in (0, 2, 3, 4):
        workload = stage3(seed)
        calm = dataclasses.replace(workload, knobs=dataclasses.replace(workload.knobs, readback_lag=0.0))
        spec = RunSpec(seed=seed)
        expected = scenario.serial_answers(calm, spec)
        result = scenario.run_scenario(calm, "slots+guard", spec, expected=expected, record_merges=True)
        assert result.failed == [], f"replay: {replay_command('slots+guard', seed)}"
        host = [tuple(r.host_pos >= 0 for r in e.rows) for e in result.merges]
        written = [tuple((r.dev_pos if r.source == "device" else r.host_pos) >= 0 for r in e.rows)
                   for e in result.merges]
        m = result.merges
        live = [k for k, e in enumerate(m)
                if k and e.previous_bucket == e.bucket == m[k - 1].bucket and not e.fresh_trace]
        assert live, "the workload must exercise merges on live buffers"
        changed = {k for k in live if host[k] != written[k - 1]}
        rejected = {k for k in live if m[k].guard_rejected}
        assert rejected == changed, f"seed {seed}: guard rejects on live buffers at merges {sorted(rejected ^ changed)}"
        assert result.guard_rejects >= len(rejected)


def test_production_fixes_leave_a_residual_the_candidate_fix_closes():
    """Seed 84: at a width change the merge reads the TARGET width's store (as qwen36 binds
    it), which holds that width's last batch -- another batch with the same rows active.
    The merge read is blocking (upstream's), so every byte is the device's; production's
    guard compares patterns, cannot see it, and a row whose stale position is one ahead of
    the host's keeps the device's token. Reading the width that ran last (all+last-run)
    closes it."""
    residual = _run(84, "all")
    assert {v.defect for v in residual.failed} == {"stale-position-buffer"}, (
        f"replay: {replay_command('all', 84)}"
    )
    assert _run(84, "all+last-run").failed == []


def test_garbage_reaches_position_buffers_through_trace_buffer_reuse():
    """Defect 3's route upstream permits: a width's inputs created after another width's
    trace was captured can sit where that trace writes its intermediates, and its replays
    overwrite them (qwen36 opts into this reuse). Under `control` the merge then reads
    positions no position can have: two bf16 activations seen as one int32, as production's
    1206993233. The clamp turns each into -1 before the rule compares it."""
    control = _run(32, "control", record_merges=True)
    assert control.device_stats["trace_corruptions"] > 0
    junk = [(e, r) for e in control.merges for r, p in enumerate(e.inputs.dev_positions)
            if not -1 <= p < e.inputs.max_context]
    assert junk, f"replay: {replay_command('control', 32)}"
    assert any(0x3000 <= (p >> 16) & 0x7FFF <= 0x4800 for e, r in junk for p in [e.inputs.dev_positions[r]]), (
        "the garbage's high half is a bf16 activation")
    clamped = _run(32, "all", record_merges=True)
    seen = [(e, r) for e in clamped.merges for r, p in enumerate(e.inputs.dev_positions)
            if not -1 <= p < e.inputs.max_context]
    assert seen and all(e.rows[r].dev_pos == -1 for e, r in seen)


def test_preempted_requests_resume_and_match_their_serial_answers():
    """A tight KV budget makes vLLM preempt running requests (their slots are freed) and
    resume them later with a fresh prefill of prompt + outputs into a new slot."""
    workload = stage3(0)
    tight = dataclasses.replace(workload, knobs=dataclasses.replace(workload.knobs, kv_blocks=14))
    spec = RunSpec(seed=0)
    result = scenario.run_scenario(tight, "all+last-run", spec, expected=scenario.serial_answers(tight, spec))
    assert result.preemptions > 0
    assert result.failed == []
