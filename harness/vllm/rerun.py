"""``ttsim serve-replay RUN_DIR``: a served run re-run in this process on its recorded admission schedule.

Over HTTP the batches are the clients' timing, so two servers given the same requests need not
answer alike wherever an arm's merge can fail (the control, and production's residual). What a
served run does repeat is its schedule: the records hold each request's admission index and
engine step (harness/served.py), and the run's seed, model, flags, knobs and step policy
(``run.json``). This builds the served engine again without HTTP: the worker
(harness/vllm/worker.py) with those settings, vLLM's real scheduler with the server's engine
settings (harness/vllm/server.py: prefix caching, max model length, slots, chunk, block size),
driven as EngineCore drives it (model.serving.Engine, batch queue of 2), each request added
just before the engine step that admitted it. The replay writes a served run's folder of its
own (``run.json`` names the run it replays), and a served run whose answers it does not
reproduce byte for byte is a determinism bug of ours, reported request by request.

A request a client aborted early (fewer tokens than its ``max_tokens``; the byte models have no
EOS) is replayed to its ``max_tokens``: when the abort fell is not recorded, so the replay says
so and its answers from then on may differ.
"""

from __future__ import annotations

import json
from pathlib import Path

from harness.served import REQUESTS, RUN, schedule


def _start_env(meta: dict) -> dict[str, str]:
    """The environment the served worker read at start, rebuilt from ``run.json``."""
    from model.flags import GeneratorFlags
    from model.settings import STREAMING_ENV

    from harness.base.settings import GENERATOR_ENV, SEED_ENV, TT_METAL_ENV

    env = {SEED_ENV: str(meta["seed"]), STREAMING_ENV: "1" if meta.get("sdpa_streaming") else "0"}
    env.update((var, "1" if meta["flags"][field] else "0") for field, var in GeneratorFlags.ENV.items())
    gen = meta.get("generator") or {}
    env[GENERATOR_ENV] = gen.get("spec") or ""  # empty: ours (harness.base.settings.read_generator_env)
    env[TT_METAL_ENV] = gen.get("tt_metal") or ""
    return env


def served_config(model: str, additional: dict, *, max_len: int | None = None, prefix_caching: bool = True):
    """The served engine's vLLM config, in process: the server's engine settings (``max_len``
    default its --max-model-len), the platform's choices for ``additional`` (the worker's
    --additional-config). Uncached: the platform and the worker write into it."""
    from harness.engine.config import vllm_config
    from harness.engine.sizes import BLOCK_SIZE, MAX_BATCHED, MAX_MODEL_LEN, MAX_SLOTS, NUM_BLOCKS
    from harness.vllm.platform import TtsimPlatform

    cfg = vllm_config.__wrapped__(model, max_len or MAX_MODEL_LEN, NUM_BLOCKS, MAX_BATCHED, MAX_SLOTS, BLOCK_SIZE,
                                  prefix_caching)
    cfg.additional_config = dict(additional)
    TtsimPlatform.check_and_update_config(cfg)
    return cfg


def _engine_config(meta: dict):
    """``run.json``'s served engine config."""
    return served_config(meta["model"], {"mesh_cols": meta.get("mesh_cols", 1), "knobs": meta["knobs"],
                                         "step_policy": meta["step_policy"], "staged_records": True})


def engine_for(worker, sched):
    """``model.serving.Engine`` driving ``worker`` as EngineCore drives it: ``execute_model``, then
    ``sample_tokens`` whose output is read when the engine processes the step."""
    from types import SimpleNamespace

    from model.serving import Engine

    def execute(so):
        out = worker.execute_model(so)
        return (lambda: out) if out is not None else worker.sample_tokens(None).get_output

    return Engine(sched, SimpleNamespace(execute=execute))


