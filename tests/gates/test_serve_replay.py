"""``ttsim serve-replay``: a served run re-run in process on its recorded admission schedule.

``data/served-without-guard`` is the records folder of a real `vllm serve` run (stage 3 on seed
29, arm `slots`: the prefilled-slot fix without the merge guard or the clamp; the plugin's steps;
a loaded machine) in which one concurrent request broke: `concurrent-req-28`, class `slot-reuse`
(at step 273 the merge kept the device's token 48 at position 134, the slot's previous
occupant's, where the guard would have seen the batch change and kept the host's 86). Over HTTP
that run cannot be had again at will; from its records it replays byte for byte, and under
production's arm (the guard on) the same schedule serves every request right.

If an intended change to the device, the runner or the model changes what this schedule
serves, this folder no longer replays: record a new one (serve stage 3 with
`hil.gates.run_concurrent`, keep a run whose records show a divergence) and say why in the commit.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.commands.cli import main

# a recorded run of ttsim's own generator: it judges no user's (skipped under --generator)
pytestmark = pytest.mark.our_generator

RUN = Path(__file__).parent / "data" / "served-without-guard"
BROKEN = "cmpl-concurrent-req-28-0-903c1043"


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    """The replays' records go to the test's folder, not the checkout's runs/."""
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))


def _records(out: str) -> list[dict]:
    (folder,) = [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("replay records: ")]
    return [json.loads(line) for line in (Path(folder) / "requests.jsonl").read_text().splitlines()]


def test_a_served_run_replays_byte_for_byte_from_its_records(capsys):
    served = {r["request"]: r for r in map(json.loads, (RUN / "requests.jsonl").read_text().splitlines())}
    assert main(["serve-replay", str(RUN)]) == 0
    out = capsys.readouterr().out
    assert "64 of 64 answers and admission steps equal the served run's" in out
    assert f"{BROKEN} diverges from its serial answer, as served: slot-reuse" in out
    replayed = _records(out)
    assert {r["request"]: (r["output_token_ids"], r["admitted"], r["admitted_step"], r["defect"]) for r in replayed} \
        == {k: (r["output_token_ids"], r["admitted"], r["admitted_step"], r["defect"]) for k, r in served.items()}
    assert [r["request"] for r in replayed if not r["equal"]] == [BROKEN]


def test_the_same_schedule_under_other_arms(capsys):
    """The schedule does not depend on the answers (no EOS, every request to its max_tokens), so it
    replays under any arm: with the guard (production's arm, and the candidate fix that reads the
    width that ran last) it serves every request right; with production's fixes all off the
    serial phase's slot reuse breaks too."""
    for arm in ("all", "all+last-run"):
        assert main(["serve-replay", str(RUN), "--arm", arm]) == 0
        out = capsys.readouterr().out
        assert "64 of 64 admission steps equal the served run's" in out
        assert f"under {arm}: 0 of 64 requests differ from their serial answers" in out
    assert main(["serve-replay", str(RUN), "--arm", "control"]) == 1
    out = capsys.readouterr().out
    broken = {r["request"]: r["defect"] for r in _records(out) if not r["equal"]}
    assert broken and f"under control: {len(broken)} of 64 requests differ" in out
    assert "slot-reuse" in broken.values() and BROKEN in broken
    assert any(rid.startswith("cmpl-serial-") for rid in broken)  # the serial phase too, unlike `slots`
    assert all(f"{rid} diverges from its serial answer: {cls}" in out for rid, cls in broken.items())


@pytest.mark.parametrize("field,change", [("output_token_ids", lambda v: v[:-1] + [(v[-1] + 1) % 256]),
                                          ("admitted_step", lambda v: 1)])
