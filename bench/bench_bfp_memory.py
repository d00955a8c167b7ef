"""Benchmark: peak memory of converting float32 data to bfloat8_b / bfloat4_b, per element.

    .venv/bin/python -m bench.bench_bfp_memory                 # 16M elements, bf8 and bf4
    .venv/bin/python -m bench.bench_bfp_memory --elements 4194304 --dtypes bfloat8_b

Each case runs in a fresh single-threaded child process: it builds the float32 input,
warms up on a tiny conversion, resets the peak-RSS counter (``/proc/self/clear_refs`` <- 5;
``ru_maxrss`` where unavailable), runs the conversion and reads ``VmHWM``. The number is
(peak - RSS before the call) / elements: the bytes per element the conversion needs beyond
its input. Cases: ``host`` = ``from_torch(x, dtype, TILE)``; ``device`` = the same with
``device=`` (host conversion plus the write into device memory); ``read`` = ``to_torch`` of
a device tensor. Appends one JSON line per case to ``bfp_memory.jsonl`` in the runs folder
(harness/base/records.py: ``runs/`` at the checkout root, or ``$TTSIM_RUNS_DIR``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _child(case: str, dtype_name: str, n: int) -> dict:
    import torch

    torch.set_num_threads(1)
    import ttsim
    from bench.record import peak_rss

    dtype = getattr(ttsim, dtype_name)
    cols = 1024
    x = torch.randn(n // cols, cols, generator=torch.Generator().manual_seed(0))
    dev = ttsim.open_device(device_id=0) if case in ("device", "read") else None
    ttsim.from_torch(x[:32], dtype=dtype, layout=ttsim.TILE_LAYOUT, device=dev)  # warm up lazy imports
    src = ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=dev) if case == "read" else None
    if src is not None:
        ttsim.synchronize_device(dev)

    def convert():
        if case == "read":
            return ttsim.to_torch(src)
        out = ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=dev)
        if dev is not None:
            ttsim.synchronize_device(dev)
        return out

    measured = peak_rss(convert)
    del measured["result"]
    if dev is not None:
        ttsim.close_device(dev)
    return measured


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--elements", type=int, default=16 * 1024 * 1024)
    p.add_argument("--dtypes", default="bfloat8_b,bfloat4_b")
    p.add_argument("--cases", default="host,device,read")
    p.add_argument("--_child", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args._child:
        case, dtype, n = args._child
        print(json.dumps(_child(case, dtype, int(n))))
        return 0
    from bench import record

    n = args.elements - args.elements % (32 * 1024)
    print(f"{'dtype':10} {'case':7} {'peak MiB':>9} {'bytes/elem':>10}")
    for dtype in args.dtypes.split(","):
        for case in args.cases.split(","):
            out = subprocess.run([sys.executable, "-m", "bench.bench_bfp_memory", "--_child", case, dtype, str(n)],
                                 capture_output=True, text=True, cwd=REPO, check=True)
            res = json.loads(out.stdout.strip().splitlines()[-1])
            per = res["peak_bytes"] / n
            print(f"{dtype:10} {case:7} {res['peak_bytes'] / 2**20:9.1f} {per:10.2f}")
            record.write("bfp_memory", {"dtype": dtype, "case": case, "elements": n, **res,
                                        "bytes_per_element": round(per, 3)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
