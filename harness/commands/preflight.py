"""Every command's options checked, and resolved, before the command does any work.

The CLI calls the chosen command's check (``args.check``) right after parsing and before its
body, so bad input is one line and exit 2 before a seed runs, vLLM starts or torch is
imported; and a sweep never runs for minutes to fail at writing its results. A new option
gets its check here, in its command's function. Nothing here imports torch or vLLM.
"""

from __future__ import annotations

import os

from harness.base.errors import UsageError, check_distinct, check_writable, check_writable_dir

#: the most seeds one sweep takes: ~1.5 days of 2 workers at ~0.14 s per seed each; a bigger
#: study is split with --seed-start (and a typo like 10**20 is refused, not run for hours)
MAX_SEEDS = 1_000_000
#: a pool worker per CPU is the most that speeds a sweep up; more only add memory and contention
DEFAULT_WORKERS = 2


def cpus() -> int:
    """The CPUs this process may run on (its affinity, which a container or taskset narrows)."""
    return len(os.sched_getaffinity(0))


def nothing(args) -> None:
    """A command with nothing to check beyond its parsing."""


def arms(args) -> None:
    """``ttsim arms``."""
    from harness.commands.arms import check_executor

    args.arm_names = arm_names(args.arms)
    if args.expect is not None:  # its form now; its arms against the sweep's once the generator is loaded
        from harness.sweep import verdict

        verdict.parse(args.expect, args.arm_names or list(verdict.every_arm()))
    if args.seeds <= 0:
        raise UsageError(f"--seeds must be > 0, got {args.seeds}")
    if args.seeds > MAX_SEEDS:
        raise UsageError(f"--seeds must be at most {MAX_SEEDS}, got {args.seeds} (split a bigger study with "
                         f"--seed-start)")
    _workers(args)
    check_executor(args)
    args.shard_seeds = _shard(args)
    args.cards = _hil_devices(args.hil_devices) if args.hil else None
    args.spec = _run_spec(args, seed=args.seed_start)
    outputs = {"--json": args.json, "--plot": args.plot, "--record-merges": args.record_merges}
    outputs = {what: path for what, path in outputs.items() if path is not None}
    for what, path in outputs.items():
        check_writable(path, what)
    if args.plot is not None:
        from harness.sweep.report import check_plot_format

        check_plot_format(args.plot)
    from harness.base import records

    check_distinct({**outputs, "the run record": str(records.check_writable("arms"))})


def arm_names(text: str | None) -> list[str] | None:
    """``--arms``: known, non-empty and each once (None: the default for the generator in
    force, chosen once it is loaded)."""
    from model.flags import ARMS, AS_IS

    if text is None:
        return None
    known = (*ARMS, AS_IS)
    names = [a.strip() for a in text.split(",")]
    if "" in names:
        raise UsageError(f"--arms {text!r} has an empty name; give comma-separated arms from {', '.join(known)}")
    unknown = [a for a in names if a not in known]
    if unknown:
        raise UsageError(f"unknown arm(s) {', '.join(unknown)}; choose from {', '.join(known)}")
    twice = sorted({a for a in names if names.count(a) > 1}, key=names.index)
    if twice:
        raise UsageError(f"--arms names {', '.join(twice)} more than once; give each arm once")
    return names


def _workers(args) -> None:
    available = cpus()
    if args.workers is None:
        args.workers = min(DEFAULT_WORKERS, available)
        return
    if args.workers <= 0:
        raise UsageError(f"--workers must be > 0, got {args.workers}")
    # a cluster (--ray-address) brings its own CPUs, which replace --workers
    if args.ray_address is None and args.workers > available:
        raise UsageError(f"--workers {args.workers}: this machine runs at most {available} (the CPUs this "
                         f"process may use); give --workers 1..{available}")


def _shard(args) -> range:
    """The seeds this run sweeps: all of them, or --shard I/N's block."""
    from harness.sweep import shards

    seeds = range(args.seed_start, args.seed_start + args.seeds)
    if args.shard is None:
        return seeds
    try:
        index, count = shards.parse_shard(args.shard)
    except shards.ShardError as exc:
        raise UsageError(str(exc)) from None
    run_seeds = shards.shard_seeds(seeds, index, count)
    if not run_seeds:
        raise UsageError(f"--shard {args.shard} leaves no seeds of {args.seeds}")
    return run_seeds