def _block_hasher(cfg):
    """The prefix-cache block hashes EngineCore attaches to each request it admits (vLLM 0.33
    ``EngineCore.__init__``); without them a scheduler with prefix caching never hits its cache."""
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    fn = get_hash_fn_by_name(cfg.cache_config.prefix_caching_hash_algo)
    init_none_hash(fn)
    return get_request_block_hasher(cfg.cache_config.block_size, fn, cfg.num_hash_lookahead_tokens)


def _serve(engine, worker, reqs: list[dict], hasher, on_step) -> None:
    """Admit ``reqs`` on their recorded schedule and step ``engine`` until all have finished:
    every request the served engine admitted at its next step arrives now (admission order); an
    idle engine takes the next one whatever its step (the steps between were spent on requests
    the records lack: the replay reports the steps it missed)."""
    from vllm import SamplingParams
    from vllm.v1.request import Request

    added = 0
    while added < len(reqs) or engine.has_work():
        while added < len(reqs) and (reqs[added]["admitted_step"] <= worker.steps + 1 or not engine.has_work()):
            r = reqs[added]
            added += 1
            engine.add_request(Request(r["request"], prompt_token_ids=list(r["prompt_token_ids"]),
                                       sampling_params=SamplingParams(max_tokens=r["max_tokens"], temperature=0.0),
                                       pooling_params=None, arrival_time=float(added), block_hasher=hasher))
        if engine.has_work():
            before = len(engine.finished)
            engine.step()
            if on_step is not None and len(engine.finished) != before:
                on_step(len(engine.finished), len(reqs))


def rerun(directory: str, on_step=None, arm: str | None = None) -> tuple[Path, list[dict]]:
    """Re-run the served run in ``directory`` (under ``arm``'s flags instead of the run's own when
    given); returns the replay's records folder and its request records (finishing order).
    ``on_step(done, total)``: progress, once per request finished."""
    from harness.engine.config import scheduler_for
    from harness.base.settings import environ
    from harness.system import model_config
    from harness.vllm.worker import TtsimWorker

    d, meta, reqs = schedule(directory)
    if arm is not None:
        from dataclasses import asdict

        from model.flags import arm_flags

        meta = {**meta, "flags": asdict(arm_flags(arm))}
    cfg = _engine_config(meta)
    # the worker loads the run's generator (ours unless run.json names one) for its lifetime
    with environ(_start_env(meta)):
        worker = TtsimWorker(cfg, local_rank=0, rank=0, distributed_init_method="", is_driver_worker=True)
        worker.init_device()
        records = worker.records  # staged: it appears whole when the replay has finished, else never
        try:
            worker.load_model()
            worker.compile_or_warm_up_model()
            run = records.dir / RUN
            run.write_text(json.dumps({**json.loads(run.read_text()), "replay_of": str(d)}, sort_keys=True,
                                      indent=1) + "\n")
            # as EngineCore builds it: the class the platform named, on the worker's own config
            sched = scheduler_for(cfg, model_config(meta["model"]), worker.kv_blocks,
                                  cfg.scheduler_config.get_scheduler_cls())
            _serve(engine_for(worker, sched), worker, reqs, _block_hasher(cfg), on_step)
            out = records.commit()
        finally:
            records.discard()  # nothing once committed
            worker.shutdown()
    return out, [json.loads(line) for line in (out / REQUESTS).read_text().splitlines()]


def compare(served: list[dict], replayed: list[dict], answers: bool = True) -> list[str]:
    """One line per request whose replay differs from its served record: its admission step, and
    with ``answers`` its answer."""
    again = {r["request"]: r for r in replayed}
    lines = []
    for r in served:
        a = again.get(r["request"])
        if a is None:
            lines.append(f"{r['request']}: served, not finished in the replay")
        elif a["admitted_step"] != r["admitted_step"] or (answers and a["output_token_ids"] != r["output_token_ids"]):
            lines.append(f"{r['request']}: served {r['output_token_ids']} admitted at step {r['admitted_step']}; "
                         f"replayed {a['output_token_ids']} admitted at step {a['admitted_step']}")
    return lines
