"""The negative control at the HTTP level: the same stage-3 gate body, on the pinned seed,
against a sim server started in the control arm (every production fix off by env). The
slot-reuse defect emerges and the gate must FAIL naming the requests it broke; with every fix on
(test_gates.py::test_stage3, same seed, same workload) it passes."""

from __future__ import annotations

import pytest

from hil import gates

from gate_seeds import GATE_SEED, STAGE3_REPEATS, stage3_rate, stage3_requests

pytestmark = pytest.mark.needs_fault_injection


@pytest.fixture(scope="module")
def control_target(endpoint, sim_servers):
    """The stage-3 sim server's twin (same model, seed and workload) with production's fixes off."""
    if endpoint is not None:
        pytest.skip("the control arm is a sim server with the fixes off; not the live endpoint")
    s = sim_servers("markov", "control")
    return gates.GateTarget("sim", s.url, s.log_text, s)


def test_stage3_fails_in_the_control_arm_naming_the_request(control_target, report_path):
    """Every repeat fails naming its broken requests: the control fails reliably, not by luck of one run."""
    # the worker read the control flags (CONTROL_ENV) at start
    assert "prefilled_slots_fix=False, merge_batch_guard=False, position_clamp=False" in control_target.log_text()
    reports = []
    for i in range(STAGE3_REPEATS):
        report = control_target.report("stage3-control")
        r = gates.stage3(report, gates.GateClient(control_target.url, report), stage3_requests(GATE_SEED))
        r.write(report_path(f"stage3-control-{i}"))
        reports.append(r)
    rate = stage3_rate(reports)
    assert rate["failing_repeats"] == STAGE3_REPEATS, (
        f"seed {GATE_SEED}: the control arm passed stage 3 in {STAGE3_REPEATS - rate['failing_repeats']} of "
        f"{STAGE3_REPEATS} repeats (re-pin: gate_seeds.py); rate {rate}")
    for r in reports:  # which requests break follows the arrival schedule (gate_seeds.py); each is named
        check = next(c for c in r.checks if c["check"] == "concurrent-equals-serial")
        assert check["failed_requests"], check["detail"]
        for request in check["failed_requests"]:
            assert f"{request}: expected" in r.failures()
