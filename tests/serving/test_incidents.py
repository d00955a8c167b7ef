"""Production's three incidents replayed on the generator under test (harness/incidents.py).

Each puts the device in the state production saw, through the workload alone, and asks the
generator under test (``--generator``'s, else ours: the ``run_spec`` fixture) to answer every
request as it answers it alone. With the generator's fixes on it must; a generator whose fix
did not hold fails, naming the fix. Where the generator can switch the fix off, the same
incident without it must fail (the negative control), else the fix was not exercised here and
the test says so instead of passing.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from harness import loader, scenario
from fixtures.judged import FIX_FAILED
from harness.incidents import INCIDENTS, SEEDS
from model.flags import AS_IS, unhonoured

REGRESSION_TESTS = [name for name, i in INCIDENTS.items() if i.victim]  # the clamp's has no failure to show


def _honoured(spec) -> tuple | None:
    """The flags the spec's generator switches (None: ours, which switches every flag)."""
    if spec.generator is None:
        return None
    import ttsim

    return loader.load(spec.generator, spec.backend.ttnn if spec.backend is not None else ttsim).honoured


def _arm(spec, arm: str) -> str:
    """``arm`` when the generator under test can have it, else the generator as it is."""
    honoured = _honoured(spec)
    return arm if honoured is None or not unhonoured(arm, honoured) else AS_IS


def _run(run_spec, name: str, seed: int, arm: str) -> tuple:
    incident = INCIDENTS[name]
    spec = replace(run_spec, seed=seed, step_policy=incident.policy)
    workload = incident.workload(seed)
    expected = scenario.serial_answers(workload, replace(spec, generator=None))
    return scenario.run_scenario(workload, arm, spec, expected=expected, record_merges=True), spec


def _who(spec) -> str:
    return spec.generator.text if spec.generator is not None else "model.generator.Generator"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", list(INCIDENTS))
def test_fixes_hold(run_spec, name, seed, record_property):
    """The generator's fixes on (the arm with the incident's fix, or the generator as it is)."""
    incident = INCIDENTS[name]
    arm = _arm(run_spec, incident.with_fix)
    result, spec = _run(run_spec, name, seed, arm)
    if result.failed:
        record_property(FIX_FAILED, incident.fix_name)  # named again in the session's summary
        pytest.fail(f"{incident.fix_name} did not hold in {_who(spec)} (arm {arm}, seed {seed}): "
                    + "; ".join(f"{v.request_id} answered {v.got} where alone it answers {v.expected} ({v.defect})"
                                for v in result.failed)
                    + f". Production saw: {incident.production}.", pytrace=False)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", REGRESSION_TESTS)
def test_fails_without_fix(run_spec, name, seed):
    """The negative control: the incident exercises the fix only if, without it, the victim
    fails. A generator that cannot switch the fix off is judged by the test above alone."""
    incident = INCIDENTS[name]
    honoured = _honoured(run_spec)
    if honoured is not None and unhonoured(incident.without, honoured):
        pytest.skip(f"{_who(run_spec)} cannot switch {incident.fix} off (ttsim_flags): no negative control")
    result, spec = _run(run_spec, name, seed, incident.without)
    failed = {v.request_id: v.defect for v in result.failed}
    if incident.victim not in failed and spec.generator is not None:
        pytest.skip(f"the {name} incident does not reach {_who(spec)}: without {incident.fix} it answers right, so "
                    f"{incident.fix_name} is not exercised by it")
    assert incident.victim in failed, f"seed {seed} arm {incident.without}: {failed}"


# -- our generator: the device holds what production saw ------------------------------------

def _merges(seed: int, name: str, arm: str):
    from harness.base.spec import RunSpec

    result, _ = _run(RunSpec(), name, seed, arm)
    return result


@pytest.mark.our_generator
@pytest.mark.parametrize("seed", SEEDS)
def test_slot_reuse_the_merge_reads_the_previous_occupants_next_token(seed):
    from model.markov import greedy_reference

    a, b = INCIDENTS["slot-reuse"].workload(seed).requests
    result = _merges(seed, "slot-reuse", "control")
    a_next = greedy_reference(a.prompt, a.max_tokens)[-1]  # what A's last decode sampled into the row
    rows = [r for e in result.merges for r in e.rows if r.request_id == "B" and r.host_prefilled]
    assert rows and all(r.dev_token == a_next and r.dev_pos in (r.host_pos, r.host_pos + 1) and r.source == "device"
                        for r in rows), rows


@pytest.mark.our_generator
@pytest.mark.parametrize("seed", SEEDS)
def test_stale_buffer_the_merge_reads_productions_array_against_eight_active_rows(seed):
    result = _merges(seed, "stale-position-buffer", "slots")
    reads = [(e.inputs.dev_positions, [r.host_pos for r in e.rows]) for e in result.merges if e.bucket == 8]
    hit = [(dev, host) for dev, host in reads if dev == [29, -1, -1, -1, -1, -1, -1, 28]]
    assert hit and all(p >= 0 for p in hit[0][1]) and hit[0][1][7] == 28, reads


@pytest.mark.our_generator
@pytest.mark.parametrize("seed", SEEDS)
def test_garbage_a_merge_reads_activations_in_a_position_buffer_and_the_clamp_changes_no_answer(seed):
    """The merge into width 1 reads a position no batch can have whose high half is a bf16
    activation (production's 1206993233 is 0x47F1 | 0x4151). With the clamp it becomes -1 and
    the guard rejects the merge (the host row is active); without it the patterns match and the
    rule compares it with the host's position, which it never equals: the host's again. The
    answers are the same, and right, both ways; only the guard's rejections differ."""
    without, with_clamp = _merges(seed, "garbage-position", "slots+guard"), _merges(seed, "garbage-position", "all")
    junk = [p for e in without.merges for p in e.inputs.dev_positions if not -1 <= p < e.inputs.max_context]
    assert junk and all(0x3000 <= (p >> 16) & 0x7FFF <= 0x4800 for p in junk), junk
    assert not without.failed and not with_clamp.failed
    assert [v.got for v in without.verdicts] == [v.got for v in with_clamp.verdicts]
    assert without.guard_rejects != with_clamp.guard_rejects  # what the clamp changes: the guard's rejections
