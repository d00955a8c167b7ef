"""Sweep throughput: the `ttsim arms` main job timed side by side against an older tree.

    .venv/bin/python -m bench.bench_sweep [--seeds 200] [--chunks 4] [--workers 2] [--against REV] [--keep DIR]

Runs ``python -m harness.commands.cli arms`` (all arms, the sweep model) over the same seeds in this
tree and, with ``--against REV``, in a temporary ``git worktree`` of REV. The two trees run
each chunk of seeds AT THE SAME TIME with half the workers each, so a shared machine's
changing load hits both alike; the speedup is the ratio of their sweep walls. Each chunk's
``--json`` report must be byte-identical between the trees (no fidelity traded for speed);
``--keep DIR`` keeps every chunk's reports (``new-0.json``, ``old-0.json``, ...) to look at a
difference.
Times are the sweep walls the CLI records (process start-up excluded; vLLM's import and
config, ``warm_up_s``, included and also given apart) plus the command's wall.
Targets: 6 arms x 1000 seeds <= 120 s (stretch 60 s); the default job (200 seeds) <= 30 s.
The record goes to the runs folder (harness.base.records) as sweep.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import record

ROOT = Path(__file__).resolve().parent.parent


def _run_chunks(jobs: dict[str, tuple[Path, Path, Path]], seed_start: int, seeds: int, workers: int) -> dict:
    """Run the CLI over the same seeds in every tree of ``jobs`` (name -> tree, json, runs) at once."""
    procs = {}
    for name, (tree, out, runs) in jobs.items():
        env = {**os.environ, "TTSIM_RUNS_DIR": str(runs), "PYTHONPATH": str(tree)}
        cmd = [sys.executable, "-m", "harness.commands.cli", "arms", "--seeds", str(seeds), "--seed-start", str(seed_start),
               "--workers", str(workers), "--json", str(out)]
        procs[name] = (cmd, time.perf_counter(), subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE,
                                                                   stderr=subprocess.PIPE, text=True))
    got = {}
    for name, (cmd, t0, proc) in procs.items():
        _, err = proc.communicate()
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"bench_sweep: {' '.join(cmd)} in {jobs[name][0]} failed:\n{err[-2000:]}")
        rec = json.loads((jobs[name][2] / "arms.jsonl").read_text().splitlines()[-1])
        got[name] = {"sweep_s": rec["wall_s"], "command_s": wall, "json": jobs[name][1].read_bytes()}
        if rec.get("warm_up_s") is not None:  # vLLM's start-up within the sweep wall (trees before 2026-12 do not say)
            got[name]["warm_up_s"] = rec["warm_up_s"]
    return got


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, default=200)
    p.add_argument("--chunks", type=int, default=4, help="alternate the trees this many times")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--against", metavar="REV", help="git revision to time side by side (e.g. HEAD~3)")
    p.add_argument("--keep", metavar="DIR", type=Path, help="keep each chunk's JSON reports in DIR")
    args = p.parse_args(argv)
    if args.seeds <= 0 or args.workers <= 0 or not 1 <= args.chunks <= args.seeds:
        p.error("--seeds and --workers must be > 0 and 1 <= --chunks <= --seeds")
    if args.keep is not None:
        try:
            args.keep.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # before the sweep, not after minutes of it
            p.error(f"--keep {args.keep}: {e.strerror}")
    with tempfile.TemporaryDirectory(prefix="ttsim-bench-sweep-") as tmp:
        tmp = Path(tmp)
        trees = {"new": ROOT}
        if args.against:
            old = tmp / "old"
            subprocess.run(["git", "worktree", "add", "--detach", str(old), args.against], cwd=ROOT, check=True,
                           capture_output=True)
            trees["old"] = old
        try:
            totals = {k: {"sweep_s": 0.0, "command_s": 0.0} for k in trees}
            identical = True
            bounds = [args.seeds * i // args.chunks for i in range(args.chunks + 1)]
            workers = max(1, args.workers // len(trees))
            for c, (lo, hi) in enumerate(zip(bounds, bounds[1:])):
                got = _run_chunks({name: (tree, tmp / f"{name}-{c}.json", tmp / f"runs-{name}")
                                   for name, tree in trees.items()}, lo, hi - lo, workers)
                for name in trees:
                    if args.keep is not None:
                        (args.keep / f"{name}-{c}.json").write_bytes(got[name]["json"])
                    for k in ("sweep_s", "command_s", "warm_up_s"):
                        if k in got[name]:
                            totals[name][k] = totals[name].get(k, 0.0) + got[name][k]
                    print(f"chunk {c + 1}/{args.chunks} seeds {lo}..{hi - 1} {name}: sweep {got[name]['sweep_s']:.1f} s, "
                          f"command {got[name]['command_s']:.1f} s", flush=True)
                if "old" in got and got["old"]["json"] != got["new"]["json"]:
                    identical = False
                    print(f"chunk {c + 1}: JSON DIFFERS between the trees", flush=True)
        finally:
            if args.against:
                subprocess.run(["git", "worktree", "remove", "--force", str(trees["old"])], cwd=ROOT,
                               capture_output=True)
    rec = {"seeds": args.seeds, "arms": "all", "model": "markov", "workers_per_tree": workers, "chunks": args.chunks,
           "new": totals["new"], "load_avg_1m": os.getloadavg()[0]}
    line = f"{args.seeds} seeds x all arms, {workers} worker(s) per tree: new sweep {totals['new']['sweep_s']:.1f} s"
    if "warm_up_s" in totals["new"]:
        line += f" ({totals['new']['warm_up_s']:.1f} s of it starting vLLM)"
    if args.against:
        ratio = totals["old"]["sweep_s"] / totals["new"]["sweep_s"]
        rec.update({"against": args.against, "old": totals["old"], "speedup": ratio, "json_identical": identical})
        line += f", old ({args.against}) {totals['old']['sweep_s']:.1f} s: {ratio:.2f}x; JSON identical: {identical}"
    print(line)
    print(f"record -> {record.write('sweep', rec)}")
    return 0 if identical else 1


if __name__ == "__main__":
    raise SystemExit(main())
