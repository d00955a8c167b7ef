"""ttsim op overhead against the same torch math, side by side in one run.

    .venv/bin/python -m bench.bench_ops [--repeats N]

For each op, "torch" is the math ttsim performs (bf16 storage, fp32 accumulation) done
directly on torch tensors; "ttsim" is the ttnn-style call plus synchronize_device. The
ratio is ttsim/torch; the target is <= 1.3x for ops of >= 1 ms.
"""

from __future__ import annotations

import argparse

import torch

import ttsim
from bench import record


def cases(dev):
    g = torch.Generator().manual_seed(0)

    def tile(x, dtype=ttsim.bfloat16):
        return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=dev)

    for m, k, n in ((256, 1024, 1024), (1024, 1024, 1024), (2048, 2048, 1024)):
        a, b = torch.randn(m, k, generator=g).bfloat16(), torch.randn(k, n, generator=g).bfloat16()
        ta, tb = tile(a), tile(b)
        yield (f"matmul {m}x{k}x{n}", lambda a=a, b=b: (a.float() @ b.float()).bfloat16(),
               lambda ta=ta, tb=tb: ttsim.matmul(ta, tb))
    for rows in (1024, 4096):
        x, y = torch.randn(rows, 1024, generator=g).bfloat16(), torch.randn(rows, 1024, generator=g).bfloat16()
        tx, ty = tile(x), tile(y)
        yield (f"add {rows}x1024", lambda x=x, y=y: (x.float() + y.float()).bfloat16(),
               lambda tx=tx, ty=ty: ttsim.add(tx, ty))
        yield (f"silu {rows}x1024", lambda x=x: torch.nn.functional.silu(x.float()).bfloat16(),
               lambda tx=tx: ttsim.silu(tx))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeats", type=int, default=15)
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error("--repeats must be >= 1")
    dev = ttsim.open_device(device_id=0)
    rows = []
    try:
        for name, torch_fn, ttsim_fn in cases(dev):
            def run_ttsim(fn=ttsim_fn):
                out = fn()
                ttsim.synchronize_device(dev)
                ttsim.deallocate(out)

            t = record.side_by_side({"torch": torch_fn, "ttsim": run_ttsim}, repeats=args.repeats)
            rows.append({"op": name, "torch_ms": t["torch"] * 1e3, "ttsim_ms": t["ttsim"] * 1e3,
                         "ratio": t["ttsim"] / t["torch"]})
            print(f"{name:24s} torch {t['torch']*1e3:8.3f} ms  ttsim {t['ttsim']*1e3:8.3f} ms  "
                  f"ratio {t['ttsim']/t['torch']:.3f}", flush=True)
    finally:
        ttsim.close_device(dev)
    heavy = [r["ratio"] for r in rows if r["torch_ms"] >= 1.0]
    summary = {"cases": rows, "max_ratio_ops_ge_1ms": max(heavy) if heavy else None, "target": 1.3,
               "repeats": args.repeats}
    path = record.write("ops", summary)
    print(f"max ratio for ops >= 1 ms: {summary['max_ratio_ops_ge_1ms']:.3f} (target <= 1.3); record -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