def _hil_devices(text: str | None) -> list[int] | None:
    """--hil-devices: the card ids (None: every card)."""
    from hil import discovery

    try:
        return discovery.parse_devices(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _run_spec(args, **given):
    """The command's run specification (harness.base.spec.RunSpec) from its options, built once:
    the model, the step policy, the user's generator (--generator/--tt-metal spelled right;
    loading it, which imports the user's code, comes with the backend), and ``given``."""
    from harness.base.spec import DEFAULT_TRACE_MODE, GeneratorSpecError, RunSpec, parse_generator, step_policy, \
        trace_mode

    try:
        generator = parse_generator(args.generator, args.tt_metal)
    except GeneratorSpecError as exc:
        raise UsageError(str(exc)) from None
    deadline = getattr(args, "call_deadline", RunSpec.call_deadline)
    if not deadline > 0:  # also NaN
        raise UsageError(f"--call-deadline must be > 0 seconds, got {deadline:g}")
    mode = trace_mode(getattr(args, "trace_mode", DEFAULT_TRACE_MODE.name))
    return RunSpec(model=args.model, step_policy=step_policy(args.step_policy), generator=generator, trace_mode=mode,
                   call_deadline=deadline, **given)


def merge(args) -> None:
    """``ttsim arms merge``."""
    check_writable(args.json, "--json")


def replay(args) -> None:
    """``ttsim replay``."""
    from model.flags import ARMS, AS_IS

    known = ARMS if args.trace else (*ARMS, AS_IS)  # a trace is re-decided under a flag set of ours
    if args.arm is not None and args.arm not in known:
        raise UsageError(f"unknown arm {args.arm!r}; choose from {', '.join(known)}")
    if args.trace is None and (args.arm is None or args.seed is None):
        raise UsageError("replay needs --arm and --seed (or --trace FILE)")
    if args.record_merges is not None:
        if args.trace is not None:
            raise UsageError("--record-merges records a replayed seed, not a --trace (which runs nothing)")
        check_writable(args.record_merges, "--record-merges")
    args.spec = _run_spec(args, seed=args.seed or 0)


def scenario(args) -> None:
    """``ttsim scenario``: every name in the catalogue (harness/upstream_bugs.py)."""
    from harness import upstream_bugs

    for name in args.names:
        try:
            upstream_bugs.lookup(name)
        except KeyError as exc:
            raise UsageError(exc.args[0]) from None


def seed_from_env(args) -> None:
    """``--seed`` defaulting to $TTSIM_SEED (selfcheck, serve): a malformed one is bad input."""
    from harness.base.settings import read_seed

    if args.seed is None:
        try:
            args.seed = read_seed()
        except ValueError as exc:
            raise UsageError(str(exc)) from None


def serve(args) -> None:
    """``ttsim serve`` (its port and model directory are checked by its body, before vLLM starts)."""
    seed_from_env(args)
    args.spec = _run_spec(args, seed=args.seed, mesh_cols=args.mesh_cols)


def served_records(args) -> None:
    """``ttsim serve-explain``: a records folder whose every file and field reads (nothing run)."""
    from harness.served import load

    load(args.run_dir)


def served_run(args) -> None:
    """``ttsim serve-replay``: a records folder with a schedule to replay (read, nothing run)."""
    from model.flags import ARMS

    from harness.served import schedule

    if args.arm is not None and args.arm not in ARMS:
        raise UsageError(f"unknown arm {args.arm!r}; choose from {', '.join(ARMS)}")
    schedule(args.run_dir)


def snapshots_report(args) -> None:
    """``ttsim snapshots report``: resolves ``--out``'s default (git-ignored, so a review never
    lands among tracked files)."""
    from harness.base.settings import runs_dir_override

    if not os.path.isdir(args.root):
        raise UsageError(f"--root {args.root} is not a directory")
    if args.out is None:
        args.out = os.path.join(runs_dir_override() or os.path.join(args.root, "build"), "snapshot-review")
    check_writable_dir(args.out, "--out")
