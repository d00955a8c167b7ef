"""``ttsim serve-explain RUN_DIR [REQUEST]``: a served run's requests against their serial answers,
or one request's merge decisions, defect class and replay command (the records: harness.served)."""

from __future__ import annotations

from harness.base.errors import UsageError
from harness.defects import first_difference
from harness.served import REQUESTS, aliases, judge, load, merges_touching, replay_line, text_of


def run(args) -> int:
    """``ttsim serve-explain RUN_DIR [REQUEST]``: every request's verdict, or one request's
    merges, answer against its serial answer, defect class and replay command. 1 when a
    shown request diverges."""
    from model.merge_events import kept_wrong

    d, meta, reqs = load(args.run_dir)
    if args.request is not None:
        chosen = [r for r in reqs if args.request in aliases(r["request"])]
        if not chosen:
            raise UsageError(f"no finished request {args.request!r} in {d / REQUESTS} ({len(reqs)} requests; "
                             f"ids look like {reqs[0]['request'] if reqs else 'none yet'})")
    else:
        chosen = reqs
    cache: dict = {}
    judged = [judge(meta, r, cache) for r in chosen]
    print(f"served run {d}: seed {meta['seed']} model {meta['model']} arm {meta['arm'] or 'custom flags'} "
          f"{meta['step_policy']} steps, knobs {meta['knobs']}")
    replay = replay_line(d, meta["arm"])
    for r in judged:
        verdict = "equals its serial answer" if r["equal"] else (
            f"DIVERGES from its serial answer at output {first_difference(r['output_token_ids'], r['serial'])}: "
            f"{r['defect']}")
        print(f"{r['request']} (admitted #{r['admitted']}): {verdict}")
        if args.request is None:
            if not r["equal"]:
                print(f"  explain: bin/ttsim serve-explain {d} {r['request']}")
            continue
        print(f"  answer {text_of(r['output_token_ids'])!r} {r['output_token_ids']}")
        print(f"  serial {text_of(r['serial'])!r} {r['serial']}")
        touching = merges_touching(d, r["request"])
        print(f"  {len(touching)} merge decisions touched it:")
        for line, m, row in touching:
            src = m["sources"][row]
            wrong = kept_wrong(src, m["dev_tokens"][row], m["dev_positions"][row], m["host_tokens"][row],
                               m["host_positions"][row])
            print(f"    line {line} step {m['step']} bucket {m['bucket']} row {row}: host {m['host_tokens'][row]}@"
                  f"{m['host_positions'][row]} dev {m['dev_tokens'][row]}@{m['dev_positions'][row]} -> {src} "
                  f"({m['reasons'][row]}){'  <-- kept what the host disagrees with' if wrong else ''}")
        if not r["equal"]:
            print(f"  replay: {replay}")
            print(f"  the whole run again, in process: bin/ttsim serve-replay {d}")
    bad = [r for r in judged if not r["equal"]]
    print(f"{len(bad)} of {len(judged)} requests differ from their serial answers"
          + (f"; replay the merges: {replay}" if bad else ""))
    return 1 if bad else 0
