"""Numerical tests of ttsim's attention kernels against float64 references.

The float64 reference math lives HERE (not in ttsim), so ttsim never depends on it.
Inputs are bf16-rounded normals with rare x10 outliers; every random draw comes from a
seeded torch.Generator, so each test is deterministic.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.overrides import TorchFunctionMode

from model.pcc import assert_with_pcc, comp_allclose, comp_pcc
from ttsim.kernels.attention import (
    chunked_sdpa_paged,
    paged_fill_cache,
    paged_sdpa_decode,
    paged_update_cache,
    sdpa_legacy,
    sdpa_streaming,
)

REPO = Path(__file__).resolve().parents[2]
PCC_GATE = 0.9994  # production's streaming-SDPA gate
KERNELS = {"streaming": sdpa_streaming, "legacy": sdpa_legacy}


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small kernels: one intra-op thread is faster and immune to OpenMP spin-waiting
    when the suite runs in parallel (restored after each test)."""
    prev = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(prev)


# ----------------------------------------------------------------------------- data


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def rand_bf16(g: torch.Generator, *shape, outlier_p: float = 2e-3) -> torch.Tensor:
    """Standard normal with rare x10 outliers, rounded to bf16 (what the card stores)."""
    x = torch.randn(shape, generator=g)
    hit = torch.rand(shape, generator=g) < outlier_p
    return torch.where(hit, x * 10.0, x).to(torch.bfloat16)


# ----------------------------------------------------------------------------- float64 references


def ref_sdpa(q, k, v, *, scale=None, causal=False, q_offset=0, attn_mask=None):
    """float64 SDPA: GQA by repeat_interleave, causal with offset (row i at q_offset+i sees
    keys j <= q_offset+i), additive mask, fully masked rows -> 0."""
    q, k, v = q.double(), k.double(), v.double()
    b, nqh, sq, d = q.shape
    nkv, sk = k.shape[1], k.shape[2]
    if sk == 0:
        return torch.zeros(b, nqh, sq, v.shape[-1], dtype=torch.float64)
    grp = nqh // nkv
    k = k.repeat_interleave(grp, dim=1)
    v = v.repeat_interleave(grp, dim=1)
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = (q @ k.transpose(-1, -2)) * scale
    if attn_mask is not None:
        s = s + attn_mask.double()
    if causal:
        qpos = q_offset + torch.arange(sq).view(sq, 1)
        kpos = torch.arange(sk).view(1, sk)
        s = s.masked_fill(kpos > qpos, float("-inf"))
    m = s.amax(-1, keepdim=True)
    m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
    p = torch.exp(s - m)
    den = p.sum(-1, keepdim=True)
    return (p @ v) / torch.where(den == 0, torch.ones_like(den), den)


