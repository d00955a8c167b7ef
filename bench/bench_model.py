"""Benchmark: model prefill tokens/s on ttsim, streaming vs legacy SDPA side by side.

    python bench/bench_model.py                           # TINY and SMALL, 1k and 4k prompts
    python bench/bench_model.py --configs TINY --lengths 1024 --repeats 2

For each (config, prompt length) one model is built on a 1x1 mesh (``--tp 2`` for a 1x2
mesh) and a fresh prefill of the prompt (slot 0, start_pos 0, the config's own
prefill_chunk / SDPA chunk sizes) is timed with ``QWEN36_SDPA_STREAMING=1`` and ``=0``
interleaved round-robin (bench/record.py's side_by_side), so machine noise hits both arms
alike. torch runs single-threaded by default (``--threads``): ttsim's per-op math is
small, and on a shared 2-core box intra-op threads mostly add contention. One JSON line
per run goes to the runs folder, model.jsonl (record.write), with the load average, since the
box is shared: compare the streaming/legacy ratio across runs, not absolute times.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

import ttsim  # noqa: E402
from bench import record  # noqa: E402
from model import config as configs  # noqa: E402
from model.qwen36 import Qwen36Model  # noqa: E402
from model.tokenizer import encode  # noqa: E402
from model.weights import generate_weights  # noqa: E402

TEXT = encode("The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs. ")


def prompt(n: int) -> list[int]:
    return [TEXT[i % len(TEXT)] for i in range(n)]


def bench_case(cfg_name: str, n: int, tp: int, repeats: int, warmup: int) -> dict:
    cfg = getattr(configs, cfg_name)
    if n > cfg.max_context:
        raise SystemExit(f"{cfg_name}: prompt {n} exceeds max_context {cfg.max_context}")
    if tp > 1:  # collectives need the fabric, set before the mesh opens (tt-metal's rule)
        ttsim.set_fabric_config(ttsim.FabricConfig.FABRIC_1D)
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, tp))
    try:
        model = Qwen36Model(ttsim, dev, cfg, generate_weights(cfg, 0), max_slots=1, num_blocks=cfg.max_pages)
        toks = prompt(n)
        pt = torch.arange(cfg.max_pages, dtype=torch.int32)

        def arm(flag: str):
            def run():
                os.environ["QWEN36_SDPA_STREAMING"] = flag
                model.prefill(toks, slot=0, page_table_row=pt)
            return run

        secs = record.side_by_side({"streaming": arm("1"), "legacy": arm("0")}, repeats=repeats, warmup=warmup)
    finally:
        ttsim.close_mesh_device(dev)
        ttsim.set_fabric_config(ttsim.FabricConfig.DISABLED)
    return {
        "config": cfg_name, "tokens": n, "tp": tp, "prefill_chunk": cfg.prefill_chunk, "sdpa_chunk": cfg.sdpa_chunk,
        "streaming_s": secs["streaming"], "legacy_s": secs["legacy"],
        "streaming_tok_s": n / secs["streaming"], "legacy_tok_s": n / secs["legacy"],
        "ratio_streaming_over_legacy": secs["streaming"] / secs["legacy"],
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--configs", nargs="+", default=["TINY", "SMALL"])
    ap.add_argument("--lengths", nargs="+", type=int, default=[1024, 4096])
    ap.add_argument("--tp", type=int, default=1, choices=[1, 2])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--no-record", action="store_true", help="print only; do not append to the runs folder")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    saved = os.environ.get("QWEN36_SDPA_STREAMING")
    cases = []
    try:
        for name in args.configs:
            for n in args.lengths:
                c = bench_case(name, n, args.tp, args.repeats, args.warmup)
                cases.append(c)
                print(f"{name:5s} {n:6d} tok  tp={args.tp}  streaming {c['streaming_tok_s']:8.0f} tok/s "
                      f"({c['streaming_s']:.2f} s)   legacy {c['legacy_tok_s']:8.0f} tok/s ({c['legacy_s']:.2f} s)   "
                      f"ratio {c['ratio_streaming_over_legacy']:.3f}", flush=True)
    finally:
        if saved is None:
            os.environ.pop("QWEN36_SDPA_STREAMING", None)
        else:
            os.environ["QWEN36_SDPA_STREAMING"] = saved
    rec = {"cases": cases, "repeats": args.repeats, "warmup": args.warmup, "loadavg": list(os.getloadavg()),
           "ttsim_seed": ttsim.get_seed()}
    if not args.no_record:
        print(f"appended to {record.write('model', rec)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
