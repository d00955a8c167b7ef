"""`vllm serve` on ttsim: server start-up and the HTTP gates' durations, next to the same work
in process (the device part of start-up; the stage-3 workload through the in-process Engine).

    .venv/bin/python -m bench.bench_serve [--model tiny|markov] [--seed 29]
    .venv/bin/python -m bench.bench_serve --repeats 10 [--arm all] [--seed 29] [--json PATH]

Start-up is wall time from the command to "/health 200 + worker ready" and the CPU seconds
the server's processes (API server + engine core) spent by then. Appends to runs/serve.jsonl.

``--repeats N``: the served sweep. Stage 3 (hil.gates.stage3) N times against a fresh `vllm serve`
of ``--arm``'s fix flags on the seed (its swarm knobs, the plugin's steps: production's
configuration), and the table of `ttsim arms`: failed requests of the concurrent-equals-serial
check over all repeats, rate and 95% Wilson interval, each failure's defect class from the
server's records (harness/served.py). ``--json`` writes an arms report `ttsim arms compare`
reads beside an in-process one.
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
    p.add_argument("--repeats", type=int, default=None, help="the served sweep: stage 3 this many times")
    p.add_argument("--arm", default="all", help="the served sweep's arm (default: %(default)s, production's fixes)")
    p.add_argument("--json", metavar="PATH", default=None, help="the served sweep's arms report")
    args = p.parse_args(argv)
    if args.repeats is not None:
        return served_sweep(args)
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    from harness import scenario
    from harness import system as system_
    from harness.base.spec import RunSpec
    from model.flags import ARMS
    from harness.workloads import FaultKnobs, stage3
    from hil import gates
    from harness.engine import modeldir
    from harness.vllm import server

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
    spec = RunSpec(seed=args.seed, model=args.model)
    system = system_.System(spec, FaultKnobs.swarm(args.seed))
    gen, _ = system_.build_runner(system, ARMS["all"], FaultKnobs.swarm(args.seed))
    gen.warm_up()
    system.close()
    rec["inproc_device_build_s"] = time.perf_counter() - t0
    w = stage3(args.seed)
    expected = {r.request_id: [0] for r in w.requests}  # the timing does not need the oracle
    scenario.run_scenario(w, "all", spec, expected=expected)  # warm: imports, config
    t0 = time.perf_counter()
    scenario.run_scenario(w, "all", spec, expected=expected)
    rec["inproc_concurrent_32_s"] = time.perf_counter() - t0
    rec["http_over_inproc_concurrent"] = rec["http_concurrent_32_s"] / rec["inproc_concurrent_32_s"]
    rec["startup_over_device_build"] = rec["startup_s"] / rec["inproc_device_build_s"]
    path = record.write("serve", rec)
    for k, v in rec.items():
        print(f"{k:32s} {v:.3f}" if isinstance(v, float) else f"{k:32s} {v}")
    print(f"record -> {path}")
    return 0


def _arm_env(arm: str) -> dict[str, str]:
    from model.flags import GeneratorFlags, arm_flags

    flags = arm_flags(arm)
    return {var: "1" if getattr(flags, name) else "0" for name, var in GeneratorFlags.ENV.items()}


def served_repeat(model_dir: str, arm: str, seed: int, folder: Path) -> dict:
    """One stage 3 against a fresh server of ``arm``: the gate's verdicts and each failed
    request's defect class from the server's records."""
    from harness import served
    from harness.vllm import server
    from harness.workloads import stage3
    from hil import gates

    reqs = [gates.GateRequest(r.request_id, bytes(r.prompt).decode(), r.max_tokens) for r in stage3(seed).requests]
    s = server.start(model_dir, folder / "serve.log",
                     env={"TTSIM_SEED": str(seed), "TTSIM_RUNS_DIR": str(folder / "runs"), **_arm_env(arm)})
    try:
        rep = gates.GateReport("stage3", "sim")
        gates.stage3(rep, gates.GateClient(s.url, rep), reqs)
    finally:
        s.stop()
    check = next(c for c in rep.checks if c["check"] == "concurrent-equals-serial")
    (run_dir,) = (folder / "runs" / "serve").iterdir()
    _, meta, records = served.load(str(run_dir))
    cache: dict = {}
    first = {}  # the first record of each (check, gate request): the answers the check compared
    for r in sorted(records, key=lambda r: r["admitted"]):
        for name in served.aliases(r["request"]):
            first.setdefault(name, r)

    def defect(rid: str) -> str:
        """The class of whichever side the check compared (its serial or its concurrent answer)
        differs from the oracle; "unexplained" when neither does."""
        found = [f"{side}:{served.judge(meta, first[f'{side}-{rid}'], cache)['defect']}"
                 for side in ("concurrent", "serial") if f"{side}-{rid}" in first
                 and not served.judge(meta, first[f"{side}-{rid}"], cache)["equal"]]
        return ",".join(found) or "unexplained"

    defects = {rid: defect(rid) for rid in check["failed_requests"]}
    return {"requests": check["requests"], "failed": check["failed_requests"], "defects": defects,
            "status": rep.status(), "checks": {c["check"]: c["status"] for c in rep.checks}}


def served_sweep(args) -> int:
    """``--repeats N``: stage 3 over HTTP N times, as an arms report."""
    import json
    from collections import Counter

    from harness.engine import modeldir
    from harness.base.stats import wilson
    from harness.sweep.report import print_report
    from model.flags import ARMS

    if args.arm not in ARMS:
        raise SystemExit(f"bench_serve: unknown arm {args.arm!r}; choose from {', '.join(ARMS)}")
    if args.repeats < 1:
        raise SystemExit(f"bench_serve: --repeats must be at least 1, got {args.repeats}")
    rows, t0 = [], time.perf_counter()
    with tempfile.TemporaryDirectory() as d:
        md = modeldir.write(f"{d}/model", args.model)
        for i in range(args.repeats):
            folder = Path(d) / f"repeat-{i}"
            folder.mkdir()
            row = served_repeat(md, args.arm, args.seed, folder)
            rows.append(row)
            print(f"repeat {i + 1}/{args.repeats}: {len(row['failed'])} of {row['requests']} requests differ "
                  f"{row['defects'] or ''} checks {row['checks']}", flush=True)
    failed = sum(len(r["failed"]) for r in rows)
    requests = sum(r["requests"] for r in rows)
    lo, hi = wilson(failed, requests)
    failing = [i for i, r in enumerate(rows) if r["failed"]]
    summary = {"runs": len(rows), "requests": requests, "failed_requests": failed, "failing_seeds": failing,
               "rate": failed / requests, "wilson95": [lo, hi],
               "defects": dict(sorted(Counter(d for r in rows for d in r["defects"].values()).items())),
               "guard_rejects": "n/a", "preemptions": "n/a",  # the server's, not read over HTTP
               "failing_repeats": len(failing), "repeat_wilson95": list(wilson(len(failing), len(rows)))}
    report = {"backend": "http", "model": args.model, "seed": args.seed, "repeats": args.repeats,
              "note": "runs = stage-3 repeats against fresh servers of one seed; failing_seeds = failing repeats",
              "arms": {args.arm: summary}}
    print_report(report)
    print(f"stage 3 failed in {len(failing)} of {len(rows)} repeats (95% Wilson [{summary['repeat_wilson95'][0]:.3f}, "
          f"{summary['repeat_wilson95'][1]:.3f}])")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    path = record.write("serve", {"kind": "served-sweep", "model": args.model, "seed": args.seed, "arm": args.arm,
                                  "repeats": args.repeats, "failed_requests": failed, "requests": requests,
                                  "rate": failed / requests, "wilson95": [lo, hi], "failing_repeats": len(failing),
                                  "repeat_wilson95": summary["repeat_wilson95"], "defects": summary["defects"],
                                  "checks": [r["checks"] for r in rows], "wall_s": time.perf_counter() - t0})
    print(f"record -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