def test_a_replay_that_does_not_reproduce_names_the_request(tmp_path, capsys, field, change):
    """What the comparison reads: an answer, and the step the engine admitted the request at (a
    request recorded at step 1 but admitted after its predecessor cannot be admitted there)."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    recs = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    victim = max(recs, key=lambda r: r["admitted"])  # the last admitted: moving it moves nobody else
    victim[field] = change(victim[field])
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    assert main(["serve-replay", str(run)]) == 1
    out = capsys.readouterr().out
    assert f"  {victim['request']}: served " in out
    assert "the replay differs from the served run in 1 of 64 requests" in out


def test_bad_input_is_one_line_before_any_work(tmp_path, capsys):
    assert main(["serve-replay", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip().endswith("does not exist (the server log names it: 'ttsim records: ...')")
    assert main(["serve-replay", str(RUN), "--arm", "al"]) == 2
    assert "unknown arm 'al'" in capsys.readouterr().err
    old = tmp_path / "old"
    shutil.copytree(RUN, old)
    recs = [json.loads(line) for line in (old / "requests.jsonl").read_text().splitlines()]
    (old / "requests.jsonl").write_text("".join(json.dumps({**r, "admitted_step": None}) + "\n" for r in recs))
    assert main(["serve-replay", str(old)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "without an admission index and step" in err
    assert not (tmp_path / "runs").exists()  # refused before a worker was built


def test_a_gap_in_the_records_is_reported_not_waited_for(tmp_path, capsys):
    """A request the records lack (a server stopped before it finished) leaves engine steps no
    recorded request explains: the idle replay admits the next request at once and says that
    the schedule moved."""
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    recs = [json.loads(line) for line in (run / "requests.jsonl").read_text().splitlines()]
    gone = next(r for r in recs if r["request"].startswith("cmpl-serial-req-05-"))  # alone in the engine
    (run / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs if r is not gone))
    assert main(["serve-replay", str(run)]) == 1
    out = capsys.readouterr().out
    assert "cmpl-serial-req-06-" in out and "the replay differs from the served run in" in out


def test_the_replays_engine_has_the_served_engines_settings():
    """What the server's command line (harness/vllm/server.py) sets is what the replay builds."""
    from harness.vllm.rerun import _engine_config
    from harness.vllm.server import SERVE_ARGS

    def given(flag: str):
        i = SERVE_ARGS.index(flag)
        value = SERVE_ARGS[i + 1] if i + 1 < len(SERVE_ARGS) else "--"
        return True if value.startswith("--") else int(value)

    cfg = _engine_config(json.loads((RUN / "run.json").read_text()))
    assert (cfg.cache_config.enable_prefix_caching, cfg.model_config.max_model_len, cfg.scheduler_config.max_num_seqs,
            cfg.scheduler_config.max_num_batched_tokens, cfg.cache_config.block_size,
            cfg.scheduler_config.async_scheduling) == (
        given("--enable-prefix-caching"), given("--max-model-len"), given("--max-num-seqs"),
        given("--max-num-batched-tokens"), given("--block-size"), given("--async-scheduling"))


def test_a_failing_gate_test_prints_how_to_read_and_replay_its_served_run():
    """tests/gates/conftest.py appends this to a failing test against a sim server."""
    from harness.served import replay_commands

    log = ("INFO 12-03 20:21:27 [api_server.py] vLLM API server version 0.33.0\n"
           "(ttsim) INFO ttsim records: /runs/serve/20261203T202127-31833\n"
           "(ttsim) INFO ttsim worker ready: no SDPA (sweep model)\n")
    assert replay_commands(log) == ("records: /runs/serve/20261203T202127-31833\n"
                                    "  bin/ttsim serve-explain /runs/serve/20261203T202127-31833\n"
                                    "  bin/ttsim serve-replay /runs/serve/20261203T202127-31833")
    assert replay_commands("INFO ttsim worker ready\n") == ""


GENERATORS = Path(__file__).parents[1] / "generators" / "qwen36_style.py"


def test_a_replay_runs_the_runs_generator_and_leaves_no_ttnn_alias(tmp_path):
    """The generator that served the run serves its replay: ours, unless run.json names a user's
    (which then raises here in its first decode); the worker's ttnn alias goes with it."""
    import sys

    from harness.vllm.rerun import compare, rerun

    recorded = [json.loads(line) for line in (RUN / "requests.jsonl").read_text().splitlines()]
    _, replayed = rerun(str(RUN))
    assert compare(recorded, replayed) == []
    theirs = tmp_path / "theirs"
    shutil.copytree(RUN, theirs)
    meta = json.loads((theirs / "run.json").read_text())
    (theirs / "run.json").write_text(json.dumps({**meta, "generator": {
        "spec": f"{GENERATORS}:exploding_generator", "tt_metal": None}}))
    with pytest.raises(RuntimeError, match="device hung in decode"):
        rerun(str(theirs))
    assert "ttnn" not in sys.modules
