"""Replaying one seed from the shell, the command a failing sweep prints: a fresh process
(`TTSIM_FORKSERVER=0`) beside a child of a warm fork server (harness/commands/forkserver.py),
interleaved so the machine's noise hits both alike; the outputs must be identical.
``--sweep N`` times `bin/ttsim arms --seeds N` the same way instead (its --json must be
identical; its printout carries its own timing).

    .venv/bin/python -m bench.bench_replay [--arm control] [--seed 0] [--repeats 3] [--sweep N] [--against REV]

``--against REV``: the fresh side is REV's ``bin/ttsim`` (a temporary ``git worktree``, this
checkout's ``.venv``), the issue's judge of "from the shell, before and after"; the outputs are
then compared and the result recorded, not required equal (REV may print other bytes).
Appends one JSON line to ``replay.jsonl`` in the runs folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import record
from harness.commands import forkserver

ROOT = Path(__file__).resolve().parents[1]


def _replay(argv: list[str], env: dict, sweep_json: Path | None, root: Path = ROOT) -> tuple[float, tuple]:
    t0 = time.perf_counter()
    # run from the tree's own root: `python -m` puts the working directory first on the path
    p = subprocess.run([str(root / "bin" / "ttsim"), *argv], cwd=root, env=env, capture_output=True, text=True,
                       timeout=3600)
    wall = time.perf_counter() - t0
    if sweep_json is not None:  # a sweep prints its own wall: compare its report and exit code
        return wall, (p.returncode, sweep_json.read_bytes())
    return wall, (p.returncode, p.stdout, p.stderr)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--arm", default="control")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sweep", type=int, metavar="N", help="time `arms --seeds N --workers 2` instead of a replay")
    p.add_argument("--against", metavar="REV", help="the fresh side runs REV's bin/ttsim (a temporary worktree)")
    args = p.parse_args(argv)
    sockets = tempfile.mkdtemp(prefix="bfs-", dir="/tmp")  # a private server, stopped at the end
    old_root = ROOT
    if args.against:
        old_root = Path(sockets) / "old"
        subprocess.run(["git", "worktree", "add", "--detach", str(old_root), args.against], cwd=ROOT, check=True,
                       capture_output=True)
        (old_root / ".venv").symlink_to(ROOT / ".venv")
    sweep_json = Path(sockets) / "arms.json" if args.sweep else None
    replay = (["arms", "--seeds", str(args.sweep), "--workers", "2", "--json", str(sweep_json)] if args.sweep
              else ["replay", "--arm", args.arm, "--seed", str(args.seed)])
    # bin/ttsim puts this checkout first on the path: the key and the server see the same path
    env = {**os.environ, "TTSIM_SKIP_SETUP": "1", "TMPDIR": sockets, "PYTHONPATH": str(ROOT)}
    env.pop("TTSIM_FORKSERVER", None)
    key = subprocess.run([sys.executable, "-c", "from harness.commands.forkserver import key; print(key())"], env=env,
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
    t0 = time.perf_counter()
    try:
        server, _ = forkserver.spawn(key, env, deadline_s=300)
    except RuntimeError as exc:
        raise SystemExit(f"bench_replay: {exc}") from None
    try:
        server_up_s = time.perf_counter() - t0
        cold, warm, identical = [], [], True
        old_env = {**env, "TTSIM_FORKSERVER": "0", "PYTHONPATH": str(old_root)}
        for _ in range(args.repeats):
            c, cold_out = _replay(replay, old_env, sweep_json, old_root)
            w, warm_out = _replay(replay, env, sweep_json)
            identical &= cold_out == warm_out
            if not identical and not args.against:
                raise SystemExit("bench_replay: the forked command's output differs from the fresh process's")
            cold.append(c)
            warm.append(w)
    finally:
        server.terminate()
        server.wait(timeout=30)
        if args.against:
            subprocess.run(["git", "worktree", "remove", "--force", str(old_root)], cwd=ROOT, check=False)
        subprocess.run(["rm", "-rf", sockets], check=False)
    ratio = statistics.median(cold) / statistics.median(warm)
    shown = " ".join(replay[:-2] if args.sweep else replay)  # not the private --json path
    fresh = f"fresh at {args.against}" if args.against else "fresh"
    print(f"bin/ttsim {shown}: {fresh} {statistics.median(cold):.2f} s, forked {statistics.median(warm):.2f} s "
          f"(median of {args.repeats}): {ratio:.2f}x; the server came up in {server_up_s:.1f} s; outputs "
          f"{'identical' if identical else 'differ'}")
    record.write("replay", {"argv": shown.split(), "fresh_s": cold, "forked_s": warm, "ratio": ratio,
                            "server_up_s": server_up_s, "identical": identical, "against": args.against})
    return 0


if __name__ == "__main__":
    sys.exit(main())
