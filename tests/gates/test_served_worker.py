"""The served engine's steps without HTTP: the scheduler class the platform plugin chooses, and
the worker (harness/vllm/worker.py) driven through its own execute_model/sample_tokens with
that scheduler's real output, as vLLM's EngineCore drives it (model.serving.Engine re-enacts
EngineCore's batch queue)."""

from __future__ import annotations

import pytest

MAX_LEN = 256  # shorter than the server's: the test's requests are short


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    """The worker's records go to the test's folder, not the checkout's runs/."""
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))


def _config(additional: dict):
    """A fresh vLLM config of the sweep model, as `vllm serve` would hand the platform (a shorter
    context, no prefix caching)."""
    from harness.vllm.rerun import served_config

    return served_config("markov", additional, max_len=MAX_LEN, prefix_caching=False)


@pytest.mark.parametrize("policy,cls", [(None, "harness.engine.scheduler.PhasedScheduler"),
                                        ("phased", "harness.engine.scheduler.PhasedScheduler"),
                                        ("mixed", None)])
def test_the_platform_sets_the_plugins_scheduler_by_default(policy, cls):
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler

    from harness.engine.scheduler import PhasedScheduler

    cfg = _config({} if policy is None else {"step_policy": policy})
    assert cfg.scheduler_config.scheduler_cls == cls
    assert cfg.scheduler_config.get_scheduler_cls() is (AsyncScheduler if policy == "mixed" else PhasedScheduler)


def test_an_unknown_step_policy_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="step_policy must be one of mixed, phased, got 'tt'"):
        _config({"step_policy": "tt"})


def test_serve_passes_only_the_settings_that_differ_from_the_workers_defaults():
    from harness.vllm.server import additional_config

    from harness.base.spec import MIXED, PHASED

    assert additional_config(mesh_cols=1, step_policy=PHASED) == ()
    assert additional_config(mesh_cols=2, step_policy=MIXED) == (
        "--additional-config", '{"mesh_cols": 2, "step_policy": "mixed"}')


def _serve_in_process(policy: str, monkeypatch, env: dict | None = None, n: int = 12):
    """The worker on the sweep model, fed by the scheduler the platform chose; returns the
    generator calls of each engine step, the requests, every request's answer as vLLM's
    scheduler returned it, and the worker's records folder."""
    from harness.base.spec import RunSpec, step_policy
    from harness.system import make_scheduler
    from harness.vllm.rerun import engine_for
    from harness.vllm.worker import TtsimWorker
    from harness.workloads import stage3
    from vllm import SamplingParams
    from vllm.v1.request import Request

    monkeypatch.setenv("TTSIM_SEED", "29")
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    cfg = _config({"step_policy": policy, "knobs": "quiet"})
    worker = TtsimWorker(cfg, local_rank=0, rank=0, distributed_init_method="", is_driver_worker=True)
    worker.init_device()
    try:
        worker.load_model()
        worker.compile_or_warm_up_model()
        steps: list[list[tuple]] = []
        gen = worker.generator
        real_prefill, real_decode = gen.prefill_forward, gen.decode_forward

        def prefill(**kw):
            steps[-1].append(("prefill",))
            return real_prefill(**kw)

        def decode(**kw):
            remap = kw.get("slot_remap")
            steps[-1].append(("decode", kw["start_pos"].tolist(), None if remap is None else remap.tolist()))
            return real_decode(**kw)

        gen.prefill_forward, gen.decode_forward = prefill, decode

        real_execute = worker.execute_model

        def execute(so):
            steps.append([])
            return real_execute(so)

        worker.execute_model = execute
        sched = make_scheduler(RunSpec(step_policy=step_policy(policy)))
        assert type(sched) is cfg.scheduler_config.get_scheduler_cls()  # the class the served engine builds
        engine = engine_for(worker, sched)
        requests = stage3(29).requests[:n]
        for i, r in enumerate(requests):
            engine.add_request(Request(r.request_id, prompt_token_ids=list(r.prompt), pooling_params=None,
                                       sampling_params=SamplingParams(max_tokens=r.max_tokens, temperature=0.0,
                                                                      ignore_eos=True), arrival_time=float(i)))
        while engine.has_work():
            engine.step()
        return steps, requests, engine.outputs, worker.records.dir
    finally:
        worker.shutdown()


def test_a_served_decode_step_hands_the_generator_condensed_rows_with_slot_remap(monkeypatch):
    from model.markov import greedy_reference

    steps, requests, outputs, _ = _serve_in_process("phased", monkeypatch)
    decodes = [c for step in steps for c in step if c[0] == "decode"]
    assert all(len({c[0] for c in step}) <= 1 for step in steps), "a phased step mixed prefill and decode"
    for _, positions, _ in decodes:  # padded to capacity, live rows first (condensed)
        live = [p >= 0 for p in positions]
        assert len(positions) == 8 and live == sorted(live, reverse=True), positions
    remapped = [c for c in decodes if c[2] is not None]
    assert remapped, "no served decode moved its rows (slot_remap)"
    assert all(sorted(c[2]) == list(range(8)) for c in remapped)
    for r in requests:  # quiet knobs, production's fixes: every answer is its serial answer
        assert outputs[r.request_id] == greedy_reference(r.prompt, r.max_tokens), r.request_id


def test_mixed_keeps_vllms_stock_steps_and_stable_slots(monkeypatch):
    steps, _, _, _ = _serve_in_process("mixed", monkeypatch)
    assert any({c[0] for c in step} == {"prefill", "decode"} for step in steps)
    assert all(c[2] is None for step in steps for c in step if c[0] == "decode")


