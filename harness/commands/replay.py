"""``ttsim replay``: one seed of one arm, step by step (``--arm A --seed S``), or recorded
merges re-decided under any arm's flags (``--trace FILE [--arm A]``, harness.replay: it needs
neither torch nor vLLM)."""

from __future__ import annotations

from harness.base.errors import UsageError


def run(args) -> int:
    """`ttsim replay` (options checked by harness.commands.preflight.replay): one seed of one arm step by
    step, or a recorded trace re-decided (--trace). A seed's --record-merges trace is staged and
    appended only when the seed has run, so an interrupted replay adds nothing to it."""
    if args.trace:  # pure Python: imports neither torch nor vLLM
        return _run_trace(args)
    from harness.base import interrupts
    from harness.base.outputs import Staged
    from harness.system import check_arms, generator_loaded

    staged = Staged()
    try:
        with interrupts.handled(), generator_loaded(args.spec) as user:
            check_arms([args.arm], user)
            return _replay_seed(args, staged)
    except interrupts.Interrupted as exc:
        written = "its trace is written" if staged.committed else "nothing written"
        raise interrupts.Interrupted(exc.signum, f"interrupted replaying seed {args.seed}; {written}") from None
    finally:
        staged.discard()


def _replay_seed(args, staged) -> int:
    import warnings

    import torch

    from dataclasses import replace

    from harness import scenario
    from harness.base import interrupts
    from harness.system import generator_errors
    from harness.workloads import stage3

    torch.set_num_threads(1)
    warnings.simplefilter("ignore")
    # the trace is staged and appended only when the seed has run
    spec = replace(args.spec, merge_trace=staged.path(args.record_merges, append=True) if args.record_merges else None)
    workload = stage3(spec.seed)
    print(f"seed {spec.seed} arm {args.arm} model {spec.model}; knobs: {workload.knobs.describe()}")
    try:
        expected = scenario.serial_answers(workload, spec)
        result = scenario.run_scenario(workload, args.arm, spec, expected=expected, record_merges=True)
    except generator_errors() as exc:
        raise UsageError(str(exc)) from None
    with interrupts.deferred():
        staged.commit()
    for e in result.merges:
        flags = " ".join(f for f, on in (("fresh-trace", e.fresh_trace), ("GUARD-REJECT", e.guard_rejected)) if on)
        print(f"step {e.step:3d} merge bucket {e.previous_bucket}->{e.bucket} {flags}")
        for r in e.rows:
            if r.host_pos < 0 and r.source == "host":
                continue
            wrong = r.source == "device" and (r.dev_token != r.host_token or r.dev_pos != r.host_pos)
            mark = "  <-- kept a token/position the host disagrees with" if wrong else ""
            print(f"    slot {r.slot}: host tok {r.host_token:3d} pos {r.host_pos:5d} | dev tok {r.dev_token:10d} "
                  f"pos {r.dev_pos:11d} -> {r.source:6s} ({r.reason}){mark}")
    print(f"guard rejects: {result.guard_rejects}; device: {result.device_stats}")
    for v in result.verdicts:
        status = "ok" if v.ok else f"FAIL ({v.defect}) expected {v.expected} got {v.got}"
        print(f"  {v.request_id}: {status}")
    for line in result.diagnostics:
        print(f"  {line}")
    if result.fatal:
        print(f"the run ended early: {result.fatal}")
    failed = len(result.failed)
    print(f"{failed} of {len(result.verdicts)} requests differ from their serial answers")
    return 1 if failed else 0


def _run_trace(args) -> int:
    import sys

    from model.merge_trace import TraceError

    from harness.replay import report

    try:
        return report(args.trace, args.arm, sys.stdout)
    except (TraceError, KeyError) as exc:
        raise UsageError(str(exc).strip("'\"")) from None
