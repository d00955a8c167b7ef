"""Arms sharing a run (harness.shared_arms) give each arm exactly its lone run's result.

A sweep runs arms that read the device alike as one run while their merges write the same
inputs, and reruns an arm from the start once it parts. These tests pin that it is exact:
whole results (verdicts, blame, guard counts, device stats, every merge event) and merge
trace files equal the lone runs on seeds where arms part and where they never do.
"""

import dataclasses

import pytest

from harness.base.spec import RunSpec
from harness import scenario
from harness.shared_arms import READ_FLAGS, SharedArmsGenerator, group_arms, split_by_effect
from harness.workloads import stage3
from model.flags import ARMS
from model.generator import MergeSite
from model.merge_trace import read_trace
from model.serving import Engine

pytestmark = [pytest.mark.needs_fault_injection, pytest.mark.our_generator]


# seed -> the groups that part from the run of the six merging arms (found with run_arms)
# (seed 1: all+last-run and all+remap-marks share all's run and part at the merges their own
# reads and marks decide apart; on 104 all+last-run reads other inputs, guard-rejects other
# merges, and writes what all writes to the end; on 110 it parts: its read decides otherwise)
PARTING = {1: [["slots+guard", "all", "all+last-run", "all+remap-marks"], ["all+last-run"], ["all+remap-marks"]],
           100: [["slots+guard", "all", "all+last-run", "all+remap-marks"]],
           104: [["slots+guard", "all", "all+last-run", "all+remap-marks"]],
           110: [["slots+guard", "all", "all+last-run", "all+remap-marks"], ["all+last-run"]]}


def _spy_partings(monkeypatch) -> list:
    """The groups that part from every shared run from now on (monkeypatch.undo() ends it)."""
    parted = []
    real = scenario._GroupRun.run

    def spy(self, expected):
        results = real(self, expected)
        parted.extend(self.departed if len(self.group) > 1 else [])
        return results

    monkeypatch.setattr(scenario._GroupRun, "run", spy)
    return parted


def _lone(workload, seed, expected, record_merges=False, **spec):
    return {arm: scenario.run_scenario(workload, arm, RunSpec(seed=seed, **spec), expected=expected,
                                       record_merges=record_merges) for arm in ARMS}


@pytest.mark.parametrize("seed", sorted(PARTING))
def test_shared_runs_equal_lone_runs(seed, monkeypatch):
    workload = stage3(seed)
    expected = scenario.serial_answers(workload, RunSpec(seed=seed))
    parted = _spy_partings(monkeypatch)
    shared = scenario.run_arms(workload, list(ARMS), RunSpec(seed=seed), expected=expected, record_merges=True)
    monkeypatch.undo()
    assert parted == PARTING[seed], f"seed {seed}: the arms part differently than pinned"
    lone = _lone(workload, seed, expected, record_merges=True)
    assert list(shared) == list(ARMS)
    for arm in ARMS:
        assert dataclasses.asdict(shared[arm]) == dataclasses.asdict(lone[arm]), (
            f"seed {seed} arm {arm}: the shared run differs from the lone run; replay: "
            f"bin/ttsim replay --arm {arm} --seed {seed}")
    assert any(r.guard_rejects for r in lone.values()), "no arm's guard rejected: the per-arm counts go untested"


def test_an_arm_whose_inputs_cannot_be_peeked_parts_and_still_equals_its_lone_run(monkeypatch):
    """Seed 104: all+last-run reads the last run's inputs after a width change while the run
    reads the target's. With no peek possible it must part at that merge, not guess."""
    import ttsim.tensor

    seed = 104
    workload = stage3(seed)
    expected = scenario.serial_answers(workload, RunSpec(seed=seed))
    monkeypatch.setattr(ttsim.tensor, "peek", lambda t: None)
    parted = _spy_partings(monkeypatch)
    shared = scenario.run_arms(workload, ["all", "all+last-run"], RunSpec(seed=seed), expected=expected, record_merges=True)
    monkeypatch.undo()
    assert parted == [["all+last-run"]]
    lone = scenario.run_scenario(workload, "all+last-run", RunSpec(seed=seed), expected=expected, record_merges=True)
    assert dataclasses.asdict(shared["all+last-run"]) == dataclasses.asdict(lone)


