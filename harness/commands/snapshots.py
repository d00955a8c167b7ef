"""``ttsim snapshots report [--ref REF]``: Markdown + PNG review of the snapshots changed since a ref
(harness.snapshots.report)."""

from __future__ import annotations


def run(args) -> int:
    """`ttsim snapshots report`: Markdown + PNG review of the snapshots changed since a ref."""
    from pathlib import Path

    from harness.base.errors import UsageError
    from harness.snapshots.report import ReportError, write

    try:  # --out: resolved by harness.commands.preflight
        path = write(Path(args.root), args.ref, Path(args.out))
    except ReportError as exc:
        raise UsageError(str(exc)) from None
    print(f"wrote {path}")
    return 0
