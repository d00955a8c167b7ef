"""Find (or re-check) the pinned seed of the HTTP negative control.

    .venv/bin/python tests/gates/find_seed.py SEED [SEED ...] [--repeats N] [--arms control,treatment] [--model markov]

For each seed and arm, starts a fresh sim server (TTSIM_SEED=SEED, the control arm with the
fixes off by env), runs the stage-3 gate's concurrent-vs-serial check on the seed's workload
and prints the failing requests. Pin a seed whose control fails naming the same request on
every repeat and whose treatment (production's fixes) passes (tests/gates/gate_seeds.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).resolve().parent)]

from gate_seeds import CONTROL_ENV, stage3_requests  # noqa: E402

from hil import gates  # noqa: E402
from harness.base.spec import MODELS  # noqa: E402
from harness.engine import modeldir  # noqa: E402
from harness.vllm import server  # noqa: E402


def run(seed: int, arm: str, model_dir: str, log: Path, knobs: str) -> list[str]:
    env = {"TTSIM_SEED": str(seed), "QWEN36_SDPA_STREAMING": "1", **(CONTROL_ENV if arm == "control" else {})}
    s = server.start(model_dir, log, env=env, extra=("--additional-config", f'{{"knobs": "{knobs}"}}'))
    try:
        report = gates.GateReport("stage3", "sim")
        client = gates.GateClient(s.url, report)
        reqs = stage3_requests(seed)
        serial = {r.request_id: client.complete("serial", r) for r in reqs}
        got = gates.run_concurrent(client, "concurrent", reqs, 16)
        return [rid for rid in serial if not serial[rid].same(got[rid])]
    finally:
        s.stop()


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("seeds", type=int, nargs="+")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--arms", default="control,treatment")
    p.add_argument("--model", choices=MODELS, default="markov")
    p.add_argument("--knobs", choices=("quiet", "swarm"), default="swarm", help="the server's device knobs")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        md = modeldir.write(f"{d}/model", a.model)
        for seed in a.seeds:
            for arm in a.arms.split(","):
                for i in range(a.repeats):
                    failed = run(seed, arm, md, Path(d) / f"{seed}-{arm}-{i}.log", a.knobs)
                    print(f"seed {seed} {a.knobs} {arm} repeat {i}: failed {failed or '-'}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
