"""``ttsim serve-replay RUN_DIR [--arm A]``: a served run re-run in this process on its recorded
admission schedule (harness.vllm.rerun)."""

from __future__ import annotations

from harness.served import schedule
from harness.vllm.rerun import compare, rerun


def run(args) -> int:
    """``ttsim serve-replay RUN_DIR [--arm A]``. Without ``--arm``: 0 when the replay reproduces
    every served answer and admission step, 1 (naming the requests) when it does not. With it
    (the schedule under another arm's flags; the schedule cannot depend on the answers: the
    byte models have no EOS and every request runs to its max_tokens): 0 when every request
    equals its serial answer, 1 when one diverges or the schedule did not reproduce."""
    import sys

    d, meta, reqs = schedule(args.run_dir)
    short = [r["request"] for r in reqs if len(r["output_token_ids"]) < r["max_tokens"]]
    arm = args.arm or meta["arm"] or "the run's own flags"
    print(f"replaying {len(reqs)} requests of {d} in process (seed {meta['seed']}, model {meta['model']}, "
          f"arm {arm}{'' if args.arm is None else f' instead of the served ' + (meta['arm'] or 'custom flags')}, "
          f"{meta['step_policy']} steps) on their recorded admission schedule", flush=True)
    if short:
        print(f"note: {len(short)} request(s) ended before max_tokens (a client abort; when is not recorded): "
              f"replayed to max_tokens, so later answers may differ ({', '.join(short[:3])})", flush=True)

    def progress(done: int, total: int) -> None:
        if done % 8 == 0 or done == total:
            print(f"  {done}/{total} requests finished", file=sys.stderr, flush=True)

    out, replayed = rerun(args.run_dir, progress, args.arm)
    print(f"replay records: {out}")
    diff = compare(reqs, replayed, answers=args.arm is None)  # under --arm the answers are the arm's own
    if diff:
        for line in diff:
            print(f"  {line}")
        print(f"the replay differs from the served run in {len(diff)} of {len(reqs)} requests")
        return 1
    what = "admission steps" if args.arm is not None else "answers and admission steps"
    print(f"{len(reqs)} of {len(reqs)} {what} equal the served run's")
    bad = sorted((r for r in replayed if r["equal"] is False), key=lambda r: r["admitted"])
    for r in bad:
        print(f"  {r['request']} diverges from its serial answer{'' if args.arm else ', as served'}: {r['defect']} "
              f"(bin/ttsim serve-explain {out} {r['request']})")
    if args.arm is not None:
        print(f"under {args.arm}: {len(bad)} of {len(reqs)} requests differ from their serial answers")
        return 1 if bad else 0
    return 0
