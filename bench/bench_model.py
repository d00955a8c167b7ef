"""Benchmark: the model's two prefill paths side by side, time and peak host memory by context.

    python -m bench.bench_model                            # TINY, 4k / 8k / 32k, TP=1, on ttsim
    python -m bench.bench_model --lengths 4096 --repeats 3 --tp 2
    python -m bench.bench_model --hil                      # the same on cards (real ttnn)

Streaming (``sdpa_streaming=True``, QWEN36_SDPA_STREAMING=1): chunked SDPA over the paged
cache; legacy: the earlier K/V materialised and full SDPA with a causal-offset mask (the
model's two paths, model/qwen36.py). Every length uses the same model (TINY with
``max_context`` = the length), the same ``--chunk`` (prefill chunk, default 1024) and SDPA
chunks of 256, so only the context grows: legacy's per-chunk mask and K/V grow with it,
streaming's work per chunk stays O(chunk).

Time: a fresh prefill of the whole prompt (slot 0, start_pos 0) per path, interleaved
round-robin (bench/record.py's side_by_side), so machine noise hits both alike; with
``--hil`` the card's times (the prefill ends in a blocking read of the logits). Memory: for
each (path, length) a child process builds the model and caches first, then measures the
resident memory one prefill adds at its peak (bench/record.py's peak_rss: VmHWM after
clear_refs), so neither path inherits the other's freed pages. One JSON line per run goes to
the runs folder, model.jsonl, with the backend and load average (the box may be shared:
compare the paths within a record, not absolute times across records).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from bench import record  # noqa: E402
from model.config import TINY  # noqa: E402
from model.qwen36 import Qwen36Model  # noqa: E402
from model.tokenizer import encode  # noqa: E402
from model.weights import generate_weights  # noqa: E402

TEXT = encode("The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. ")
PATHS = {"streaming": True, "legacy": False}


def prompt(n: int) -> list[int]:
    return [TEXT[i % len(TEXT)] for i in range(n)]


def config(n: int, chunk: int):
    return dataclasses.replace(TINY, max_context=-(-n // 256) * 256, prefill_chunk=chunk, sdpa_chunk=256)


def backend(hil: bool):
    if hil:
        import ttnn  # the real package on the hardware host

        return ttnn
    import ttsim

    return ttsim


class Bench:
    """One mesh, one model per path, for one prompt length."""

    def __init__(self, ttnn, n: int, tp: int, chunk: int):
        from hil import devices

        self.ttnn, self.n, self.cfg = ttnn, n, config(n, chunk)
        self.opened = devices.open_mesh(ttnn, ttnn.MeshShape(1, tp))  # fabric for 1x2, as the fixtures do
        weights = generate_weights(self.cfg, 0)
        self.models = {name: Qwen36Model(ttnn, self.opened.mesh, self.cfg, weights, max_slots=1,
                                         num_blocks=self.cfg.max_pages, sdpa_streaming=flag)
                       for name, flag in PATHS.items()}
        self.toks = prompt(n)
        self.row = torch.arange(self.cfg.max_pages, dtype=torch.int32)

    def prefill(self, name: str):
        return self.models[name].prefill(self.toks, slot=0, page_table_row=self.row)

    def close(self) -> None:
        from hil import devices

        devices.close(self.ttnn, self.opened)


class _DevicePeak:
    """ttsim only: the most DRAM one chip holds live at once above what it held at the start
    (its allocator's high-water mark), the device-side measure. ttsim's host memory also keeps
    what freed buffers last held (an uninitialized read returns it), so host RSS can grow
    where live device memory does not."""

    def __init__(self, chips):
        from ttsim import memory

        self.peak, self._region, self._orig = 0, memory.Region, memory.Region.allocate
        base = {id(c.dram): c.dram.allocated_bytes for c in chips}

        def allocate(region, nbytes, what, top_down=False):
            addr = self._orig(region, nbytes, what, top_down)
            if id(region) in base:
                self.peak = max(self.peak, region.allocated_bytes - base[id(region)])
            return addr

        memory.Region.allocate = allocate

    def close(self) -> None:
        self._region.allocate = self._orig


def child_peak(name: str, n: int, tp: int, chunk: int, hil: bool) -> dict:
    """In this (child) process: the peak resident bytes one prefill of ``name`` adds (and on
    ttsim the peak live DRAM of one chip above what it held before the prefill)."""
    b = Bench(backend(hil), n, tp, chunk)
    try:
        b.models[name].prefill(b.toks[:chunk], slot=0, page_table_row=b.row)  # lazy inits out of the way
        dev = None if hil else _DevicePeak(b.opened.mesh.chips)  # above weights, caches, tables
        try:
            got = record.peak_rss(lambda: b.prefill(name))
        finally:
            if dev is not None:
                dev.close()
    finally:
        b.close()
    out = {"peak_bytes": got["peak_bytes"], "method": got["method"]}
    if dev is not None:
        out["device_peak_bytes"] = dev.peak
    return out


def measure_peak(name: str, n: int, tp: int, chunk: int, hil: bool, threads: int) -> dict:
    cmd = [sys.executable, "-m", "bench.bench_model", "--_child-peak", name, str(n), str(tp), str(chunk),
           "--threads", str(threads)] + (["--hil"] if hil else [])
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        raise SystemExit(f"bench_model: the peak-memory child for {name} at {n} failed:\n{res.stderr[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_case(ttnn, n: int, tp: int, chunk: int, repeats: int, warmup: int, memory: bool, hil: bool,
               threads: int) -> dict:
    b = Bench(ttnn, n, tp, chunk)
    try:
        secs = record.side_by_side({name: (lambda name=name: b.prefill(name)) for name in PATHS},
                                   repeats=repeats, warmup=warmup)
    finally:
        b.close()
    case = {"tokens": n, "tp": tp, "prefill_chunk": chunk, "sdpa_chunk": b.cfg.sdpa_chunk,
            "streaming_s": secs["streaming"], "legacy_s": secs["legacy"],
            "streaming_tok_s": n / secs["streaming"], "legacy_tok_s": n / secs["legacy"],
            "ratio_streaming_over_legacy": secs["streaming"] / secs["legacy"]}
    if memory:
        for name in PATHS:
            peak = measure_peak(name, n, tp, chunk, hil, threads)
            case[f"{name}_peak_mib"] = round(peak["peak_bytes"] / 2**20, 1)
            if "device_peak_bytes" in peak:
                case[f"{name}_device_peak_mib"] = round(peak["device_peak_bytes"] / 2**20, 1)
            case["peak_method"] = peak["method"]
    return case


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lengths", nargs="+", type=int, default=[4096, 8192, 32768])
    ap.add_argument("--chunk", type=int, default=1024, help="prefill chunk, the same at every length")
    ap.add_argument("--tp", type=int, default=1, choices=[1, 2])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--hil", action="store_true", help="run on cards through the real ttnn")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory child processes")
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to the runs folder")
    ap.add_argument("--_child-peak", nargs=4, metavar=("PATH", "N", "TP", "CHUNK"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    if args._child_peak:
        name, n, tp, chunk = args._child_peak
        print(json.dumps(child_peak(name, int(n), int(tp), int(chunk), args.hil)))
        return 0
    bad = [n for n in args.lengths if n <= 0]
    if bad or args.chunk <= 0 or args.chunk % 256:
        raise SystemExit(f"bench_model: --chunk must be a positive multiple of 256 and lengths positive, "
                         f"got chunk {args.chunk}, lengths {args.lengths}")
    ttnn = backend(args.hil)
    if not args.hil:
        ttnn.set_seed(ttnn.DEFAULT_SEED)
    cases = []
    for n in args.lengths:
        c = bench_case(ttnn, n, args.tp, args.chunk, args.repeats, args.warmup, not args.no_memory, args.hil,
                       args.threads)
        cases.append(c)
        mem = "" if args.no_memory else (f"   peak host MiB streaming {c['streaming_peak_mib']:7.1f} "
                                         f"legacy {c['legacy_peak_mib']:7.1f}")
        if "streaming_device_peak_mib" in c:
            mem += (f"   live DRAM MiB streaming {c['streaming_device_peak_mib']:6.1f} "
                    f"legacy {c['legacy_device_peak_mib']:6.1f}")
        print(f"{n:6d} tok  tp={args.tp}  streaming {c['streaming_s']:7.2f} s  legacy {c['legacy_s']:7.2f} s  "
              f"ratio {c['ratio_streaming_over_legacy']:.3f}{mem}", flush=True)
    rec = {"backend": "hil" if args.hil else "ttsim", "config": "TINY", "cases": cases, "repeats": args.repeats,
           "warmup": args.warmup, "threads": args.threads, "loadavg": list(os.getloadavg())}
    if not args.hil:
        rec["ttsim_seed"] = ttnn.get_seed()
    if not args.no_record:
        print(f"appended to {record.write('model', rec)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
