"""How long the HTTP gates take to give up on an endpoint that never answers: the readiness
wait at its deadline (in process), and a whole `pytest tests/gates --endpoint URL` session
that must end non-zero (a subprocess). The tests check that both give up with one line;
how fast they do is measured here, not asserted on a shared machine.

    .venv/bin/python -m bench.bench_deadlines [--repeats 3]

Appends one JSON line per measurement to ``deadlines.jsonl`` in the runs folder.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import subprocess
import sys
import time

from bench import record


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def readiness_wait(deadline_s: float) -> float:
    from hil import gates

    url = f"http://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    try:
        gates.wait_for_endpoint(url, deadline_s=deadline_s)
    except gates.EndpointDown:
        return time.monotonic() - t0
    raise RuntimeError(f"{url} answered: nothing should listen there")


def gate_session(deadline_s: float) -> float:
    url = f"http://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "pytest", "tests/gates/test_gates.py", "-q", "-n", "0", "-p",
                        "no:cacheprovider", "--endpoint", url, "--endpoint-deadline", str(deadline_s)],
                       capture_output=True, text=True, timeout=300)
    if p.returncode == 0:
        raise RuntimeError("the gate session passed against an endpoint that does not answer")
    return time.monotonic() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    for name, fn, deadline in (("readiness_wait", readiness_wait, 1.5), ("gate_session", gate_session, 2.0)):
        times = [fn(deadline) for _ in range(args.repeats)]
        med = statistics.median(times)
        print(f"{name:15} deadline {deadline:4.1f} s: gave up after {med:6.2f} s (median of {args.repeats}; "
              f"min {min(times):.2f}, max {max(times):.2f}); {med - deadline:+.2f} s past the deadline")
        record.write("deadlines", {"case": name, "deadline_s": deadline, "seconds": times, "median_s": med})
    return 0


if __name__ == "__main__":
    sys.exit(main())
