"""A hang on the device ends a scenario run cleanly: the run's unfinished
requests fail as ``device-timeout``, ``ScenarioResult.fatal`` holds the one line (tt-metal's
TT_THROW, the op, the engine step, the replay command) and ``diagnostics`` the stray accesses
ttsim recorded (the hang's op, row and position); the replay prints both. The hang is real:
GarbagePositionGenerator (tests/generators/clobbered_inputs.py) stages a garbage position and
the tiny model's paged SDPA decode walks the span it names."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from harness import defects, scenario
from harness.base.spec import RunSpec, parse_generator
from harness.workloads import FaultKnobs, Request, Workload

pytestmark = [pytest.mark.needs_fault_injection, pytest.mark.our_generator]

GARBAGE = Path(__file__).resolve().parents[2] / "tests" / "generators" / "clobbered_inputs.py"
JUNK = 1206993233


def _workload() -> Workload:
    prompts = [list(b"the weather in Paris is"), list(b"get_weather(city=")]
    return Workload("timeout", tuple(Request(f"req-{i}", tuple(p), 6) for i, p in enumerate(prompts)), 2,
                    FaultKnobs())


def _run(generator: str | None):
    workload = _workload()
    spec = RunSpec(seed=0, model="tiny", generator=parse_generator(f"{GARBAGE}:{generator}") if generator else None)
    expected = scenario.serial_answers(workload, RunSpec(seed=0, model="tiny"))
    return scenario.run_scenario(workload, "control", spec, expected=expected)


@pytest.fixture(scope="module")
def hung():
    return _run("GarbagePositionGenerator")


def test_a_hang_ends_the_run_as_failed_requests_with_one_line(hung):
    assert hung.fatal is not None and "\n" not in hung.fatal
    assert "TIMEOUT: device timeout" in hung.fatal and "paged_scaled_dot_product_attention_decode" in hung.fatal
    assert "replay: bin/ttsim replay --arm control --seed 0 --model tiny" in hung.fatal
    assert hung.failed and {v.defect for v in hung.failed} == {defects.DEVICE_TIMEOUT}


def test_the_hangs_diagnostics_name_op_row_and_position(hung):
    hangs = [d for d in hung.diagnostics if ": hang" in d]
    assert hangs and all(f"row 0 position {JUNK}" in d for d in hangs), hung.diagnostics
    assert all(d.startswith("ttsim diagnostics: paged_scaled_dot_product_attention_decode") for d in hangs)


def test_a_run_without_stray_accesses_has_no_fatal_and_no_diagnostics():
    clean = _run(None)
    assert clean.fatal is None and clean.diagnostics == [] and clean.failed == []