CONTROL = {"QWEN36_PREFILLED_SLOTS_FIX": "0", "QWEN36_MERGE_BATCH_GUARD": "0", "QWEN36_POSITION_CLAMP": "0"}


@pytest.fixture(scope="module")
def control_run(tmp_path_factory):
    """The control arm (production's fixes off) served in process: some answers diverge."""
    mp = pytest.MonkeyPatch()
    mp.setenv("TTSIM_RUNS_DIR", str(tmp_path_factory.mktemp("runs")))
    try:
        yield _serve_in_process("phased", mp, CONTROL, n=32)
    finally:
        mp.undo()


def test_the_served_records_hold_every_answer_and_its_verdict(control_run):
    import json

    from model.markov import greedy_reference

    _, requests, outputs, run_dir = control_run
    recs = {r["request"]: r for r in map(json.loads, (run_dir / "requests.jsonl").read_text().splitlines())}
    assert set(recs) == {r.request_id for r in requests}
    assert sorted(r["admitted"] for r in recs.values()) == list(range(len(requests)))
    divergent = set()
    for r in requests:  # the records against what vLLM's scheduler handed back, judged here
        rec, serial = recs[r.request_id], greedy_reference(r.prompt, r.max_tokens)
        assert rec["output_token_ids"] == outputs[r.request_id]
        assert rec["equal"] == (outputs[r.request_id] == serial)
        assert (rec["defect"] is None) == rec["equal"]
        if not rec["equal"]:
            divergent.add(r.request_id)
    assert divergent, "the control arm diverged nowhere: the test shows nothing"
    assert json.loads((run_dir / "run.json").read_text())["arm"] == "control"


def test_serve_explain_names_a_divergent_requests_merges_class_and_replay(control_run, capsys):
    import json

    from harness.commands.cli import main
    from harness.replay import report

    _, _, _, run_dir = control_run
    recs = [json.loads(line) for line in (run_dir / "requests.jsonl").read_text().splitlines()]
    bad = next(r for r in recs if not r["equal"])
    assert main(["serve-explain", str(run_dir), bad["request"]]) == 1
    out = capsys.readouterr().out
    assert f"DIVERGES from its serial answer" in out and f": {bad['defect']}" in out
    assert f"replay: bin/ttsim replay --trace {run_dir / 'merges.jsonl'} --arm control" in out
    assert f"the whole run again, in process: bin/ttsim serve-replay {run_dir}" in out
    touched = [line for line in out.splitlines() if line.startswith("    line ")]
    from model.merge_trace import read_trace

    (run,) = read_trace(str(run_dir / "merges.jsonl"))  # every row of the request, counted here
    rows = [(line, row) for rec, line in zip(run.merges, run.lines)
            for row, rid in enumerate(rec["request_ids"]) if rid == bad["request"]]
    assert rows and [f"    line {line} " in t and f" row {row}:" in t for (line, row), t in zip(rows, touched)] == (
        [True] * len(rows)) and len(touched) == len(rows), (rows, touched)
    if bad["merge_defect"]:  # the merge that kept a wrong row for it is among them
        assert any("<-- kept what the host disagrees with" in line for line in touched)
    # the recorded trace is what `replay --trace` reads: it re-decides the run's merges
    import io

    assert report(str(run_dir / "merges.jsonl"), "control", io.StringIO()) in (0, 1)
    assert main(["serve-explain", str(run_dir)]) == 1
    listing = capsys.readouterr().out
    assert f"{sum(not r['equal'] for r in recs)} of {len(recs)} requests differ" in listing


@pytest.mark.parametrize("argv,message", [
    (["serve-explain", "/nonexistent/run"], "served run folder /nonexistent/run does not exist"),
    (["serve-explain", "{run}", "req-999"], "no finished request 'req-999' in"),
])
def test_serve_explain_refuses_bad_input_in_one_line(control_run, capsys, argv, message):
    from harness.commands.cli import main

    argv = [a.replace("{run}", str(control_run[3])) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_folder_that_is_not_a_run_is_refused(tmp_path, capsys):
    from harness.commands.cli import main

    assert main(["serve-explain", str(tmp_path)]) == 2
    assert "is not a served run folder (no run.json)" in capsys.readouterr().err


def test_a_request_is_found_by_the_ids_its_client_knows():
    from harness.served import aliases

    names = aliases("cmpl-concurrent-req-11-0-1a2b3c4d")  # vLLM's engine id of request_id "concurrent-req-11"
    assert {"cmpl-concurrent-req-11-0", "cmpl-concurrent-req-11", "concurrent-req-11"} <= names
    assert "concurrent-req" not in names and "req-11" not in names
    assert aliases("req-11") == {"req-11"}  # an in-process id has no random suffix


def test_a_served_run_repeats_in_process_wrong_answers_and_merges_included(control_run, monkeypatch, tmp_path):
    """The same seed, requests and admission schedule (here fixed: no HTTP timing) give the
    same answers and the same merge decisions, the control arm's wrong ones included."""
    import json

    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "again"))
    _, _, outputs, run_dir = control_run
    _, _, again, again_dir = _serve_in_process("phased", monkeypatch, CONTROL, n=32)
    assert again == outputs

    def lines(d, name):
        return [json.loads(line) for line in (d / name).read_text().splitlines()]

    assert lines(again_dir, "requests.jsonl") == lines(run_dir, "requests.jsonl")
    assert lines(again_dir, "merges.jsonl") == lines(run_dir, "merges.jsonl")
