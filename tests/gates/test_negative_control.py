"""The negative control at the HTTP level: the same stage-3 gate body, on the pinned seed,
against a sim server started in the control arm (every production fix off by env). The
slot-reuse defect emerges and the gate must FAIL naming the request; with every fix on
(test_gates.py::test_stage3, same seed, same workload) it passes."""

from __future__ import annotations

import pytest

from hil import gates

from gate_seeds import CONTROL_FAILS, GATE_SEED, stage3_requests

pytestmark = [pytest.mark.xdist_group("gates-control"), pytest.mark.needs_fault_injection]


@pytest.fixture(scope="module")
def control_target(endpoint, sim_servers):
    """The stage-3 sim server's twin (same model, seed and workload) with production's fixes off."""
    if endpoint is not None:
        pytest.skip("the control arm is a sim server with the fixes off; not the live endpoint")
    s = sim_servers("markov", "control")
    return gates.GateTarget("sim", s.url, s.log_text, s)


def test_stage3_fails_in_the_control_arm_naming_the_request(control_target, report_path):
    # the worker read the control flags (CONTROL_ENV) at start
    assert "prefilled_slots_fix=False, merge_batch_guard=False, position_clamp=False" in control_target.log_text()
    report = control_target.report("stage3-control")
    client = gates.GateClient(control_target.url, report)
    r = gates.stage3(report, client, stage3_requests(GATE_SEED))
    r.write(report_path("stage3-control"))
    check = next(c for c in r.checks if c["check"] == "concurrent-equals-serial")
    assert check["status"] == "fail", f"seed {GATE_SEED}: the control arm passed stage 3 (re-pin: gate_seeds.py)"
    assert CONTROL_FAILS in check["failed_requests"], check["detail"]
    assert f"{CONTROL_FAILS}: expected" in r.failures()
