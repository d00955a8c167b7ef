"""`ttsim arms` and its subcommands `merge` and `compare`: the bodies behind the CLI's parsing."""

from __future__ import annotations

import sys

from harness.base import interrupts
from harness.base.errors import HardwareRefused, UsageError
from harness.base.outputs import Staged
from harness.sweep import report as report_
from harness.sweep import verdict


def run(args) -> int:
    """`ttsim arms` (its options checked by harness.commands.preflight.arms): sweep, print, record.

    SIGINT/SIGTERM stop it: the pool and its workers end, the staged outputs are removed, and
    the one line says how far it got. Outputs are committed together at the end, signals held
    back meanwhile, so each is whole or absent."""
    progress = _Progress(report_.ProgressBar(f"arms x {len(args.shard_seeds)} seeds"), len(args.shard_seeds))
    staged = Staged()
    try:
        with interrupts.handled():
            backend, hardware = hardware_backend(args) if args.hil else (None, None)
            from dataclasses import replace

            from harness.system import check_arms, generator_loaded

            # workers append to a staged copy of the trace: a stopped sweep adds nothing to it
            spec = replace(args.spec, backend=backend,
                           merge_trace=staged.path(args.record_merges, append=True) if args.record_merges else None)
            with generator_loaded(spec) as user:
                # the arms and the verdict depend on the generator: checked once it is loaded,
                # still before any seed runs
                names = args.arm_names or default_arms(user)
                check_arms(names, user)
                expect = verdict.parse(args.expect, names) if args.expect is not None else []
                return _sweep(args, spec, names, hardware, progress, staged, expect)
    except interrupts.Interrupted as exc:
        where = ("after the sweep; its outputs are written" if staged.committed else
                 f"at seed {progress.at} of {progress.total}; nothing written")
        raise interrupts.Interrupted(exc.signum, f"interrupted {where}") from None
    finally:
        staged.discard()


def default_arms(user) -> list[str]:
    """Every arm for ours (``user`` None); for a user's generator (harness.loader.UserGenerator)
    the production arms it can have (its flags), or as-is alone when that leaves no control to
    compare with (``all`` keeps every default)."""
    from model.flags import ARMS, AS_IS, PRODUCTION_ARMS, unhonoured

    if user is None:
        return list(ARMS)
    runnable = [a for a in PRODUCTION_ARMS if not unhonoured(a, user.honoured)]
    return runnable if len(runnable) > 1 else [AS_IS]


class _Progress:
    """The sweep's progress bar, and how far the sweep got (for an interrupt's message)."""

    def __init__(self, bar: report_.ProgressBar, total: int):
        self.bar = bar
        self.total = total
        self.done = 0

    @property
    def at(self) -> int:
        """The seed in progress, 1-based (the last one once all are done)."""
        return min(self.done + 1, self.total)

    def __call__(self, done: int, total: int) -> None:
        self.done = done
        self.bar(done, total)


