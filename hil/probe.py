"""``python -m hil.probe``: report the cards the real ttnn sees, or why there are none (no torch).

    python -m hil.probe [--devices 0,1] [--need N] [--json]

Exit 0 when a hardware run may use the cards, 1 when it must not (one line says why), 2 on bad
arguments. ``--json`` adds one machine-readable line prefixed ``HIL-PROBE-JSON:`` (ttnn logs to
stdout too, so readers look for the prefix).
"""

from __future__ import annotations

import argparse
import json
import sys

from . import settings
from .discovery import parse_devices, probe

JSON_PREFIX = "HIL-PROBE-JSON: "


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hil.probe", description=__doc__.splitlines()[0])
    ap.add_argument("--devices", default=None, help="card ids, e.g. 0,1 (default: every card)")
    ap.add_argument("--need", type=int, default=1, help="cards the run needs (default: %(default)s)")
    ap.add_argument("--json", action="store_true", help="also print one HIL-PROBE-JSON: line")
    args = ap.parse_args(argv)
    try:
        devices = parse_devices(args.devices)
    except ValueError as exc:
        print(f"hil.probe: error: {exc}", file=sys.stderr)
        return 2
    if args.need < 1:
        print(f"hil.probe: error: --need must be >= 1, got {args.need}", file=sys.stderr)
        return 2
    pr = probe(devices, need=args.need)
    sys.stdout.flush()
    print(f"hil.probe: {pr.python}; ttnn {pr.ttnn_version or '-'} ({pr.ttnn_path or '-'})")
    if pr.num_chips is not None:
        print(f"hil.probe: {pr.num_chips} card(s) visible, ids {pr.card_ids}, cluster {pr.cluster_type}, "
              f"arch {pr.arch}")
    print("hil.probe: ok" if pr.ok else f"hil.probe: refusing: {pr.cause}")
    if args.json:
        print(JSON_PREFIX + json.dumps(pr.as_json(), sort_keys=True))
    return 0 if pr.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())


def probe_in_subprocess(devices: list[int] | None, need: int = 1, timeout: float = 300.0):
    """Run this module with the current interpreter and return its Probe: the caller never imports
    ttnn itself (so it can still set the environment, and never holds the cards)."""
    import os
    import subprocess
    import tempfile

    from .discovery import Probe, python_description
    from .lifeline import die_with_parent

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [sys.executable, "-m", "hil.probe", "--json", "--need", str(need)]
    if devices is not None:
        cmd += ["--devices", ",".join(str(d) for d in devices)]
    env = settings.child_env(root)
    with tempfile.TemporaryDirectory(prefix="hil-probe-") as cwd:  # ttnn may write generated/ into its cwd
        try:
            # the probe opens the cards: it must not outlive us (a killed session); run() blocks
            # this thread until the probe ends, so the thread-scoped PDEATHSIG is exactly right
            p = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                               preexec_fn=die_with_parent())
        except subprocess.TimeoutExpired:
            return Probe(ok=False, cause=f"the card probe did not answer within {timeout:g} s ({' '.join(cmd)})",
                         python=python_description())
    for line in reversed(p.stdout.splitlines()):
        if line.startswith(JSON_PREFIX):
            return Probe(**json.loads(line[len(JSON_PREFIX):]))
    tail = (p.stderr.strip().splitlines() or p.stdout.strip().splitlines() or ["(no output)"])[-1]
    return Probe(ok=False, cause=f"the card probe exited {p.returncode} without a verdict: {tail}",
                 python=python_description())
