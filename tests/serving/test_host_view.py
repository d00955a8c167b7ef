"""A wrong answer is classified from what the runner saw (model.serving.host_view_class), so a
generator that reports nothing is judged as one that reports its merges."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import scenario
from harness.base.spec import RunSpec, parse_generator
from harness.workloads import stage3
from model.serving import host_view_class
from test_arms import PINNED

pytestmark = pytest.mark.needs_fault_injection

SILENT = Path(__file__).resolve().parents[2] / "tests" / "generators" / "silent.py"


@pytest.mark.our_generator  # SilentGenerator is ours behind the contract: our pinned seeds apply
@pytest.mark.parametrize("defect, seed, request_id, without_fix, with_fix", PINNED,
                         ids=[f"{p[0]}-seed{p[1]}" for p in PINNED])
def test_a_generator_without_records_gets_the_same_classes(defect, seed, request_id, without_fix, with_fix):
    workload, spec = stage3(seed), RunSpec(seed=seed)
    expected = scenario.serial_answers(workload, spec)
    ours = scenario.run_scenario(workload, without_fix, spec, expected=expected)
    silent_spec = RunSpec(seed=seed, generator=parse_generator(f"{SILENT}:SilentGenerator"))
    silent = scenario.run_scenario(workload, without_fix, silent_spec, expected=expected)
    assert {v.request_id: v.got for v in silent.verdicts} == {v.request_id: v.got for v in ours.verdicts}
    assert {v.request_id: v.defect for v in silent.failed}[request_id] == defect
    assert silent.merges == [] and "unattributed" not in {v.defect for v in silent.failed}


@pytest.mark.parametrize("log, got, cls", [
    ({1: (True, True), 2: (False, False)}, [5, 9, 9], "slot-reuse"),          # first wrong at the first decode
    ({1: (True, True), 2: (False, True)}, [5, 6, 9], "stale-position-buffer"),  # at a later reload
    ({1: (True, True), 2: (False, False)}, [5, 6, 9], "device-state"),        # between reloads
    ({1: (True, True)}, [4, 6, 7], "unattributed"),                           # the prefill's own token
    ({1: (True, True)}, [], "unattributed"),                                  # no output at all
])
def test_the_first_wrong_token_names_its_decode(log, got, cls):
    assert host_view_class(log, [5, 6, 7], got) == cls
