"""The serving path with the Qwen3.6-style TINY model (not the sweep model), on the session's
backend: no ttsim knob decides the outcome, so these run on cards too (--hil)."""

from harness.base.spec import RunSpec
from harness import scenario
from harness.workloads import FaultKnobs, stage3


def test_batch_invariance_each_request_in_a_full_batch_equals_it_alone(device_backend):
    """8 requests at concurrency 8 share every decode batch; each must produce exactly the
    tokens it produces alone (serial, fresh device) -- batch invariance of the whole path."""
    knobs = FaultKnobs(readback_lag=0.5)
    workload = stage3(5, n_requests=8, concurrency=8, knobs=knobs, max_prompt=48, max_tokens=6)
    expected = scenario.serial_answers(workload, RunSpec(seed=5, model="tiny", backend=device_backend))
    result = scenario.run_scenario(workload, "all", RunSpec(seed=5, model="tiny", backend=device_backend), expected=expected)
    assert result.failed == [], [(v.request_id, v.expected, v.got) for v in result.failed]


def test_sweep_model_serial_answer_equals_its_host_formula(device_backend):
    workload = stage3(3, n_requests=4)
    assert scenario.serial_answers(workload, RunSpec(seed=3)) == scenario.serial_answers(workload, RunSpec(seed=3, backend=device_backend), on_device=True)
