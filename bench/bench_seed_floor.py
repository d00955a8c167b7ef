"""Where one sweep seed's time goes, and the cost a seed would have if ttsim's own Python were free.

    .venv/bin/python -m bench.bench_seed_floor [--seeds 10] [--seed-start 1]

In one process, after vLLM's start-up (timed: ``warm_up_s``) and one warm seed, the same seeds
(all arms, the sweep model) run three times:

1. plain: wall per seed (``seed_ms``);
2. under torch's profiler: the top-level aten calls per seed and their inclusive time
   (``torch_ms``: every tensor operation anyone issues; the profiler itself adds a little);
3. with every public ``ttsim`` function and vLLM's ``schedule`` / ``update_from_output`` timed
   from outside (nested calls counted once): ``ttsim_ms`` (ttsim's Python, the torch calls it
   makes and the device commands it drains) and ``vllm_ms``.

Derived, from shares within each pass (the machine's speed drifts between passes, and the
profiler slows every op it records): ``ttsim_python_share = ttsim_share - torch_share`` (every
torch call counted as ttsim's, so if anything low), and ``floor_ms``, the seed cost with every
ttsim op costing only its torch calls and nothing else changed: ``seed_ms`` less that share.
Passes 2 and 3 run slower than pass 1 (their walls are recorded); the shares are what count.
Appends one record to the runs folder (``seed_floor``).

``--against REV`` measures this tree and a temporary ``git worktree`` of REV AT THE SAME TIME
(each in its own process, one core each, so a shared machine's changing load hits both alike)
and appends one ``seed_floor`` record holding both splits (``new``, ``old``) and their ratios.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import torch

from bench import record


def _timed_module(module, names, acc: dict, depth: list) -> dict:
    """Wrap ``module.<name>`` for each name so its calls add their wall to ``acc["s"]`` (the outermost
    call only, while ``depth`` counts nesting); returns the originals to put back."""
    saved = {}
    for name in names:
        fn = getattr(module, name)
        saved[name] = fn

        @functools.wraps(fn)
        def timed(*a, _fn=fn, **k):
            if depth[0]:
                return _fn(*a, **k)
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return _fn(*a, **k)
            finally:
                depth[0] -= 1
                acc["s"] += time.perf_counter() - t0

        setattr(module, name, timed)
    return saved


ROOT = Path(__file__).resolve().parent.parent


def _side_by_side(args) -> int:
    """This tree and a worktree of ``args.against`` measured at once; one record with both."""
    with tempfile.TemporaryDirectory(prefix="ttsim-bench-floor-") as tmp:
        tmp = Path(tmp)
        old = tmp / "old"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), args.against], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            procs = {}
            for name, tree in (("new", ROOT), ("old", old)):
                env = {**os.environ, "TTSIM_RUNS_DIR": str(tmp / f"runs-{name}"), "PYTHONPATH": str(tree)}
                # this file's measurement in both trees (the tree's own code on PYTHONPATH)
                cmd = [sys.executable, str(Path(__file__).resolve()), "--seeds", str(args.seeds), "--seed-start",
                       str(args.seed_start)]
                procs[name] = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               text=True)
            got = {}
            for name, proc in procs.items():
                out, err = proc.communicate()
                if proc.returncode != 0:
                    raise SystemExit(f"bench_seed_floor: the {name} tree failed:\n{err[-2000:]}")
                print(f"-- {name}:\n{out}", end="")
                got[name] = json.loads((tmp / f"runs-{name}" / "seed_floor.jsonl").read_text().splitlines()[-1])
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, capture_output=True)
    keys = ("seed_ms", "torch_ms", "ttsim_ms", "vllm_ms", "ttsim_python_ms", "floor_ms", "torch_top_level_calls_per_seed")
    rec = {"seeds": args.seeds, "seed_start": args.seed_start, "arms": "all", "model": "markov", "against": args.against,
           "new": got["new"], "old": got["old"],
           "ratios_old_over_new": {k: got["old"][k] / got["new"][k] for k in keys if got["new"].get(k)},
           "load_avg_1m": os.getloadavg()[0]}
    r = rec["ratios_old_over_new"]
    print(f"old ({args.against}) / new, side by side: seed {r['seed_ms']:.2f}x, ttsim's own Python "
          f"{r['ttsim_python_ms']:.2f}x, inside ttsim's API {r['ttsim_ms']:.2f}x, torch calls "
          f"{r['torch_top_level_calls_per_seed']:.2f}x fewer")
    print(f"record -> {record.write('seed_floor', rec)}")
    return 0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--seed-start", type=int, default=1)
    p.add_argument("--against", metavar="REV", help="git revision to measure side by side (e.g. HEAD~3)")
    args = p.parse_args(argv)
    if args.seeds <= 0 or args.seed_start < 0:
        p.error("--seeds must be > 0 and --seed-start >= 0")
    if args.against:
        return _side_by_side(args)
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)  # as the CLI's sweep
    t0 = time.perf_counter()
    from harness.base.spec import RunSpec
    from harness.sweep import arms  # noqa: E402 - timed with vLLM's start-up
    from model.flags import ARMS

    spec = RunSpec()  # the sweep model, production's step policy, ours
    arms.warm_up(spec)
    warm_up_s = time.perf_counter() - t0
    all_arms = list(ARMS)
    seeds = range(args.seed_start, args.seed_start + args.seeds)
    arms.run_seed(spec.with_seed(0), all_arms)  # first-use costs (lazy imports, caches) out of the passes

    def run_all() -> float:
        t = time.perf_counter()
        for s in seeds:
            arms.run_seed(spec.with_seed(s), all_arms)
        return (time.perf_counter() - t) * 1000 / args.seeds

    seed_ms = run_all()

    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        profiled_ms = run_all()
    top = [e for e in prof.events() if e.cpu_parent is None]
    torch_ms = sum(e.cpu_time_total for e in top) / 1000 / args.seeds
    top_ops = collections.Counter(e.name for e in top).most_common(8)

    import ttsim
    from vllm.v1.core.sched.scheduler import Scheduler

    public = [n for n in dir(ttsim) if not n.startswith("_") and callable(getattr(ttsim, n))
              and not isinstance(getattr(ttsim, n), type)]
    t_acc, v_acc = {"s": 0.0}, {"s": 0.0}
    depth = [0]
    saved_t = _timed_module(ttsim, public, t_acc, depth)
    saved_v = _timed_module(Scheduler, ["schedule", "update_from_output"], v_acc, [0])
    try:
        wrapped_ms = run_all()
    finally:
        for n, fn in saved_t.items():
            setattr(ttsim, n, fn)
        for n, fn in saved_v.items():
            setattr(Scheduler, n, fn)
    ttsim_ms = t_acc["s"] * 1000 / args.seeds
    vllm_ms = v_acc["s"] * 1000 / args.seeds
    # shares within each pass (this machine's speed drifts between passes, and the profiler slows
    # every op it records), applied to the plain pass
    torch_share, ttsim_share, vllm_share = torch_ms / profiled_ms, ttsim_ms / wrapped_ms, vllm_ms / wrapped_ms
    ttsim_python_share = ttsim_share - torch_share
    ttsim_python_ms = ttsim_python_share * seed_ms
    floor_ms = seed_ms - ttsim_python_ms
    rec = {"seeds": args.seeds, "seed_start": args.seed_start, "arms": "all", "model": "markov",
           "warm_up_s": warm_up_s, "seed_ms": seed_ms, "profiled_seed_ms": profiled_ms, "wrapped_seed_ms": wrapped_ms,
           "torch_top_level_calls_per_seed": len(top) / args.seeds, "torch_ms": torch_ms,
           "torch_top_ops": top_ops, "ttsim_ms": ttsim_ms, "vllm_ms": vllm_ms, "torch_share": torch_share,
           "ttsim_share": ttsim_share, "vllm_share": vllm_share, "ttsim_python_share": ttsim_python_share,
           "ttsim_python_ms": ttsim_python_ms, "floor_ms": floor_ms}
    print(f"{args.seeds} seeds x all arms, one process: {seed_ms:.0f} ms a seed (vLLM start-up {warm_up_s:.1f} s)")
    print(f"  torch: {len(top) / args.seeds:.0f} top-level calls a seed, {torch_share:.0%} of the profiled pass "
          f"({profiled_ms:.0f} ms a seed)")
    print(f"  inside ttsim's API {ttsim_share:.0%}, vLLM's scheduler {vllm_share:.0%} of the timed pass "
          f"({wrapped_ms:.0f} ms a seed)")
    print(f"  ttsim's own Python about {ttsim_python_share:.0%} or more; a seed with it free: about {floor_ms:.0f} ms "
          f"({seed_ms / floor_ms:.2f}x)")
    print(f"record -> {record.write('seed_floor', rec)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
