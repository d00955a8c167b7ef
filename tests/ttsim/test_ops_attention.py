"""ttnn.transformer / ttnn.experimental attention ops on the device: selection, skips, errors."""

import logging
from pathlib import Path

import pytest
import torch

import ttsim
from model.pcc import comp_pcc

NB, NKV, BS, D = 8, 2, 32, 64


def _tile(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device)


def _ints(x, device):
    return ttsim.from_torch(torch.tensor(x, dtype=torch.int32), dtype=ttsim.int32, device=device)


@pytest.fixture
def paged(device):
    g = torch.Generator().manual_seed(0)
    k, v = torch.randn(NB, NKV, BS, D, generator=g), torch.randn(NB, NKV, BS, D, generator=g)
    table = torch.randperm(NB, generator=g).reshape(2, 4).int()
    return k, v, table, _tile(k, device), _tile(v, device), _ints(table.tolist(), device)


def _reference(q, k, v, table, start):
    """float64 causal attention with an offset, keys gathered through the page table."""
    b, nqh, sq, _ = q.shape
    length = start + sq
    out = torch.empty(b, nqh, sq, D, dtype=torch.float64)
    for r in range(b):
        keys = torch.cat([k[table[r, p]] for p in range(-(-length // BS))], dim=1)[:, :length].double()
        vals = torch.cat([v[table[r, p]] for p in range(-(-length // BS))], dim=1)[:, :length].double()
        keys, vals = keys.repeat_interleave(nqh // NKV, 0), vals.repeat_interleave(nqh // NKV, 0)
        s = q[r].double() @ keys.transpose(-1, -2) / D**0.5
        mask = torch.arange(length)[None, :] > (start + torch.arange(sq))[:, None]
        out[r] = torch.softmax(s.masked_fill(mask, float("-inf")), -1) @ vals
    return out


def test_chunked_sdpa_matches_float64_with_an_offset(device, paged):
    k, v, table, tk, tv, tt = paged
    q = torch.randn(2, 4, 64, D, generator=torch.Generator().manual_seed(1))
    cfg = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(13, 10), q_chunk_size=32,
                                  k_chunk_size=32)
    out = ttsim.transformer.chunked_scaled_dot_product_attention(_tile(q, device), tk, tv, tt, 64,
                                                                 program_config=cfg)
    ok, pcc = comp_pcc(_reference(q.bfloat16().float(), k.bfloat16().float(), v.bfloat16().float(), table, 64),
                       ttsim.to_torch(out).double(), 0.9994)
    assert ok, pcc


def test_each_prefill_op_runs_its_one_kernel(device, paged, monkeypatch):
    """Chunked SDPA is the online softmax, full SDPA the materialised one, as on a card; the
    other kernel is never reached (each is made to fail in turn)."""
    from ttsim.kernels import attention as K

    _, _, _, tk, tv, tt = paged
    q = _tile(torch.randn(2, 4, 64, D, generator=torch.Generator().manual_seed(3)), device)
    qf = _tile(torch.randn(1, 4, 64, D, generator=torch.Generator().manual_seed(4)), device)
    kf = _tile(torch.randn(1, 2, 64, D, generator=torch.Generator().manual_seed(5)), device)

    def refuse(name):
        def kernel(*a, **kw):
            raise AssertionError(f"{name} reached")
        return kernel

    legacy, streaming = K.sdpa_legacy, K.sdpa_streaming
    monkeypatch.setattr(K, "sdpa_legacy", refuse("sdpa_legacy"))
    ttsim.to_torch(ttsim.transformer.chunked_scaled_dot_product_attention(q, tk, tv, tt, 64))
    with pytest.raises(AssertionError, match="sdpa_legacy reached"):
        ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(qf, kf, kf))
    monkeypatch.setattr(K, "sdpa_legacy", legacy)
    monkeypatch.setattr(K, "sdpa_streaming", refuse("sdpa_streaming"))
    ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(qf, kf, kf))
    with pytest.raises(AssertionError, match="sdpa_streaming reached"):
        ttsim.to_torch(ttsim.transformer.chunked_scaled_dot_product_attention(q, tk, tv, tt, 64))
    monkeypatch.setattr(K, "sdpa_streaming", streaming)


def test_chunked_sdpa_never_builds_more_than_a_k_chunk_of_scores_and_full_sdpa_does(device, monkeypatch):
    """What makes streaming O(chunk): the chunked op's score blocks are at most k_chunk_size keys
    wide; the full op's span every key of the query chunk's rows (it materialises them)."""
    widths: list = []
    bmm = torch.bmm

    def noted(a, b, **kw):
        out = bmm(a, b, **kw)
        if b.shape[-2] == D:  # q @ k^T (for p @ v that dim is the keys: 32 or 512 here)
            widths.append(int(out.shape[-1]))
        return out

    g = torch.Generator().manual_seed(6)
    nb, s = 16, 512
    k = _tile(torch.randn(nb, NKV, BS, D, generator=g), device)
    q = _tile(torch.randn(1, 4, 64, D, generator=g), device)
    table = _ints([list(range(nb))], device)
    cfg = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(13, 10), q_chunk_size=64,
                                  k_chunk_size=32)
    monkeypatch.setattr(torch, "bmm", noted)
    ttsim.to_torch(ttsim.transformer.chunked_scaled_dot_product_attention(q, k, k, table, s - 64,
                                                                          program_config=cfg))
    chunked, widths[:] = list(widths), []
    kf = _tile(torch.randn(1, NKV, s, D, generator=g), device)
    mask = _tile(torch.zeros(1, 1, 64, s), device)
    ttsim.to_torch(ttsim.transformer.scaled_dot_product_attention(q, kf, kf, attn_mask=mask, is_causal=False,
                                                                  program_config=cfg))
    assert chunked and max(chunked) == 32 and len(chunked) == s // 32, chunked
    assert widths == [s], widths


def test_ttsim_reads_no_model_setting(device, paged, monkeypatch, caplog):
    """QWEN36_SDPA_STREAMING is the model's switch (model.settings): the device's ops give the same
    bytes whatever it holds and log no banner; no ttsim source names it."""
    _, _, _, tk, tv, tt = paged
    q = _tile(torch.randn(2, 4, 64, D, generator=torch.Generator().manual_seed(1)), device)
    outs = []
    with caplog.at_level(logging.INFO):
        for value in ("1", "0"):
            monkeypatch.setenv("QWEN36_SDPA_STREAMING", value)
            outs.append(ttsim.to_torch(ttsim.transformer.chunked_scaled_dot_product_attention(q, tk, tv, tt, 64)))
    assert torch.equal(outs[0], outs[1])
    assert "QWEN36_SDPA_STREAMING" not in caplog.text
    root = Path(ttsim.__file__).parent
    naming = [str(p.relative_to(root)) for p in sorted(root.rglob("*.py")) if "QWEN36_" in p.read_text()]
    assert not naming, f"ttsim sources read a model variable: {naming}"


def test_chunk_start_off_the_grid_names_the_argument(device, paged):
    _, _, _, tk, tv, tt = paged
    q = _tile(torch.zeros(2, 4, 32, D), device)
    cfg = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(13, 10), q_chunk_size=64,
                                  k_chunk_size=64)
    with pytest.raises(ttsim.TTFatal, match=r"chunk_start_idx=32 must be a non-negative multiple of q_chunk_size=64"):
        ttsim.transformer.chunked_scaled_dot_product_attention(q, tk, tv, tt, 32, program_config=cfg)


def test_heads_that_do_not_divide_and_unaligned_head_dims_are_refused(device, paged):
    _, _, _, tk, tv, tt = paged
    with pytest.raises(ttsim.TTFatal, match=r"query heads \(3\) must be a multiple of key/value heads \(2\)"):
        ttsim.transformer.chunked_scaled_dot_product_attention(_tile(torch.zeros(2, 3, 32, D), device), tk, tv, tt, 0)
    with pytest.raises(ttsim.TTFatal, match="head dims differ"):
        ttsim.transformer.chunked_scaled_dot_product_attention(_tile(torch.zeros(2, 4, 32, 32), device), tk, tv, tt, 0)
    with pytest.raises(ttsim.TTFatal, match="input_tensor_q must be rank 4"):
        ttsim.transformer.chunked_scaled_dot_product_attention(_tile(torch.zeros(4, 32, D), device), tk, tv, tt, 0)


def test_decode_skips_rows_at_minus_one_and_leaves_their_cache_alone(device, paged):
    k, v, table, tk, tv, tt = paged
    q = _tile(torch.randn(1, 2, 4, D, generator=torch.Generator().manual_seed(2)), device)
    new = _tile(torch.ones(1, 2, NKV, D), device)
    pos = _ints([40, -1], device)
    ttsim.experimental.paged_update_cache(tk, new, update_idxs_tensor=pos, page_table=tt)
    out = ttsim.transformer.paged_scaled_dot_product_attention_decode(q, tk, tv, tt, cur_pos_tensor=pos)
    cache = ttsim.to_torch(tk)
    written = cache[table[0, 40 // BS], :, 40 % BS]
    assert torch.all(written == 1)
    # row 1 (position -1): its pages are exactly as before
    for p in range(4):
        blk = table[1, p]
        assert torch.equal(cache[blk], k[blk].bfloat16())
    assert torch.isfinite(ttsim.to_torch(out)[0, 0]).all()
