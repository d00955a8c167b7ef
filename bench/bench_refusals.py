"""How fast `ttsim` refuses bad input and stops on a signal: what the tests check happens (one
line, exit 2 before any work; a sweep stopped by SIGTERM, nothing written) timed here, not
asserted on a shared machine.

- ``refusal``: a fresh `python -m harness.commands.cli` on a bad option (the cheapest command
  line, the process's start included), per case;
- ``sigterm``: a 200-seed sweep (one worker, no fork server) signalled once its seeds run (its
  staged merge trace grows), from the signal to the process's exit.

    .venv/bin/python -m bench.bench_refusals [--repeats 3]

Appends one JSON line per case to ``refusals.jsonl`` in the runs folder (harness.base.records).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from bench import record

CLI = [sys.executable, "-m", "harness.commands.cli"]
CASES = {
    "arms --seeds 0": ["arms", "--seeds", "0"],
    "arms --arms nope": ["arms", "--arms", "nope"],
    "replay without --seed": ["replay", "--arm", "control"],
    "serve-explain of no folder": ["serve-explain", "/nonexistent/run"],
}


def refusal(argv: list[str]) -> float:
    t0 = time.monotonic()
    p = subprocess.run([*CLI, *argv], capture_output=True, text=True, timeout=120)
    took = time.monotonic() - t0
    if p.returncode != 2:
        raise RuntimeError(f"ttsim {' '.join(argv)} exited {p.returncode}, not 2: {p.stderr[-500:]}")
    return took


def sigterm_stop() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "TTSIM_FORKSERVER": "0", "TTSIM_RUNS_DIR": tmp}
        proc = subprocess.Popen([*CLI, "arms", "--seeds", "200", "--workers", "1", "--record-merges",
                                 os.path.join(tmp, "trace.jsonl")], stderr=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, env=env)
        while not any(n.startswith(".trace.jsonl.part-") and os.path.getsize(os.path.join(tmp, n))
                      for n in os.listdir(tmp)):  # the staged trace grows: seeds are running
            if proc.poll() is not None:
                raise RuntimeError("the sweep ended before it could be signalled")
            time.sleep(0.1)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=120)
        took = time.monotonic() - t0
        if proc.returncode != 128 + signal.SIGTERM:
            raise RuntimeError(f"the sweep exited {proc.returncode} on SIGTERM")
        return took


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    cases = {name: (refusal, cli) for name, cli in CASES.items()}
    cases["sigterm"] = (lambda _: sigterm_stop(), None)
    for name, (fn, cli) in cases.items():
        times = [fn(cli) for _ in range(args.repeats)]
        med = statistics.median(times)
        print(f"{name:28} {med:6.2f} s (median of {args.repeats}; min {min(times):.2f}, max {max(times):.2f})")
        record.write("refusals", {"case": name, "seconds": times, "median_s": med})
    return 0


if __name__ == "__main__":
    sys.exit(main())