def _sweep(args, spec, names: list[str], hardware, progress: _Progress, staged: Staged, expect: list) -> int:
    import os
    import time

    import torch

    from harness.base import records
    from harness.system import generator_errors
    from harness.sweep import arms as A
    from harness.sweep import ray as ray_executor
    from harness.sweep import shards

    run_seeds = args.shard_seeds
    shard = None
    if args.shard is not None:
        index, count = shards.parse_shard(args.shard)
        shard = {"index": index, "count": count, "seed_start": run_seeds.start, "seeds": len(run_seeds)}
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    warm = None  # vLLM's start-up, timed apart: a fixed cost, not throughput (Ray workers each pay their own)
    if args.executor == "local":
        A.warm_up(spec)
        warm = time.perf_counter() - t0
    try:
        summaries = A.sweep(names, run_seeds, spec, workers=args.workers, progress=progress, executor=args.executor,
                            ray_address=args.ray_address)
    except ray_executor.RayUnavailable as exc:  # installed, yet `import ray` failed
        raise UsageError(str(exc)) from None
    except generator_errors() as exc:  # the user's generator: one line, with the seed's replay command
        raise UsageError(str(exc)) from None
    wall = time.perf_counter() - t0
    report = {"model": spec.model, "seed_start": args.seed_start, "seeds": args.seeds,
              **({"generator": spec.generator.text} if spec.generator is not None else {}),
              "step_policy": spec.step_policy.name, "trace_mode": spec.trace_mode.name,
              "backend": "hil" if spec.backend is not None else "ttsim",
              "workload": "stage3: 32 requests at concurrency 16, swarm knobs per seed",
              "arms": {a: summaries[a].as_json(a, spec) for a in names}}
    if shard is not None:
        report["shard"] = shard
    if hardware:
        report["hardware"] = hardware
    report_.print_report(report)
    if args.json:
        staged.write_text(args.json, shards.dumps(report))
    if args.plot:
        report_.plot(report, staged.path(args.plot))
    record = {**report, "wall_s": wall, "warm_up_s": warm, "workers": args.workers, "executor": args.executor,
              "seeds_per_s": len(run_seeds) / wall}
    with interrupts.deferred():
        staged.commit()
        path = records.write("arms", record)
    what = f"shard {args.shard}: {len(run_seeds)}" if shard else f"{args.seeds}"
    where = (f"the Ray cluster at {args.ray_address}" if args.ray_address else
             f"{args.workers} worker(s){' (ray)' if args.executor == 'ray' else ''}")
    warmed = "" if warm is None else f" ({warm:.1f} s of it starting vLLM)"
    print(f"{what} seeds x {len(names)} arms in {wall:.1f} s{warmed} on {where}; record -> {os.path.relpath(path)}")
    broken = verdict.check(report, expect)
    for line in broken:
        print(line, file=sys.stderr)
    return 1 if broken else 0


def check_executor(args) -> None:
    """--executor/--ray-address combinations that cannot work, refused before any sweep or card probe."""
    from harness.sweep import ray as ray_executor

    if args.ray_address is not None and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    if args.executor != "ray":
        return
    if args.hil:
        raise UsageError("--executor ray cannot run --hil: cards are exclusive to one process (use --executor local)")
    if args.ray_address is not None and args.record_merges:
        raise UsageError("--record-merges cannot be used with --ray-address: the cluster's workers would "
                         "write the trace on their own machines")
    try:
        ray_executor.check_installed()
    except ray_executor.RayUnavailable as exc:
        raise UsageError(str(exc)) from None


def merge(args) -> int:
    """`ttsim arms merge`: the shards' reports into the unsharded one (--json checked by
    harness.commands.preflight.merge)."""
    from harness.sweep import shards

    try:
        report = shards.merge(args.parts)
    except shards.ShardError as exc:
        raise UsageError(str(exc)) from None
    report_.print_report(report)
    staged = Staged()
    try:
        staged.write_text(args.json, shards.dumps(report))
        staged.commit()
    finally:
        staged.discard()
    print(f"merged {len(args.parts)} shard(s) -> {args.json}")
    return 0


def hardware_backend(args):
    """The cards' backend for --hil (one process: cards are exclusive), or HardwareRefused."""
    from harness.system import BackendRefused, choose_backend

    args.workers = 1
    try:
        chosen = choose_backend(hil=True, cards=args.cards)
    except BackendRefused as exc:
        raise HardwareRefused(f"--hil: refusing to run: {exc}") from None
    return chosen, chosen.hardware


def compare(args) -> int:
    """`ttsim arms compare SIM.json HW.json`: exit 0 when every shared arm's intervals overlap."""
    from harness.sweep.compare import ReportError
    from harness.sweep.compare import compare as compare_reports

    try:
        return compare_reports(args.a, args.b)
    except ReportError as exc:
        raise UsageError(str(exc)) from None
