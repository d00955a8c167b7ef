"""Record anywhere, replay in sim: merge traces and ``ttsim replay --trace``.

Every ``traces/*.jsonl`` is a regression test: replayed under the flags it was recorded with
it must reproduce its recorded decisions and its failure; under ``all`` no merge may keep a
token or position the host disagrees with. Record one with merge_trace=PATH (any sim
run), ``ttsim arms|replay --record-merges PATH``, or a MergeTraceWriter as the on_merge hook.
"""

import json
from pathlib import Path

import pytest

from harness.base.spec import RunSpec
from harness.commands import cli
from harness import scenario
from harness.replay import arm_of, recorded_flags, replay_run
from harness.workloads import stage3
from model.flags import ARMS
from model.merge_trace import MergeTraceWriter, TraceError, read_trace

pytestmark = pytest.mark.our_generator  # a test of ttsim's own generator (its merge records)

TRACES = sorted((Path(__file__).parent / "traces").glob("*.jsonl"))
SLOT_REUSE = (27, "control", "req-14")  # seed, arm it fails under, the request it fails


@pytest.mark.parametrize("path", TRACES, ids=[p.stem for p in TRACES])
def test_recorded_trace_reproduces_its_failure_and_passes_under_all(path):
    for run in read_trace(str(path)):
        recorded = replay_run(run)
        assert all(m.changed == [] for m in recorded), f"{path}: the replay departs from the recorded decisions"
        assert [m.wrong for m in recorded] == [m.recorded_wrong for m in recorded]
        assert any(m.wrong for m in recorded), f"{path}: recorded under {arm_of(recorded_flags(run.merges[0]))} " \
                                               f"but no merge is wrong; replay: bin/ttsim replay --trace {path}"
        fixed = replay_run(run, ARMS["all"])
        bad = [(m.line, m.wrong) for m in fixed if m.wrong]
        assert bad == [], f"{path}: wrong under all at (line, rows) {bad}; replay: bin/ttsim replay --trace {path} --arm all"


def test_the_slot_reuse_trace_blames_the_failing_request():
    seed, arm, request = SLOT_REUSE
    [run] = read_trace(str(Path(__file__).parent / "traces" / f"slot-reuse-seed{seed}-{arm}.jsonl"))
    assert run.meta == {"arm": arm, "seed": seed, "model": "markov"}
    wrong = [(m.step, m.rows[r]["request"]) for m in replay_run(run) for r in m.wrong]
    assert [req for _, req in wrong] == [request]
    assert [m for m in replay_run(run, ARMS["slots"]) if m.wrong] == []  # its own fix suffices


@pytest.mark.needs_fault_injection
@pytest.mark.parametrize("arm", ["control", "slots+guard", "all"])
def test_a_live_recording_replays_to_the_same_decisions(arm, tmp_path, monkeypatch):
    """``merge_trace=PATH`` records any sim run; replaying the reads under the run's own flags gives
    back every decision the generator made (one decision function for both)."""
    seed = SLOT_REUSE[0]
    path = tmp_path / "t.jsonl"
    workload = stage3(seed)
    result = scenario.run_scenario(workload, arm, RunSpec(seed=seed, merge_trace=str(path)), expected=scenario.serial_answers(workload, RunSpec(seed=seed)), record_merges=True)
    [run] = read_trace(str(path))
    assert len(run.merges) == len(result.merges) > 10
    replayed = replay_run(run)
    assert [m.changed for m in replayed] == [[]] * len(replayed)
    assert [[r["replayed"] for r in m.rows] for m in replayed] == [[r.source for r in e.rows] for e in result.merges]
    assert [[r.request_id for r in e.rows] for e in result.merges] == [rec["request_ids"] for rec in run.merges]
    assert sum(bool(m.wrong) for m in replayed) == sum(bool(e.kept_wrong()) for e in result.merges)


def test_runs_append_whole(tmp_path):
    path = tmp_path / "t.jsonl"
    src = read_trace(str(TRACES[0]))[0].merges
    for seed in (1, 2):
        w = MergeTraceWriter(str(path), seed=seed)
        w.lines += [json.dumps(m) for m in src[:3]]
        w.close()
    runs = read_trace(str(path))
    assert [r.meta for r in runs] == [{"seed": 1}, {"seed": 2}] and [len(r.merges) for r in runs] == [3, 3]


def _lines(n=3):
    return TRACES[0].read_text().splitlines()[:n]


def _bad(tmp_path, lines, end="\n"):
    p = tmp_path / "bad.jsonl"
    p.write_text("\n".join(lines) + end)
    return p


@pytest.mark.parametrize("mutate, message", [
    (lambda ls: ls[:2] + ['{"v": 1, "kind": "merge", "step": '], "bad.jsonl:3: not JSON"),
    (lambda ls: [ls[0].replace('"v": 1', '"v": 2')] + ls[1:], "bad.jsonl:1: schema version 2"),
    (lambda ls: ls + ["[1, 2]"], "bad.jsonl:4: a record must be a JSON object"),
    (lambda ls: ls + ['{"v": 1, "kind": "mystery"}'], "bad.jsonl:4: unknown record kind"),
    (lambda ls: [ls[0], ls[1].replace('"step"', '"stop"')], "bad.jsonl:2: merge record lacks 'step'"),
    (lambda ls: [ls[0], ls[1].replace('"sources": [', '"sources": ["host", ', 1)],
     "bad.jsonl:2: 'sources' has 9 rows, bucket is 8"),
    (lambda ls: [ls[0]], "no merge records"),
])
def test_bad_traces_name_the_line(tmp_path, mutate, message):
    p = _bad(tmp_path, mutate(_lines()))
    with pytest.raises(TraceError, match=message.replace("[", r"\[")):
        read_trace(str(p))


def test_a_truncated_last_line_is_named(tmp_path):
    p = _bad(tmp_path, _lines(3), end="")
    p.write_text(p.read_text()[:-40])
    with pytest.raises(TraceError, match="bad.jsonl:3: truncated line"):
        read_trace(str(p))


def test_cli_replays_a_trace_and_exits_2_on_bad_input(tmp_path, capsys):
    trace = str(TRACES[0])
    assert cli.main(["replay", "--trace", trace]) == 1  # recorded under control: the failure
    assert "WRONG rows [0]" in capsys.readouterr().out
    assert cli.main(["replay", "--trace", trace, "--arm", "all"]) == 0
    assert "0 wrong" in capsys.readouterr().out
    assert cli.main(["replay", "--trace", trace, "--arm", "nope"]) == 2
    assert "unknown arm 'nope'" in capsys.readouterr().err
    bad = _bad(tmp_path, [_lines()[0].replace('"v": 1', '"v": 7')])
    assert cli.main(["replay", "--trace", str(bad)]) == 2
    assert "bad.jsonl:1: schema version 7" in capsys.readouterr().err
    assert cli.main(["replay", "--trace", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
