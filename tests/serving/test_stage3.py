"""Production's stage-3 gate on the session's backend: 32 requests at concurrency 16 on a 1x2 mesh
(TP=2), arm ``all``, each request equal to its serial answer. No ttsim knob is needed for the
claim (on ttsim the device lags by the default amount; on cards the hardware's own timing is
the fault source), so this runs with --hil as well."""

import pytest

from harness.base.spec import RunSpec
from harness import scenario
from harness.workloads import FaultKnobs, stage3


@pytest.mark.parametrize("seed", [1, 2])
def test_stage3_all_arm_every_request_equals_its_serial_answer(device_backend, seed):
    workload = stage3(seed, knobs=FaultKnobs())
    assert (len(workload.requests), workload.concurrency) == (32, 16)
    result = scenario.run_scenario(workload, "all", RunSpec(seed=seed, mesh_cols=2, backend=device_backend), expected=scenario.serial_answers(workload, RunSpec(seed=seed)))
    assert result.failed == [], [(v.request_id, v.defect, v.expected, v.got) for v in result.failed]
    assert len(result.verdicts) == 32
