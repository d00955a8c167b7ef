"""``ttsim scenario``: public upstream bugs as named scenarios (the catalogue: harness.upstream_bugs)."""

from __future__ import annotations

from harness.upstream_bugs import CATALOGUE, NOT_REPRODUCED, check


def run(args) -> int:
    """``ttsim scenario``: list the catalogue, or reproduce the named scenarios (exit 1 if one
    does not reproduce)."""
    import warnings

    if args.list or not args.names:
        for b in CATALOGUE.values():
            print(f"{b.name}: {b.repo}#{b.number} {b.title} ({b.url})")
        for name, (url, _) in NOT_REPRODUCED.items():
            print(f"{name}: not reproduced ({url}; `ttsim scenario {name}` says why)")
        return 0
    with warnings.catch_warnings():
        # the clobbers these scenarios are about are what ttsim warns of: expected here
        warnings.simplefilter("ignore")
        results = [check(n, args.seed) for n in args.names]
    for r in results:
        print("\n".join(r.lines()))
    return 0 if all(r.ok for r in results) else 1
