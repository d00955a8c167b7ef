"""`vllm serve` on ttsim: server start-up and the HTTP gates' durations, next to the same work
in process (the device part of start-up; the stage-3 workload through the in-process Engine).

    .venv/bin/python -m bench.bench_serve [--model tiny|markov] [--seed 29]

Start-up is wall time from the command to "/health 200 + worker ready" and the CPU seconds
the server's processes (API server + engine core) spent by then. Appends to runs/serve.jsonl.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

import torch

from bench import record


def _cpu_s(pid: int) -> float:
    import psutil

    p = psutil.Process(pid)
    total = 0.0
    for q in [p, *p.children(recursive=True)]:
        try:
            t = q.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            pass
    return total


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=("tiny", "markov"), default="tiny")
    p.add_argument("--seed", type=int, default=29)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    from fixtures import scenario
    from fixtures import system as system_
    from model.flags import ARMS
    from fixtures.workloads import FaultKnobs, stage3
    from hil import gates
    from fixtures.engine import modeldir
    from fixtures.vllm import server

    rec: dict = {"model": args.model, "seed": args.seed}
    with tempfile.TemporaryDirectory() as d:
        md = modeldir.write(f"{d}/model", args.model)
        s = server.start(md, Path(d) / "serve.log", env={"TTSIM_SEED": str(args.seed), "QWEN36_SDPA_STREAMING": "1"})
        try:
            rec["startup_s"] = s.startup_s
            rec["startup_cpu_s"] = _cpu_s(s.proc.pid)
            reqs = [gates.GateRequest(r.request_id, bytes(r.prompt).decode(), r.max_tokens)
                    for r in stage3(args.seed).requests]
            for name, fn in (("stage2", lambda rep, c: gates.stage2(rep, c, require_tool_call=False)),
                             ("stage3", lambda rep, c: gates.stage3(rep, c, reqs))):
                rep = gates.GateReport(name, "sim")
                t0 = time.perf_counter()
                fn(rep, gates.GateClient(s.url, rep))
                rec[f"{name}_s"] = time.perf_counter() - t0
                rec[f"{name}_status"] = rep.status()
            t0 = time.perf_counter()
            conc = gates.run_concurrent(gates.GateClient(s.url, gates.GateReport("x", "sim")), "c", reqs, 16)
            rec["http_concurrent_32_s"] = time.perf_counter() - t0
            rec["http_tokens"] = sum(len(a.token_ids or ()) for a in conc.values())
        finally:
            s.stop()
    # the same work in process, side by side
    t0 = time.perf_counter()
    system = system_.System(args.seed, FaultKnobs.swarm(args.seed), model=args.model)
    gen, _ = system_.build_runner(system, ARMS["all"], FaultKnobs.swarm(args.seed), args.seed)
    gen.warm_up()
    system.close()
    rec["inproc_device_build_s"] = time.perf_counter() - t0
    w = stage3(args.seed)
    expected = {r.request_id: [0] for r in w.requests}  # the timing does not need the oracle
    scenario.run_scenario(w, "all", args.seed, expected=expected, model=args.model)  # warm: imports, config
    t0 = time.perf_counter()
    scenario.run_scenario(w, "all", args.seed, expected=expected, model=args.model)
    rec["inproc_concurrent_32_s"] = time.perf_counter() - t0
    rec["http_over_inproc_concurrent"] = rec["http_concurrent_32_s"] / rec["inproc_concurrent_32_s"]
    rec["startup_over_device_build"] = rec["startup_s"] / rec["inproc_device_build_s"]
    path = record.write("serve", rec)
    for k, v in rec.items():
        print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    print(f"record -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