def test_inference_mode_changes_no_result(monkeypatch):
    """run_arms runs in torch's inference mode for speed; without it every arm's result, every
    merge event included, is the same (seed 104: two arms part and are rerun)."""
    import contextlib

    import torch

    seed = 104
    workload = stage3(seed)
    expected = scenario.serial_answers(workload, RunSpec(seed=seed))
    fast = scenario.run_arms(workload, list(ARMS), RunSpec(seed=seed), expected=expected, record_merges=True)
    monkeypatch.setattr(torch, "inference_mode", contextlib.nullcontext)
    plain = scenario.run_arms(workload, list(ARMS), RunSpec(seed=seed), expected=expected, record_merges=True)
    assert {a: dataclasses.asdict(r) for a, r in fast.items()} == {a: dataclasses.asdict(r) for a, r in plain.items()}


def test_shared_runs_write_the_lone_runs_merge_traces(tmp_path):
    seed = 104  # two arms part and are rerun: their partial merges must not be written
    workload = stage3(seed)
    expected = scenario.serial_answers(workload, RunSpec(seed=seed))
    scenario.run_arms(workload, list(ARMS), RunSpec(seed=seed, merge_trace=str(tmp_path / "shared.jsonl")), expected=expected)
    _lone(workload, seed, expected, merge_trace=str(tmp_path / "lone.jsonl"))
    assert (tmp_path / "shared.jsonl").read_bytes() == (tmp_path / "lone.jsonl").read_bytes()
    assert [run.meta["arm"] for run in read_trace(str(tmp_path / "shared.jsonl"))] == list(ARMS)


def test_a_failing_shared_run_still_writes_what_it_recorded(tmp_path, monkeypatch):
    seed = 100
    workload = stage3(seed)
    steps = 0
    step = Engine.step

    def failing(self):
        nonlocal steps
        steps += 1
        if steps == 30:
            raise RuntimeError("device lost")
        step(self)

    monkeypatch.setattr(Engine, "step", failing)
    with pytest.raises(RuntimeError, match="device lost"):
        scenario.run_arms(workload, ["control", "slots", "all"], RunSpec(seed=seed, merge_trace=str(tmp_path / "t.jsonl")), expected=scenario.serial_answers(workload, RunSpec(seed=seed)))
    runs = read_trace(str(tmp_path / "t.jsonl"))
    assert [r.meta["arm"] for r in runs] == ["control", "slots", "all"] and all(r.merges for r in runs)


def test_arms_group_by_how_they_read_the_device():
    assert group_arms(ARMS) == [["control", "slots", "slots+guard", "all", "all+last-run", "all+remap-marks"],
                                ["no-merge"], ["what-if"]]
    for name in READ_FLAGS:  # each read flag alone separates two arms
        a = ARMS["all"]
        b = dataclasses.replace(a, **{name: not getattr(a, name)})
        assert group_arms({"a": a, "b": b}) == [["a"], ["b"]]
    assert group_arms({"x": ARMS["control"], "y": ARMS["all"]}) == [["x", "y"]]


def test_a_shared_generator_refuses_arms_it_cannot_tell_apart_or_share():
    with pytest.raises(ValueError, match="must agree on merge, whatif_async_merge_read, whatif_never_run_bucket"):
        SharedArmsGenerator(None, None, None, arms={"all": ARMS["all"], "what-if": ARMS["what-if"]},
                            max_context=1024, max_pages=32)
    with pytest.raises(ValueError, match="must differ in their flags"):
        SharedArmsGenerator(None, None, None, arms={"all": ARMS["all"], "same": ARMS["all"]},
                            max_context=1024, max_pages=32)


def _site(dev_tok, dev_pos, host_tok, host_pos, prefilled=(), remap=None):
    n = len(host_pos)
    recorded = [r in prefilled for r in range(n)]
    remapped = None if remap is None else [remap[r] in prefilled for r in range(n)]
    return MergeSite(5, n, n, False, n, 1024, dev_tok, dev_pos, host_tok, host_pos, recorded, remapped)


