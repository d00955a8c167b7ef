"""Serving-path throughput: one stage-3 scenario's wall time, and a sweep of one arm.

    .venv/bin/python -m bench.bench_sweep [--seeds 1000] [--arm all] [--workers 2]

Target: a 1,000-seed sweep of one arm in <= 60 s on 2 cores with the sweep model
(model.markov: the full serving path -- vLLM scheduler, slots, per-bucket traces with
uninitialized persistent buffers, on-device sampling, the merge -- without transformer
math). The Qwen TINY model is timed on one scenario for comparison.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from bench import record


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=1000)
    p.add_argument("--arm", default="all")
    p.add_argument("--workers", type=int, default=2)
    args = p.parse_args(argv)
    if args.seeds <= 0 or args.workers <= 0:
        p.error("--seeds and --workers must be > 0")
    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    from fixtures import arms, scenario
    from fixtures.workloads import stage3

    single = {}
    for model in ("markov", "tiny"):
        w = stage3(0)
        expected = scenario.serial_answers(w, 0, model=model)
        scenario.run_scenario(w, args.arm, 0, expected=expected, model=model)  # warm (imports, config)
        t0 = time.perf_counter()
        scenario.run_scenario(w, args.arm, 0, expected=expected, model=model)
        single[model] = time.perf_counter() - t0
        print(f"one stage-3 scenario ({model}, arm {args.arm}): {single[model]:.3f} s", flush=True)
    t0 = time.perf_counter()
    summary = arms.sweep([args.arm], range(args.seeds), model="markov", workers=args.workers,
                         progress=arms.ProgressBar(f"sweep {args.arm}"))
    wall = time.perf_counter() - t0
    s = summary[args.arm]
    print(f"{args.seeds} seeds of arm {args.arm}: {wall:.1f} s ({args.seeds / wall:.1f} seeds/s) on "
          f"{args.workers} workers; {s.failed_requests} failed of {s.requests} requests")
    path = record.write("sweep", {"arm": args.arm, "seeds": args.seeds, "workers": args.workers,
                                  "sweep_wall_s": wall, "seeds_per_s": args.seeds / wall,
                                  "scenario_wall_s": single, "target_s": 60,
                                  "failed_requests": s.failed_requests, "requests": s.requests})
    print(f"record -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
