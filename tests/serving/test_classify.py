"""Defect classes split by route, from what the merge read (harness.defects.classify): a kept
token no vocabulary has is ``garbage-token`` whatever its position did; a position no batch can
have in the read is ``garbage-position``; else the slot's previous occupant or an older batch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness import defects, scenario
from harness.base.spec import RunSpec, parse_generator
from harness.workloads import stage3
from model.merge_events import MergeEvent, MergeInputs, MergeRow

JUNK = 1206993233  # two bf16 activations seen as one int32 (production's read)
CLOBBER = Path(__file__).resolve().parents[2] / "tests" / "generators" / "clobbered_inputs.py"


def _event(dev_token: int, dev_pos: int, *, host_prefilled: bool = False, other_pos: int = -1) -> tuple:
    row = MergeRow(0, 5, 40, dev_token, dev_pos, "device", "device ahead/equal", host_prefilled=host_prefilled)
    pad = MergeRow(1, 0, -1, 0, other_pos, "host", "inactive")
    inputs = MergeInputs(2, [dev_token, 0], [dev_pos, other_pos], 128, {})
    return MergeEvent(3, 2, 2, False, False, [row, pad], inputs), row


@pytest.mark.parametrize("dev_token, dev_pos, prefilled, other_pos, expected", [
    (JUNK, 40, False, -1, "garbage-token"),  # PR #122's state: the position still matches
    (JUNK, 41, True, -1, "garbage-token"),  # the route is the token, whoever held the slot
    (defects.NO_VOCABULARY, 40, False, -1, "garbage-token"),
    (defects.NO_VOCABULARY - 1, 40, False, -1, "stale-position-buffer"),  # a (huge) vocabulary's token
    (77, 41, False, -1, "stale-position-buffer"),
    (77, 41, True, -1, "slot-reuse"),
    (77, 41, False, JUNK, "garbage-position"),
    (77, 41, False, 128, "garbage-position"),  # max_context: no position
    (77, 41, False, 127, "stale-position-buffer"),
])
def test_classes_come_from_what_the_merge_read(dev_token, dev_pos, prefilled, other_pos, expected):
    event, row = _event(dev_token, dev_pos, host_prefilled=prefilled, other_pos=other_pos)
    assert defects.classify(event, row) == expected


@pytest.mark.needs_fault_injection
@pytest.mark.our_generator
def test_a_clobbered_token_with_a_matching_position_fails_as_garbage_token():
    """The token route end to end: the merge at the first decode after a prefill keeps row 0's
    clobbered token (its position passed the rule), the model embeds an id past its table
    (a diagnostics line) and the request's answer goes wrong."""
    workload = stage3(0)
    spec = RunSpec(seed=0, generator=parse_generator(f"{CLOBBER}:GarbageTokenGenerator"))
    expected = scenario.serial_answers(workload, spec)
    result = scenario.run_scenario(workload, "control", spec, expected=expected, record_merges=True)
    kept = [(e, r) for e in result.merges for r in e.kept_wrong() if r.dev_token == JUNK]
    assert kept and all(r.dev_pos in (r.host_pos, r.host_pos + 1) for _, r in kept)
    assert "garbage-token" in {v.defect for v in result.failed}, [(v.request_id, v.defect) for v in result.failed]
    assert any(f"position {JUNK}" in d and d.startswith("ttsim diagnostics: embedding") for d in result.diagnostics)


@pytest.mark.needs_fault_injection
@pytest.mark.our_generator
def test_the_replay_prints_the_diagnostics_beside_the_verdicts(capsys):
    """`ttsim replay` of the token route: the failing request's verdict names garbage-token and
    the embedding's stray read is printed as a diagnostics line after the verdicts."""
    import torch

    from harness.commands.cli import main

    threads = torch.get_num_threads()
    try:
        assert main(["replay", "--arm", "control", "--seed", "0",
                     "--generator", f"{CLOBBER}:GarbageTokenGenerator"]) == 1
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    verdicts = out[out.index("guard rejects:"):]
    assert "FAIL (garbage-token)" in verdicts
    assert re.search(rf"\n  ttsim diagnostics: embedding chip 0 row \d position {JUNK}: read ", verdicts), verdicts
