"""Behaviour snapshots a reviewer reads (syrupy, one set per backend): the arms summary over
a small fixed seed set, and the merge decisions of every pinned seed. Each test first asserts
what must hold; the snapshot records the rest, so a change in rates or decisions shows up
as a diff (and in ``ttsim snapshots report``)."""

import pytest

from harness.base.spec import RunSpec
from harness import scenario
from harness.sweep import arms
from harness.workloads import stage3
from model.flags import ARMS
from test_arms import PINNED
from test_position_clamp import _expected as clamp_expected, _run as clamp_run

pytestmark = [pytest.mark.needs_fault_injection, pytest.mark.our_generator]

SUMMARY_SEEDS = (0, 27, 32, 48)  # small and fixed: one clean seed and the pinned failures


def decisions(merges) -> list[str]:
    """One line per merge (step, bucket change, guard) and per active row; a changed decision
    shows as the step and row that differ."""
    out = []
    for e in merges:
        guard = " GUARD-REJECT" if e.guard_rejected else ""
        fresh = " fresh" if e.fresh_trace else ""
        rows = " | ".join(f"s{r.slot} {r.request_id or '-'} host {r.host_token}@{r.host_pos} "
                          f"dev {r.dev_token}@{r.dev_pos} -> {r.source}" for r in e.rows if r.host_pos >= 0)
        out.append(f"step {e.step} bucket {e.previous_bucket}->{e.bucket}{fresh}{guard}: {rows}")
    return out


def test_arms_summary(snapshot, snapshot_backend):
    s = arms.sweep(list(ARMS), SUMMARY_SEEDS, RunSpec())
    table = {arm: {"requests": x.requests, "failed_requests": x.failed_requests, "failing_seeds": x.failing_seeds,
                   "defects": dict(sorted(x.defects.items())), "guard_rejects": x.guard_rejects,
                   "preemptions": x.preemptions} for arm, x in s.items()}
    assert table["all"]["failed_requests"] == 0, table["all"]
    assert table["control"]["failed_requests"] >= table["slots"]["failed_requests"] >= 0
    assert table["no-merge"]["defects"].keys() == {"stale-host-token"}
    assert len({t["requests"] for t in table.values()}) == 1, "every arm runs the same requests"
    assert table == snapshot(name=snapshot_backend)


@pytest.mark.parametrize("defect, seed, request_id, without_fix, with_fix", PINNED,
                         ids=[f"{p[0]}-seed{p[1]}" for p in PINNED])
def test_merge_decisions_of_pinned_seeds(snapshot, snapshot_backend, defect, seed, request_id, without_fix, with_fix):
    workload = stage3(seed)
    expected = scenario.serial_answers(workload, RunSpec(seed=seed))
    record = {}
    for arm in (without_fix, with_fix):
        result = scenario.run_scenario(workload, arm, RunSpec(seed=seed), expected=expected, record_merges=True)
        kept_wrong = {r.request_id for e in result.merges for r in e.kept_wrong()}
        assert (request_id in kept_wrong) is (arm == without_fix), \
            f"seed {seed} arm {arm}; replay: {RunSpec(seed=seed).replay_command(arm)}"
        record[arm] = {"merges": decisions(result.merges),
                       "failed": {v.request_id: v.defect for v in result.failed}}
    assert record == snapshot(name=snapshot_backend)


def test_merge_decisions_of_the_position_clamp_case(snapshot, snapshot_backend):
    record = {}
    for arm, rejects in (("slots+guard", 0), ("all", 1)):
        events = []
        outs, got = clamp_run(arm, on_merge=events.append)
        assert got == rejects and sum(e.guard_rejected for e in events) == rejects
        assert (outs == clamp_expected()) is (arm == "all")
        record[arm] = decisions(events)
    assert record == snapshot(name=snapshot_backend)


# the other pinned seed (tests/serving/test_arms.py): the garbage route (seed 32, which the
# guard catches); (seed, arm that fails, arm that passes)
RESIDUAL = [(32, "slots", "all")]


@pytest.mark.parametrize("seed, failing, passing", RESIDUAL, ids=[f"seed{r[0]}" for r in RESIDUAL])
def test_merge_decisions_of_the_residual_seeds(snapshot, snapshot_backend, seed, failing, passing):
    workload = stage3(seed)
    expected = scenario.serial_answers(workload, RunSpec(seed=seed))
    record = {}
    for arm in (failing, passing):
        result = scenario.run_scenario(workload, arm, RunSpec(seed=seed), expected=expected, record_merges=True)
        assert bool(result.failed) is (arm == failing), f"seed {seed} arm {arm}; replay: {RunSpec(seed=seed).replay_command(arm)}"
        record[arm] = {"merges": decisions(result.merges),
                       "failed": {v.request_id: v.defect for v in result.failed}}
    assert record == snapshot(name=snapshot_backend)