def ref_paged_gather(cache, page_table_row, length):
    """Positions 0..length-1 of one row, gathered element by element (independent path)."""
    bs = cache.shape[2]
    cols = [cache[int(page_table_row[p // bs]), :, p % bs, :] for p in range(length)]
    return torch.stack(cols, dim=1) if cols else cache.new_zeros(cache.shape[1], 0, cache.shape[3])


def build_paged(g, k_full, v_full, block_size, max_pages, spare_blocks=3, fill=float("nan")):
    """Scatter contiguous K/V [b, nkv, max_pages*bs, d] into a paged cache through a random
    permutation page table. Unused blocks are filled with ``fill`` (NaN: any read leaks)."""
    b, nkv, _, d = k_full.shape
    nb = b * max_pages + spare_blocks
    perm = torch.randperm(nb, generator=g)
    page_table = perm[: b * max_pages].view(b, max_pages).to(torch.int32)
    kc = torch.full((nb, nkv, block_size, d), fill, dtype=k_full.dtype)
    vc = torch.full((nb, nkv, block_size, d), fill, dtype=v_full.dtype)
    for r in range(b):
        for p in range(max_pages):
            blk = int(page_table[r, p])
            kc[blk] = k_full[r, :, p * block_size : (p + 1) * block_size]
            vc[blk] = v_full[r, :, p * block_size : (p + 1) * block_size]
    return kc, vc, page_table


def poison_beyond(cache, page_table, lengths):
    """Set every cached position >= lengths[r] of row r to NaN (they must never be read)."""
    bs = cache.shape[2]
    for r, n in enumerate(lengths):
        for p in range(n, page_table.shape[1] * bs):
            cache[int(page_table[r, p // bs]), :, p % bs, :] = float("nan")


def same_bits(a, b):
    """Equal including NaN positions."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def check_close(out, ref, *, what=""):
    """fp32 kernel vs float64 reference: production's PCC gate on the bf16-rounded output
    the device layer returns, plus a tight elementwise bound (PCC alone would let a few
    wrong rows through)."""
    assert out.dtype == torch.float32
    assert not torch.isnan(out).any(), f"{what}: NaN in output"
    ok, val = comp_pcc(ref, out.to(torch.bfloat16), PCC_GATE)
    assert ok, f"{what}: bf16 PCC {val} < {PCC_GATE}"
    ok, val = comp_pcc(ref, out, 0.99999)
    assert ok, f"{what}: fp32 PCC {val}"
    err = (out.double() - ref).abs().max().item()
    assert err <= 2e-5 * max(1.0, ref.abs().max().item()), f"{what}: max abs err {err}"


# ----------------------------------------------------------------------------- dense SDPA

CHUNKS = [(32, 32), (32, 128), (64, 64), (128, 32), (128, 256), (256, 128), (256, 256)]
HEADS = [(8, 2), (4, 4), (8, 1)]


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("qc,kc", CHUNKS)
@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_matches_reference(kernel, qc, kc, causal):
    g = gen(1000 + qc * 7 + kc)
    nqh, nkv = HEADS[(qc // 32 + kc // 32) % len(HEADS)]
    b, s, d = 1, 280, 64  # s not a multiple of any chunk size: partial last chunks
    q, k, v = rand_bf16(g, b, nqh, s, d), rand_bf16(g, b, nkv, s, d), rand_bf16(g, b, nkv, s, d)
    out = KERNELS[kernel](q, k, v, scale=None, is_causal=causal, q_chunk_size=qc, k_chunk_size=kc)
    assert out.shape == (b, nqh, s, d)
    check_close(out, ref_sdpa(q, k, v, causal=causal), what=f"{kernel} qc={qc} kc={kc}")


@pytest.mark.parametrize("q_offset", [0, 64, 100, 512])
@pytest.mark.parametrize("qc,kc", [(32, 64), (64, 32), (128, 128), (256, 256)])
def test_causal_offset_chunk(q_offset, qc, kc):
    """Queries at positions q_offset.. against keys 0..q_offset+Sq-1 (chunked prefill
    geometry), including an offset (100) that is off every chunk grid."""
    g = gen(2000 + q_offset + qc + kc)
    b, nqh, nkv, sq, d = 1, 8, 2, 192, 64
    sk = q_offset + sq
    q, k, v = rand_bf16(g, b, nqh, sq, d), rand_bf16(g, b, nkv, sk, d), rand_bf16(g, b, nkv, sk, d)
    ref = ref_sdpa(q, k, v, causal=True, q_offset=q_offset, scale=0.1)
    outs = {}
    for name, fn in KERNELS.items():
        outs[name] = fn(q, k, v, scale=0.1, is_causal=True, q_offset=q_offset, q_chunk_size=qc, k_chunk_size=kc)
        check_close(outs[name], ref, what=f"{name} off={q_offset}")
    # torch's top-left aligned is_causal is NOT this semantics once q_offset > 0
    tl = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float(), v.float(), is_causal=True, scale=0.1, enable_gqa=True
    )
    if q_offset:
        assert (tl - outs["streaming"]).abs().max() > 1e-2


def test_streaming_agrees_with_legacy():
    g = gen(3)
    b, nqh, nkv, s, d = 1, 8, 2, 576, 128
    q, k, v = rand_bf16(g, b, nqh, s, d), rand_bf16(g, b, nkv, s, d), rand_bf16(g, b, nkv, s, d)
    for qc, kc in [(64, 128), (256, 64), (128, 512)]:
        a = sdpa_streaming(q, k, v, scale=None, is_causal=True, q_chunk_size=qc, k_chunk_size=kc)
        c = sdpa_legacy(q, k, v, scale=None, is_causal=True, q_chunk_size=qc, k_chunk_size=kc)
        ok, val = comp_pcc(c, a, 0.9999)
        assert ok and val > 0.9999, val
        assert comp_allclose(c, a, rtol=1e-4, atol=2e-5)[0]


def test_chunk_size_invariance_and_determinism():
    """Different chunkings agree to fp32 rounding; the same call is bitwise repeatable."""
    g = gen(4)
    q, k, v = rand_bf16(g, 1, 4, 256, 64), rand_bf16(g, 1, 2, 256, 64), rand_bf16(g, 1, 2, 256, 64)
    kw = dict(scale=None, is_causal=True)
    a = sdpa_streaming(q, k, v, q_chunk_size=32, k_chunk_size=32, **kw)
    b = sdpa_streaming(q, k, v, q_chunk_size=256, k_chunk_size=256, **kw)
    assert (a - b).abs().max() < 1e-5
    assert torch.equal(a, sdpa_streaming(q, k, v, q_chunk_size=32, k_chunk_size=32, **kw))


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_bitwise_independent_of_thread_count(kernel):
    """ttsim promises one seed -> same bytes on any machine: kernel output must not
    depend on the intra-op thread count."""
    g = gen(44)
    q, k, v = rand_bf16(g, 1, 8, 300, 64), rand_bf16(g, 1, 2, 300, 64), rand_bf16(g, 1, 2, 300, 64)
    kw = dict(scale=None, is_causal=True, q_chunk_size=64, k_chunk_size=128)
    one = KERNELS[kernel](q, k, v, **kw)
    torch.set_num_threads(2)  # restored by the autouse fixture
    two = KERNELS[kernel](q, k, v, **kw)
    assert torch.get_num_threads() == 2  # the kernel restores the caller's setting
    assert torch.equal(one, two)


def test_inputs_not_modified_and_dtypes():
    g = gen(5)
    q, k, v = rand_bf16(g, 1, 4, 96, 32), rand_bf16(g, 1, 2, 96, 32), rand_bf16(g, 1, 2, 96, 32)
    snap = [t.clone() for t in (q, k, v)]
    for fn in KERNELS.values():
        for dt in (torch.bfloat16, torch.float32, torch.float64):
            out = fn(q.to(dt), k.to(dt), v.to(dt), scale=None, is_causal=True, q_chunk_size=32, k_chunk_size=64)
            assert out.dtype == torch.float32
    assert all(torch.equal(a, b) for a, b in zip(snap, (q, k, v)))


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("mask_heads", [1, 8])
def test_additive_mask_and_fully_masked_rows(kernel, mask_heads):
    g = gen(6 + mask_heads)
    b, nqh, nkv, sq, sk, d = 2, 8, 2, 160, 224, 64
    q, k, v = rand_bf16(g, b, nqh, sq, d), rand_bf16(g, b, nkv, sk, d), rand_bf16(g, b, nkv, sk, d)
    mask = torch.randn(b, mask_heads, sq, sk, generator=g).to(torch.bfloat16 if mask_heads == 1 else torch.float64)
    mask[torch.rand(mask.shape, generator=g) < 0.3] = float("-inf")
    dead_rows = [(0, 0, 3), (1, mask_heads - 1, 100), (0, 0, 159)]
    for bi, hi, qi in dead_rows:
        mask[bi, hi, qi, :] = float("-inf")
    # a row whose only visible keys sit in a late chunk: first chunks all -inf
    mask[1, 0, 50, :200] = float("-inf")
    out = KERNELS[kernel](q, k, v, scale=None, is_causal=False, attn_mask=mask, q_chunk_size=32, k_chunk_size=64)
    ref = ref_sdpa(q, k, v, attn_mask=mask)
    assert not torch.isnan(out).any()
    heads = range(nqh) if mask_heads == 1 else [None]
    for bi, hi, qi in dead_rows:
        for h in heads:
            assert torch.all(out[bi, hi if h is None else h, qi] == 0.0)
    check_close(out, ref, what=f"{kernel} mask")


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_causal_plus_mask_fully_masked_and_empty_keys(kernel):
    g = gen(8)
    q, k, v = rand_bf16(g, 1, 2, 64, 32), rand_bf16(g, 1, 1, 64, 32), rand_bf16(g, 1, 1, 64, 32)
    mask = torch.zeros(1, 1, 64, 64)
    mask[0, 0, :, :10] = float("-inf")  # rows 0..9 see only keys <= i, all masked: dead
    fn = KERNELS[kernel]
    out = fn(q, k, v, scale=None, is_causal=True, attn_mask=mask, q_chunk_size=32, k_chunk_size=32)
    assert torch.all(out[0, :, :10] == 0) and not torch.isnan(out).any()
    check_close(out, ref_sdpa(q, k, v, causal=True, attn_mask=mask), what="causal+mask")
    empty = fn(q, k[:, :, :0], v[:, :, :0], scale=None, is_causal=False, q_chunk_size=32, k_chunk_size=32)
    assert empty.shape == (1, 2, 64, 32) and torch.all(empty == 0)


def test_argument_validation():
    q, k = torch.zeros(1, 6, 32, 16), torch.zeros(1, 4, 32, 16)
    with pytest.raises(ValueError, match=r"query heads \(6\) must be a multiple of key/value heads \(4\)"):
        sdpa_streaming(q, k, k, scale=None, is_causal=True, q_chunk_size=32, k_chunk_size=32)
    q = torch.zeros(1, 4, 32, 16)
    with pytest.raises(ValueError, match="q_chunk_size"):
        sdpa_streaming(q, k, k, scale=None, is_causal=True, q_chunk_size=0, k_chunk_size=32)
    with pytest.raises(ValueError, match="attn_mask"):
        sdpa_legacy(q, k, k, scale=None, is_causal=False, attn_mask=torch.zeros(1, 2, 32, 32),
                    q_chunk_size=32, k_chunk_size=32)


# ----------------------------------------------------------------------------- structure / memory


class _Allocations(TorchFunctionMode):
    """Records every torch call made inside the block: the storage size of each tensor
    it returns that is not one of the inputs' storages, and the shapes of bmm outputs."""

    def __init__(self, inputs):
        super().__init__()
        self.input_ptrs = {t.untyped_storage().data_ptr() for t in inputs}
        self.max_new_bytes = 0
        self.bmm_shapes = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        res = func(*args, **(kwargs or {}))
        outs = res if isinstance(res, (tuple, list)) else (res,)
        for r in outs:
            if isinstance(r, torch.Tensor):
                st = r.untyped_storage()
                if st.data_ptr() not in self.input_ptrs:
                    self.max_new_bytes = max(self.max_new_bytes, st.nbytes())
        if getattr(func, "__name__", "") == "bmm":
            self.bmm_shapes.append(tuple(res.shape))
        return res


def test_streaming_score_blocks_bounded_and_causal_skip():
    """Every tensor streaming creates is far below Sq x Sk; its score blocks are
    (group*q_chunk) x <=k_chunk; chunks above the diagonal are never computed."""
    g = gen(9)
    b, nqh, nkv, s, d, qc, kc = 1, 4, 2, 1024, 48, 64, 128  # d differs from every score width
    q, k, v = rand_bf16(g, b, nqh, s, d), rand_bf16(g, b, nkv, s, d), rand_bf16(g, b, nkv, s, d)
    q, k, v = q.float(), k.float(), v.float()
    with _Allocations((q, k, v)) as rec:
        sdpa_streaming(q, k, v, scale=None, is_causal=True, q_chunk_size=qc, k_chunk_size=kc)
    grp = nqh // nkv
    full_scores_bytes = s * s * 4  # ONE head's Sq x Sk in fp32
    assert rec.max_new_bytes < full_scores_bytes / 4, rec.max_new_bytes
    scores = [sh for sh in rec.bmm_shapes if sh[2] != d]  # q @ k^T blocks (p @ v ones end in d)
    assert all(sh[0] == b * nkv and sh[1] == grp * qc and sh[2] <= kc for sh in scores)
    expected_blocks = sum(math.ceil((qs + qc) / kc) for qs in range(0, s, qc))
    assert len(scores) == expected_blocks < (s // qc) * (s // kc)
    # negative control: the legacy kernel's score rows span all visible keys
    with _Allocations((q, k, v)) as rec_legacy:
        sdpa_legacy(q, k, v, scale=None, is_causal=True, q_chunk_size=qc, k_chunk_size=kc)
    assert max(sh[2] for sh in rec_legacy.bmm_shapes if sh[2] != d) == s


_PEAK_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from ttsim.kernels.attention import sdpa_streaming, sdpa_legacy
    torch.set_num_threads(1)
    def hwm():
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) * 1024
    def rss():
        for line in open("/proc/self/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1]) * 1024
    def peak(fn):
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset the peak-RSS counter (Linux >= 4.0)
        base = rss()
        fn()
        return hwm() - base
    S, D = int(sys.argv[1]), 64
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, S, D, generator=g) for _ in range(3))
    kw = dict(scale=None, is_causal=True, q_chunk_size=256, k_chunk_size=512)
    small = [t[:, :, :256] for t in (q, k, v)]
    sdpa_streaming(*small, **kw); sdpa_legacy(*small, **kw)  # warm up lazy inits
    r = {"streaming": peak(lambda: sdpa_streaming(q, k, v, **kw)),
         "legacy": peak(lambda: sdpa_legacy(q, k, v, **kw)),
         "full": peak(lambda: q[0, 0] @ k[0, 0].T)}  # the Sq x Sk buffer streaming must avoid
    print(json.dumps(r))
    """
)


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux peak-RSS reset")
def test_streaming_peak_memory_real_measurement():
    """Real process peak RSS (VmHWM, reset via clear_refs) at Sq = Sk = 8192: the full
    score matrix is 256 MiB; streaming must stay far below, and the measurement must see
    the full matrix when it is built (negative control)."""
    s = 8192
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT, str(s)], capture_output=True,
                         text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    peaks = json.loads(res.stdout.strip().splitlines()[-1])
    full = s * s * 4
    assert peaks["full"] >= 0.9 * full, peaks  # the method detects an Sq x Sk buffer
    assert peaks["streaming"] < full / 8, peaks
    assert peaks["streaming"] < peaks["legacy"], peaks


# ----------------------------------------------------------------------------- paged chunked prefill

PAGED_CASES = [
    # chunk_start, sq, qc, kc, block_size
    (0, 128, 32, 32, 32),
    (128, 128, 64, 128, 32),
    (256, 256, 128, 256, 64),
    (512, 64, 64, 256, 64),
    (384, 96, 128, 128, 32),  # sq not a multiple of qc
]


@pytest.mark.parametrize("chunk_start,sq,qc,kc,bs", PAGED_CASES)
def test_chunked_sdpa_paged(chunk_start, sq, qc, kc, bs):
    g = gen(10 + chunk_start + sq + bs)
    b, nqh, nkv, d, max_pages = 2, 8, 2, 64, 1024 // bs
    cap = max_pages * bs
    q = rand_bf16(g, b, nqh, sq, d)
    k_full, v_full = rand_bf16(g, b, nkv, cap, d), rand_bf16(g, b, nkv, cap, d)
    kc_, vc_, pt = build_paged(g, k_full, v_full, bs, max_pages)
    length = chunk_start + sq
    poison_beyond(kc_, pt, [length] * b)
    poison_beyond(vc_, pt, [length] * b)
    for r in range(b):  # the gather path agrees with an element-wise gather
        assert torch.equal(ref_paged_gather(kc_, pt[r], length), k_full[r, :, :length])
    ref = ref_sdpa(q, k_full[:, :, :length], v_full[:, :, :length], causal=True, q_offset=chunk_start)
    snap = (kc_.clone(), vc_.clone())
    out = chunked_sdpa_paged(q, kc_, vc_, pt, chunk_start, scale=None, q_chunk_size=qc, k_chunk_size=kc)
    check_close(out, ref, what="paged (streaming)")
    # cross-check: the materialised kernel on the same K/V gathered by hand
    legacy = sdpa_legacy(q, k_full[:, :, :length], v_full[:, :, :length], scale=None, is_causal=True,
                         q_offset=chunk_start, q_chunk_size=qc, k_chunk_size=kc)
    assert comp_pcc(legacy, out, 0.9999)[0]
    assert same_bits(snap[0], kc_) and same_bits(snap[1], vc_)  # prefill never writes the cache


@pytest.mark.parametrize("chunk_start,qc,kc", [(96, 64, 32), (64, 32, 128), (1, 32, 32), (250, 50, 100)])
def test_chunked_sdpa_offgrid_chunk_start_raises(chunk_start, qc, kc):
    q = torch.zeros(1, 2, 32, 32)
    cache = torch.zeros(32, 1, 32, 32)
    pt = torch.arange(32, dtype=torch.int32).view(1, 32)
    with pytest.raises(ValueError, match=r"chunk_start_idx.*q_chunk_size=%d.*k_chunk_size=%d" % (qc, kc)):
        chunked_sdpa_paged(q, cache, cache, pt, chunk_start, scale=None, q_chunk_size=qc, k_chunk_size=kc)


def test_chunked_sdpa_beyond_page_table_raises():
    q = torch.zeros(1, 2, 64, 32)
    cache = torch.zeros(8, 1, 32, 32)
    pt = torch.arange(4, dtype=torch.int32).view(1, 4)  # capacity 128 positions
    with pytest.raises(IndexError, match=r"batch row 0: position 128"):
        chunked_sdpa_paged(q, cache, cache, pt, 128, scale=None, q_chunk_size=64, k_chunk_size=64)
    bad = torch.tensor([[0, 1, 99, 3]], dtype=torch.int32)
    with pytest.raises(IndexError, match=r"block 99"):
        chunked_sdpa_paged(q, cache, cache, bad, 64, scale=None, q_chunk_size=64, k_chunk_size=64)


# ----------------------------------------------------------------------------- paged decode


@pytest.mark.parametrize("streaming", [True, False])
@pytest.mark.parametrize("kc", [32, 128, 256])
def test_paged_decode_skips_inactive_rows(streaming, kc):
    g = gen(20 + kc)
    b, nqh, nkv, d, bs, max_pages = 5, 8, 2, 64, 32, 12
    cap = bs * max_pages
    cur_pos = torch.tensor([37, -1, 0, cap - 1, 200], dtype=torch.int32)
    q = rand_bf16(g, 1, b, nqh, d)
    k_full, v_full = rand_bf16(g, b, nkv, cap, d), rand_bf16(g, b, nkv, cap, d)
    kc_, vc_, pt = build_paged(g, k_full, v_full, bs, max_pages)
    lengths = [int(p) + 1 if p >= 0 else 0 for p in cur_pos]
    poison_beyond(kc_, pt, lengths)  # keys after cur_pos (exclusive) must never be read
    poison_beyond(vc_, pt, lengths)
    k_snap, v_snap = kc_.clone(), vc_.clone()
    out = torch.full((1, b, nqh, d), 7.25)
    ret = paged_sdpa_decode(q, kc_, vc_, pt, cur_pos, scale=None, k_chunk_size=kc, streaming=streaming, out=out)
    assert ret is out
    assert torch.all(out[0, 1] == 7.25)  # skipped row untouched
    assert same_bits(k_snap, kc_) and same_bits(v_snap, vc_)  # decode never writes the cache
    for r, p in enumerate(cur_pos.tolist()):
        if p < 0:
            continue
        qr = q[0, r].view(1, nqh, 1, d)
        ref = ref_sdpa(qr, k_full[r : r + 1, :, : p + 1], v_full[r : r + 1, :, : p + 1])
        check_close(out[0, r].view(1, nqh, 1, d), ref, what=f"decode row {r}")


def test_paged_decode_without_out_and_bf16_out():
    g = gen(21)
    q = rand_bf16(g, 1, 2, 4, 32)
    k_full, v_full = rand_bf16(g, 2, 1, 64, 32), rand_bf16(g, 2, 1, 64, 32)
    kc_, vc_, pt = build_paged(g, k_full, v_full, 32, 2)
    out = paged_sdpa_decode(q, kc_, vc_, pt, [-1, 10], scale=None, k_chunk_size=32)
    assert out.dtype == torch.float32 and torch.all(out[0, 0] == 0)
    given = torch.full((1, 2, 4, 32), -3.0, dtype=torch.bfloat16)
    res = paged_sdpa_decode(q, kc_, vc_, pt, torch.tensor([5, -1]), scale=None, k_chunk_size=32, out=given)
    assert res is given and torch.all(given[0, 1] == -3.0)
    # rows run in a thread pool when torch has >1 thread: same bytes either way
    torch.set_num_threads(2)  # restored by the autouse fixture
    both = paged_sdpa_decode(q, kc_, vc_, pt, [40, 10], scale=None, k_chunk_size=32)
    torch.set_num_threads(1)
    assert torch.equal(both, paged_sdpa_decode(q, kc_, vc_, pt, [40, 10], scale=None, k_chunk_size=32))


@pytest.mark.parametrize("bad_pos", [64, 1206993233, -2])
def test_paged_decode_position_out_of_range_raises(bad_pos):
    q = torch.zeros(1, 3, 2, 32)
    cache = torch.zeros(8, 1, 32, 32)
    pt = torch.arange(6, dtype=torch.int32).view(3, 2)  # 64 positions per row
    with pytest.raises(IndexError, match=rf"batch row 2: position {bad_pos}"):
        paged_sdpa_decode(q, cache, cache, pt, [3, -1, bad_pos], scale=None, k_chunk_size=32)


# ----------------------------------------------------------------------------- paged cache writes


def test_paged_update_cache():
    g = gen(30)
    nkv, d, bs, max_pages, b = 2, 32, 16, 4, 4
    cache = rand_bf16(g, b * max_pages + 2, nkv, bs, d)
    pt = torch.randperm(b * max_pages + 2, generator=g)[: b * max_pages].view(b, max_pages).to(torch.int32)
    x = torch.randn(1, b, nkv, d, generator=g)
    idxs = torch.tensor([5, -1, 63, 16], dtype=torch.int32)
    before = cache.clone()
    ret = paged_update_cache(cache, x, idxs, pt)
    assert ret is cache
    expect = before.clone()
    for r, p in enumerate(idxs.tolist()):
        if p >= 0:
            expect[int(pt[r, p // bs]), :, p % bs] = x[0, r].to(torch.bfloat16)
    assert torch.equal(cache, expect)  # written slots rounded to bf16; row 1 and all else untouched


@pytest.mark.parametrize("bad", [64, 1196966132, -7])
def test_paged_update_cache_out_of_range_refuses_atomically(bad):
    cache = torch.zeros(8, 1, 16, 8)
    pt = torch.arange(8, dtype=torch.int32).view(2, 4)  # 64 positions per row
    x = torch.ones(1, 2, 1, 8)
    with pytest.raises(IndexError, match=rf"batch row 1: position {bad}"):
        paged_update_cache(cache, x, [3, bad], pt)
    assert torch.all(cache == 0)  # row 0 was valid but nothing was written


def test_paged_fill_cache():
    g = gen(31)
    nkv, d, bs, max_pages = 2, 32, 32, 5
    nb = 12
    cache = torch.full((nb, nkv, bs, d), -9.0)
    pt = torch.randperm(nb, generator=g)[:10].view(2, max_pages).to(torch.int32)
    s = 100  # 3 full pages + 4 positions
    x = torch.randn(1, nkv, s, d, generator=g)
    paged_fill_cache(cache, x, pt, 1)
    assert torch.equal(ref_paged_gather(cache, pt[1], s), x[0])
    last = int(pt[1, s // bs])
    assert torch.all(cache[last, :, s % bs :] == -9.0)  # slots past S untouched
    untouched = set(range(nb)) - {int(pt[1, p]) for p in range(4)}
    assert all(torch.all(cache[i] == -9.0) for i in untouched)
    cache2 = torch.zeros_like(cache)
    paged_fill_cache(cache2, x, pt[1], 1)  # one page-table row
    assert torch.equal(cache2[last, :, : s % bs], x[0, :, 96:])
    with pytest.raises(IndexError, match=r"batch row 0: position 160"):
        paged_fill_cache(cache2, torch.zeros(1, nkv, 161, d), pt, 0)


# ----------------------------------------------------------------------------- comp_pcc semantics


def test_comp_pcc_semantics():
    nan, inf = float("nan"), float("inf")
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert comp_pcc(torch.full((3,), nan), torch.full((3,), nan)) == (True, 1.0)
    assert comp_pcc(torch.full((4,), nan), a) == (False, 0.0)
    assert comp_pcc(a, torch.full((4,), nan)) == (False, 0.0)
    assert comp_pcc(torch.zeros(4), a) == (False, 0.0)  # one all zero
    assert comp_pcc(torch.zeros(4), torch.zeros(4)) == (True, 1.0)
    assert comp_pcc(a, a.clone()) == (True, 1.0)
    assert comp_pcc(torch.full((4,), 2.0), torch.full((4,), 3.0)) == (False, 0.0)  # constant, unequal
    assert comp_pcc(torch.full((4,), 2.0), a) == (False, 0.0)  # zero variance
    # non-finite positions must agree (tightened); when they do they are masked out
    g1 = torch.tensor([1.0, nan, 3.0, inf, 5.0, 2.0])
    c1 = torch.tensor([1.1, nan, 2.9, inf, 5.2, 2.0])
    ok, val = comp_pcc(g1, c1)
    fin = torch.tensor([1.0, 0.0, 3.0, 0.0, 5.0, 2.0]), torch.tensor([1.1, 0.0, 2.9, 0.0, 5.2, 2.0])
    assert ok and abs(val - np.corrcoef(fin[0].numpy(), fin[1].numpy())[0, 1]) < 1e-12
    assert comp_pcc(a, torch.tensor([1.0, nan, 3.0, 4.0])) == (False, 0.0)
    assert comp_pcc(torch.tensor([1.0, inf, 3.0, 4.0]), torch.tensor([1.0, -inf, 3.0, 4.0])) == (False, 0.0)
    # tt-metal's lenient mode zeroes each tensor's non-finite values independently
    ok, val = comp_pcc(a, torch.tensor([1.0, nan, 3.0, 4.0]), 0.0, strict_nonfinite=False)
    assert ok and abs(val - np.corrcoef([1.0, 2, 3, 4], [1.0, 0, 3, 4])[0, 1]) < 1e-12
    # value: Pearson of float64 flattened, any dtype / shape [1, n] vs [n]
    x = torch.randn(1000, generator=gen(40))
    y = x + 0.1 * torch.randn(1000, generator=gen(41))
    ok, val = comp_pcc(x.view(1, 1000), y.to(torch.bfloat16), 0.99)
    assert ok and abs(val - np.corrcoef(x.numpy(), y.bfloat16().double().numpy())[0, 1]) < 1e-9
    assert comp_pcc(x, -x) == (False, -1.0)
    assert isinstance(val, float)
    with pytest.raises(AssertionError):
        assert_with_pcc(x, torch.randn(1000, generator=gen(42)), 0.99)
    with pytest.raises(ValueError):
        comp_pcc(torch.zeros(3), torch.zeros(4))


def test_comp_allclose():
    a = torch.tensor([1.0, 2.0, float("nan")])
    ok, msg = comp_allclose(a, torch.tensor([1.0, 2.00001, float("nan")]), rtol=1e-4)
    assert ok and msg.startswith("Max ATOL Delta: ")
    ok, msg = comp_allclose(a[:2], torch.tensor([1.0, 2.5]))
    assert not ok and "Max ATOL Delta: 0.5" in msg and "Max RTOL Delta: 0.2" in msg


# ----------------------------------------------------------------------------- reused score buffers

def _fresh_take(self, slot, n):
    """The first design's buffers: a new tensor for every q chunk (the slow path)."""
    return torch.empty(n, dtype=torch.float32)


def _scratch_cases():
    g = gen(71)
    q, k, v = rand_bf16(g, 1, 4, 301, 32), rand_bf16(g, 1, 2, 301, 32), rand_bf16(g, 1, 2, 301, 32)
    mask = torch.zeros(1, 4, 301, 301)
    mask[..., ::3] = float("-inf")
    mask[:, :, 7] = float("-inf")  # a fully masked row
    sink = torch.randn(4, generator=g)
    base = dict(scale=None, q_chunk_size=64, k_chunk_size=32)
    yield q, k, v, dict(base, is_causal=True)  # chunks of shrinking width, ragged last one
    yield q[:, :, :60], k, v, dict(base, is_causal=True, q_offset=241)
    yield q, k, v, dict(base, is_causal=False, attn_mask=mask)
    yield q, k, v, dict(base, is_causal=True, window=40, sink=sink)


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_reused_score_buffers_change_no_bit(kernel, monkeypatch):
    """Each thread's q chunks of a call share their score/softmax buffers (_Scratch): bitwise the
    result of a fresh buffer per chunk, for chunks of different widths and rows, a fully masked
    row, a sink and a window, on one thread and on two."""
    from ttsim.kernels import attention as A

    cases = list(_scratch_cases())
    reused = [KERNELS[kernel](q, k, v, **kw) for q, k, v, kw in cases]
    torch.set_num_threads(2)  # restored by the autouse fixture
    threaded = [KERNELS[kernel](q, k, v, **kw) for q, k, v, kw in cases]
    monkeypatch.setattr(A._Scratch, "take", _fresh_take)
    torch.set_num_threads(1)
    fresh = [KERNELS[kernel](q, k, v, **kw) for q, k, v, kw in cases]
    for a, b, c in zip(reused, threaded, fresh):
        assert torch.equal(a.view(torch.int32), c.view(torch.int32))
        assert torch.equal(b.view(torch.int32), c.view(torch.int32))


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_score_buffers_are_per_thread(kernel):
    """Two threads running q chunks at once never share a buffer: many chunks on two threads,
    repeated, give the one-thread bytes (a buffer shared across threads races)."""
    g = gen(72)
    q, k, v = rand_bf16(g, 1, 2, 1024, 32), rand_bf16(g, 1, 1, 1024, 32), rand_bf16(g, 1, 1, 1024, 32)
    kw = dict(scale=None, is_causal=False, q_chunk_size=32, k_chunk_size=256)
    one = KERNELS[kernel](q, k, v, **kw)
    torch.set_num_threads(2)  # restored by the autouse fixture
    for _ in range(3):
        assert torch.equal(KERNELS[kernel](q, k, v, **kw).view(torch.int32), one.view(torch.int32))


# ----------------------------------------------------------------------------- bf16 masks widened per q chunk


def _mask_cases():
    g = gen(73)
    for b, nqh, nkv, mb, mh in ((1, 4, 2, 1, 1), (2, 4, 2, 2, 1), (1, 4, 1, 1, 4)):
        q, k, v = rand_bf16(g, b, nqh, 197, 32), rand_bf16(g, b, nkv, 230, 32), rand_bf16(g, b, nkv, 230, 32)
        mask = torch.randn(mb, mh, 197, 230, generator=g).to(torch.bfloat16)
        mask[..., 150:] = float("-inf")
        mask[..., 3, :] = float("-inf")  # a fully masked row
        mask[..., 9, 17] = float("nan")
        yield q, k, v, mask


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_a_bf16_mask_gives_the_bytes_of_its_float32_widening(kernel):
    """The device op hands the kernel its mask as stored (bf16), widened one q chunk at a time
    into a reused buffer: bitwise the result of the whole mask widened first, for masks broadcast
    over batch and heads or per batch row or per head, a fully masked row and a NaN, on one thread
    and two."""
    for q, k, v, mask in _mask_cases():
        kw = dict(scale=None, is_causal=False, q_chunk_size=64, k_chunk_size=64)
        want = KERNELS[kernel](q, k, v, attn_mask=mask.float(), **kw)
        assert torch.equal(KERNELS[kernel](q, k, v, attn_mask=mask, **kw).view(torch.int32), want.view(torch.int32))
        torch.set_num_threads(2)  # restored by the autouse fixture
        assert torch.equal(KERNELS[kernel](q, k, v, attn_mask=mask, **kw).view(torch.int32), want.view(torch.int32))
        torch.set_num_threads(1)


def test_the_sdpa_op_stores_the_bytes_of_the_kernel_on_widened_inputs():
    """ttsim's scaled_dot_product_attention reads its inputs as stored (bf16 q/k/v, mask and sink
    are not widened to float32 first): its output bytes are those of the legacy kernel on the
    widened inputs, rounded as the device rounds (NaN canonical), with a NaN key, an inf value,
    a NaN in the mask and a sink."""
    import ttsim
    from ttsim import numerics

    dev = ttsim.open_device(device_id=0)
    try:
        g = gen(74)
        q, k, v = rand_bf16(g, 1, 4, 96, 32), rand_bf16(g, 1, 2, 128, 32), rand_bf16(g, 1, 2, 128, 32)
        k[0, 0, 7, 3], v[0, 1, 20, 2] = float("nan"), float("inf")
        mask = torch.zeros(1, 1, 96, 128, dtype=torch.bfloat16)
        mask[..., 100:] = float("-inf")
        mask[0, 0, 11, 13] = float("nan")
        sink = (torch.rand(1, 4, 1, 1, generator=g) * 3).to(torch.bfloat16)

        def dev_t(x):
            return ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=dev)

        cfg = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(8, 8), q_chunk_size=32,
                                      k_chunk_size=64)
        sink_logits = sink.float().reshape(4) * 32 ** -0.5  # stored value times the scale
        for extra, sink_logits in (({"attn_mask": dev_t(mask), "is_causal": False}, None),
                                   ({"attention_sink": dev_t(sink), "is_causal": True}, sink_logits)):
            got = ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(
                dev_t(q), dev_t(k), dev_t(v), program_config=cfg, **extra))
            want = sdpa_legacy(q.float(), k.float(), v.float(), scale=None, q_chunk_size=32, k_chunk_size=64,
                               is_causal=extra["is_causal"], attn_mask=mask.float() if sink_logits is None else None,
                               sink=sink_logits)
            want = numerics.to_bfloat16(want)
            assert bool(want.isnan().any())  # the NaN key reaches the output, canonicalised
            assert torch.equal(got.view(torch.int16), want.view(torch.int16))
    finally:
        ttsim.close_device(dev)


def test_the_sdpa_op_on_junk_stores_what_the_float32_path_stores(monkeypatch):
    """Differential on never-written memory (odd NaN payloads, infinities, -0.0, subnormals in q, k,
    v and the mask): the op reading its bf16 inputs as stored, and once through the float32
    widening (chip_stored swapped for chip_logical), store the same bytes."""
    import ttsim
    from ttsim.ops import base

    dev = ttsim.open_device(device_id=0)
    try:
        def junk(*shape):
            return ttsim.allocate_tensor_on_device(ttsim.Shape(list(shape)), ttsim.bfloat16, ttsim.TILE_LAYOUT, dev)

        q, k, v, mask = junk(1, 2, 64, 32), junk(1, 1, 96, 32), junk(1, 1, 96, 32), junk(1, 1, 64, 96)
        raw = ttsim.to_torch(mask).view(torch.int16)
        assert bool(((raw & 0x7F80) == 0x7F80).any()), "junk holds no NaN/inf"

        def run():
            out = ttsim.transformer.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=False)
            return ttsim.to_torch(out).view(torch.int16)

        fast = run()
        monkeypatch.setattr(base, "chip_stored", base.chip_logical)
        assert torch.equal(fast, run())
    finally:
        ttsim.close_device(dev)
