"""Benchmark: ttsim's streaming SDPA kernel vs torch's fused CPU flash attention.

    python bench/bench_sdpa.py                      # S in 1024, 4096, 8192
    python bench/bench_sdpa.py --sizes 1024 --repeats 5 --no-memory

All kernels get the same float32 inputs (bf16-rounded values, as the card stores them)
of shape q [1, 8, S, 128], k/v [1, 2, S, 128] (GQA 4:1), causal, and are timed side by
side in one process: each repeat times streaming, legacy and torch, alternating the
order, and the medians are compared (ratio = streaming / torch). torch runs under
``sdpa_kernel(FLASH_ATTENTION)`` with ``enable_gqa=True`` so it is the fused kernel and
never a silent fallback to the math path.

Peak memory is a real measurement, not an estimate: each kernel runs in a fresh
single-threaded child process (so worker threads' allocator arenas do not blur it) that
resets the process's peak-RSS counter (``/proc/self/clear_refs`` <- 5) right before the
call and reads ``VmHWM`` after it; the reported number is VmHWM minus the RSS just
before the call. (Where clear_refs is unavailable the child falls back to
``ru_maxrss`` minus the RSS before the call, noted in the record.)

Each run appends one JSON line per shape to ``sdpa.jsonl`` in the runs folder (harness.base.records) and prints a table.
The machine is shared with other work on a 2-core box, so the record also carries the
load average: compare ratios, not absolute times, across runs. By default every size
runs twice: with torch's default intra-op thread count and with one thread.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

from hil.record import git_rev as hil_git_rev  # noqa: E402
from model.pcc import comp_pcc  # noqa: E402
from ttsim.kernels.attention import sdpa_legacy, sdpa_streaming  # noqa: E402

B, NQH, NKV, D = 1, 8, 2, 128
KERNELS = ("streaming", "legacy", "torch")


def make_inputs(s: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, NQH, s, D, generator=g).to(torch.bfloat16).float()
    k = torch.randn(B, NKV, s, D, generator=g).to(torch.bfloat16).float()
    v = torch.randn(B, NKV, s, D, generator=g).to(torch.bfloat16).float()
    return q, k, v


def runner(name: str, q, k, v, qc: int, kc: int):
    scale = 1.0 / math.sqrt(D)
    if name == "torch":
        def run():
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True)
        return run
    fn = {"streaming": sdpa_streaming, "legacy": sdpa_legacy}[name]
    return lambda: fn(q, k, v, scale=scale, is_causal=True, q_chunk_size=qc, k_chunk_size=kc)


# ----------------------------------------------------------------------------- memory (child)


def child_peak(name: str, s: int, qc: int, kc: int, threads: int) -> dict:
    from bench.record import peak_rss

    torch.set_num_threads(threads)
    q, k, v = make_inputs(s)
    runner(name, *(t[:, :, :256] for t in (q, k, v)), qc, kc)()  # warm lazy inits / thread pool
    out = peak_rss(runner(name, q, k, v, qc, kc))
    return {"peak_bytes": out["peak_bytes"], "method": out["method"]}


def measure_peak(name: str, s: int, qc: int, kc: int, threads: int) -> dict:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--_child-peak", name, str(s), str(qc), str(kc),
           str(threads)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=900)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- timing


def time_side_by_side(s: int, repeats: int, qc: int, kc: int) -> dict:
    q, k, v = make_inputs(s)
    runs = {n: runner(n, q, k, v, qc, kc) for n in KERNELS}
    outs = {n: r() for n, r in runs.items()}  # warm-up + correctness
    _, pcc = comp_pcc(outs["torch"], outs["streaming"], 0.9999)
    _, pcc_legacy = comp_pcc(outs["legacy"], outs["streaming"], 0.9999)
    max_err = (outs["torch"] - outs["streaming"]).abs().max().item()
    del outs
    times = {n: [] for n in runs}
    order = list(runs)
    for i in range(repeats):
        for n in order if i % 2 == 0 else order[::-1]:
            t0 = time.perf_counter()
            runs[n]()
            times[n].append((time.perf_counter() - t0) * 1e3)
    return {
        "streaming_ms": statistics.median(times["streaming"]),
        "torch_ms": statistics.median(times["torch"]),
        "legacy_ms": statistics.median(times["legacy"]),
        "streaming_all_ms": [round(t, 2) for t in times["streaming"]],
        "torch_all_ms": [round(t, 2) for t in times["torch"]],
        "pcc_vs_torch": pcc,
        "pcc_vs_legacy": pcc_legacy,
        "max_abs_err_vs_torch": max_err,
    }


def git_rev() -> str:
    return hil_git_rev(REPO, short=True, mark_dirty=True)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{platform.node()} | {cpu} x{os.cpu_count()} | torch {torch.__version__}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1024,4096,8192", help="comma-separated sequence lengths S")
    ap.add_argument("--repeats", type=int, default=0, help="timed repeats per kernel (0: by size)")
    ap.add_argument("--q-chunk", type=int, default=128)
    ap.add_argument("--k-chunk", type=int, default=512)
    ap.add_argument("--threads", default="",
                    help="comma-separated torch intra-op thread counts to run (default: torch's default, then 1)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    ap.add_argument("--out", default=str(REPO / "bench" / "runs" / "sdpa.jsonl"))
    ap.add_argument("--_child-peak", nargs=5, metavar=("KERNEL", "S", "QC", "KC", "THREADS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._child_peak:
        name, s, qc, kc, nt = args._child_peak
        print(json.dumps(child_peak(name, int(s), int(qc), int(kc), int(nt))))
        return 0

    sizes = [int(x) for x in args.sizes.split(",") if x]
    default_threads = torch.get_num_threads()
    thread_list = [int(x) for x in args.threads.split(",") if x] or sorted({default_threads, 1}, reverse=True)
    out_path = Path(args.out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    rev, mach = git_rev(), machine()
    rows = []
    for threads, s in [(t, s) for t in thread_list for s in sizes]:
        torch.set_num_threads(threads)
        repeats = args.repeats or (15 if s <= 2048 else 7 if s <= 4096 else 5)
        load0 = os.getloadavg()[0]
        rec = time_side_by_side(s, repeats, args.q_chunk, args.k_chunk)
        peaks = {}
        if not args.no_memory:
            for name in KERNELS:
                peaks[name] = measure_peak(name, s, args.q_chunk, args.k_chunk, 1)
        record = {
            "bench": "sdpa",
            "ts": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "git_rev": rev,
            "machine": mach,
            "shape": {"b": B, "nqh": NQH, "nkv": NKV, "S": s, "d": D, "causal": True, "dtype": "float32"},
            "threads": threads,
            "streaming_ms": round(rec["streaming_ms"], 3),
            "torch_ms": round(rec["torch_ms"], 3),
            "ratio": round(rec["streaming_ms"] / rec["torch_ms"], 4),
            "legacy_ms": round(rec["legacy_ms"], 3),
            "legacy_peak_bytes": peaks.get("legacy", {}).get("peak_bytes"),
            "streaming_peak_bytes": peaks.get("streaming", {}).get("peak_bytes"),
            "torch_peak_bytes": peaks.get("torch", {}).get("peak_bytes"),
            "full_scores_bytes_per_head": s * s * 4,
            "peak_method": (next(iter(peaks.values()), {}).get("method") or "") + (", 1 thread" if peaks else ""),
            "q_chunk_size": args.q_chunk,
            "k_chunk_size": args.k_chunk,
            "repeats": repeats,
            "streaming_all_ms": rec["streaming_all_ms"],
            "torch_all_ms": rec["torch_all_ms"],
            "pcc_vs_torch": rec["pcc_vs_torch"],
            "pcc_vs_legacy": rec["pcc_vs_legacy"],
            "max_abs_err_vs_torch": rec["max_abs_err_vs_torch"],
            "loadavg_1m": [round(load0, 2), round(os.getloadavg()[0], 2)],
        }
        with out_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        rows.append(record)

    mib = lambda b: "-" if b is None else f"{b / 2**20:8.1f}"  # noqa: E731
    print(f"sdpa bench  q [{B},{NQH},S,{D}] k/v [{B},{NKV},S,{D}] causal fp32  "
          f"q_chunk={args.q_chunk} k_chunk={args.k_chunk}  ({mach})")
    print(f"{'thr':>3} {'S':>6} {'streaming ms':>13} {'torch ms':>10} {'ratio':>6} {'legacy ms':>10} {'PCC':>10} "
          f"{'stream MiB':>10} {'legacy MiB':>10} {'torch MiB':>9} {'SxS MiB':>8} {'load':>10}")
    for r in rows:
        s = r["shape"]["S"]
        print(f"{r['threads']:>3} {s:>6} {r['streaming_ms']:>13.1f} {r['torch_ms']:>10.1f} {r['ratio']:>6.2f} {r['legacy_ms']:>10.1f} "
              f"{r['pcc_vs_torch']:>10.7f} {mib(r['streaming_peak_bytes']):>10} {mib(r['legacy_peak_bytes']):>10} "
              f"{mib(r['torch_peak_bytes']):>9} {mib(r['full_scores_bytes_per_head']):>8} "
              f"{r['loadavg_1m'][0]:>4.1f}/{r['loadavg_1m'][1]:<4.1f}")
    print(f"appended {len(rows)} record(s) to {out_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