def _split(site, *arms):
    return split_by_effect({arm: site.decide(ARMS[arm]) for arm in arms}, dict.fromkeys(arms, site))


def test_decisions_that_write_the_same_inputs_stay_together():
    # row 1 is inactive on the host but not on the device: the guard rejects, the others keep
    # nothing else either (row 0's device position is behind) -- same writes, different whys
    site = _site([7, 9], [3, 40], [8, 0], [4, -1])
    decisions = {arm: site.decide(ARMS[arm]) for arm in ("control", "slots+guard")}
    assert decisions["slots+guard"].guard_rejected and not decisions["control"].guard_rejected
    assert split_by_effect(decisions, dict.fromkeys(decisions, site)) == [["control", "slots+guard"]]


def test_decisions_that_write_different_inputs_part_first_arm_first():
    # row 0 is prefilled and the device is one ahead: control keeps it, the slots fix does not
    site = _site([7, 0], [5, -1], [8, 0], [4, -1], prefilled=[0])
    assert _split(site, "control", "slots", "all") == [["control"], ["slots", "all"]]
    assert _split(site, "slots", "control", "all") == [["slots", "all"], ["control"]]


def test_decisions_that_write_different_positions_only_part():
    # the device token equals the host's, its position is one ahead: only the position differs
    site = _site([8, 0], [5, -1], [8, 0], [4, -1], prefilled=[0])
    d = {arm: site.decide(ARMS[arm]) for arm in ("control", "slots")}
    (tc, pc), (ts, ps) = (d[a].merged(site.dev_tok, site.host_tok, site.host_pos) for a in ("control", "slots"))
    assert tc == ts and pc != ps
    assert split_by_effect(d, dict.fromkeys(d, site)) == [["control"], ["slots"]]


def test_the_marks_a_decision_sees_follow_its_own_flags():
    """One site decides all and all+remap-marks apart: slot 0 was prefilled and the plugin's
    condense gathered it to row 1. F1 forces the host on row 0 (a row whose device state came
    from slot 1), the candidate fix on row 1; each event reports the marks its decision used."""
    site = _site([7, 9], [5, 6], [8, 3], [4, 5], prefilled=[0], remap=[1, 0])
    d = {arm: site.decide(ARMS[arm]) for arm in ("all", "all+remap-marks")}
    assert site.marks(ARMS["all"]) == [True, False] and site.marks(ARMS["all+remap-marks"]) == [False, True]
    assert d["all"].keep == [False, True] and d["all+remap-marks"].keep == [True, False]
    assert _split(site, "all", "all+remap-marks") == [["all"], ["all+remap-marks"]]
    assert [r.prefilled for r in site.event(d["all+remap-marks"], ARMS["all+remap-marks"]).rows] == [False, True]
    assert [r.prefilled for r in site.event(d["all"], ARMS["all"]).rows] == [True, False]


def test_without_a_remap_both_marks_are_the_rows_own():
    site = _site([7, 9], [5, 6], [8, 3], [4, 5], prefilled=[0])
    assert site.marks(ARMS["all"]) == site.marks(ARMS["all+remap-marks"]) == [True, False]
    assert _split(site, "all", "all+remap-marks") == [["all", "all+remap-marks"]]


def test_on_a_given_backend_every_arm_runs_alone(monkeypatch):
    """Cards do not replay their timing, so arms sharing a run would not be independent
    samples: with a backend given (here ttsim's own, passed as one) nothing is shared."""
    from harness.system import choose_backend

    seed = 100
    workload = stage3(seed)
    groups = []
    real = scenario._GroupRun.run

    def spy(self, expected):
        groups.append(list(self.group))
        return real(self, expected)

    monkeypatch.setattr(scenario._GroupRun, "run", spy)
    expected = scenario.serial_answers(workload, RunSpec(seed=seed))
    got = scenario.run_arms(workload, ["control", "slots"], RunSpec(seed=seed, backend=choose_backend(hil=False)),
                            expected=expected)
    assert groups == [["control"], ["slots"]]
    monkeypatch.undo()
    assert scenario.run_arms(workload, ["control", "slots"], RunSpec(seed=seed), expected=expected)["slots"] == got["slots"]
