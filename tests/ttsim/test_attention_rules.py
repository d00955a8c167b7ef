"""The attention argument rules (ttsim/kernels/attention_rules.py), written once and enforced
by two layers: each rule at its boundary, then the same bad input refused by the ttnn op (a
TT_FATAL naming the op, raised at the call before any command is queued) and by the torch
kernel (a ValueError; IndexError for a batch index)."""

from functools import partial

import pytest
import torch

import ttsim
from ttsim.kernels import attention as K
from ttsim.kernels import attention_rules as R

T, E = ttsim.transformer, ttsim.experimental

# -- each rule at its boundary: (id, accepted call, refused call, what the refusal says) --

BOUNDARIES = [
    ("gqa", lambda: R.qkv((1, 4, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32)),
     lambda: R.qkv((1, 3, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32)),
     r"query heads \(3\) must be a multiple of key/value heads \(2\)"),
    ("no-kv-heads", lambda: R.qkv((1, 2, 32, 32), (1, 1, 32, 32), (1, 1, 32, 32)),
     lambda: R.qkv((1, 2, 32, 32), (1, 0, 32, 32), (1, 0, 32, 32)),
     r"key/value heads \(0\)"),
    ("head-dim", lambda: R.qkv((1, 2, 32, 64), (1, 2, 32, 64), (1, 2, 32, 32)),  # v's may differ
     lambda: R.qkv((1, 2, 32, 64), (1, 2, 32, 32), (1, 2, 32, 32)),
     r"head dims differ: input_tensor_q has 64, input_tensor_k has 32"),
    ("v-matches-k", lambda: R.qkv((1, 2, 32, 32), (1, 2, 64, 32), (1, 2, 64, 32)),
     lambda: R.qkv((1, 2, 32, 32), (1, 2, 64, 32), (1, 2, 63, 32)),
     r"input_tensor_v \[1, 2, 63, 32\] does not match input_tensor_k \[1, 2, 64, 32\]"),
    ("batch", lambda: R.qkv((2, 2, 32, 32), (2, 2, 32, 32), (2, 2, 32, 32)),
     lambda: R.qkv((2, 2, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32)),
     r"batch differs: input_tensor_q has 2, input_tensor_k has 1"),
    ("paged-has-no-batch", lambda: R.qkv((2, 2, 32, 32), (9, 2, 32, 32), (9, 2, 32, 32), paged=True),
     lambda: R.qkv((2, 2, 32, 32), (9, 2, 32, 32), (9, 2, 31, 32), paged=True),
     r"does not match"),
    ("rank", lambda: R.qkv((1, 2, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32)),
     lambda: R.qkv((2, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32)),
     r"input_tensor_q must be rank 4, got shape \[2, 32, 32\]"),
    ("decode-q", lambda: R.qkv((1, 3, 4, 32), (3, 2, 64, 32), (3, 2, 64, 32), decode=True),
     lambda: R.qkv((3, 1, 4, 32), (3, 2, 64, 32), (3, 2, 64, 32), decode=True),
     r"input_tensor_q must be \[1, batch, heads, head_dim\], got shape \[3, 1, 4, 32\]"),
    ("mask", lambda: R.mask((1, 4, 32, 64), 2, 4, 32, 64),
     lambda: R.mask((1, 4, 32, 63), 2, 4, 32, 64),
     r"attn_mask must be \[2 or 1, 4 or 1, 32, 64\], got shape \[1, 4, 32, 63\]"),
    ("mask-heads", lambda: R.mask((2, 1, 32, 64), 2, 4, 32, 64),
     lambda: R.mask((2, 3, 32, 64), 2, 4, 32, 64),
     r"attn_mask must be"),
    ("decode-mask", lambda: R.decode_mask((2, 1, 4, 64), 2, 4, 64),
     lambda: R.decode_mask((2, 1, 4, 63), 2, 4, 64),
     r"attn_mask must be \[2, 1, 4, 64\] \(batch, 1, heads, cache positions\), got shape \[2, 1, 4, 63\]"),
    ("decode-mask-missing", lambda: R.decode_mask((1, 1, 1, 32), 1, 1, 32),
     lambda: R.decode_mask(None, 1, 1, 32),
     r"is_causal=False needs attn_mask \[1, 1, 1, 32\]"),
    ("window", lambda: R.window(1), lambda: R.window(0),
     r"sliding_window_size must be a positive int or None, got 0"),
    ("window-bool", lambda: R.window(None), lambda: R.window(True), r"got True"),
    ("sink-prefill", lambda: R.sink((1, 4, 1, 1), 4, "prefill"), lambda: R.sink((1, 3, 1, 1), 4, "prefill"),
     r"attention_sink must be \[1, 4, 1, 1\] \(one sink per query head\), got shape \[1, 3, 1, 1\]"),
    ("sink-decode", lambda: R.sink((4, 32), 4, "decode"), lambda: R.sink((3, 32), 4, "decode"),
     r"attention_sink must be \[4, 1 or 32\] \(one sink per query head\)"),
    ("sink-logits", lambda: R.sink((4,), 4, "logits"), lambda: R.sink((3,), 4, "logits"),
     r"attention_sink must be 4 logits \(one sink per query head\), got shape \[3\]"),
    ("chunk-start", lambda: R.chunk_start(128, 64, 128), lambda: R.chunk_start(64, 64, 128),
     r"chunk_start_idx=64 must be a non-negative multiple of q_chunk_size=64 and k_chunk_size=128"),
    ("chunk-start-negative", lambda: R.chunk_start(0, 32, 32), lambda: R.chunk_start(-32, 32, 32),
     r"chunk_start_idx=-32"),
    ("page-table-rows", lambda: R.page_table("page_table", (2, 4), 2), lambda: R.page_table("page_table", (1, 4), 2),
     r"page_table has 1 rows, the batch has 2"),
    ("page-table-rank", lambda: R.page_table("page_table", (1, 4)), lambda: R.page_table("page_table", (4,)),
     r"page_table must be \[batch, max_pages\], got shape \[4\]"),
    ("positions", lambda: R.positions("cur_pos", (3,), 3), lambda: R.positions("cur_pos", (2,), 3),
     r"cur_pos must be \[3\] \(one position per batch row\), got shape \[2\]"),
    ("positions-rank", lambda: R.positions("cur_pos_tensor", (3,), 3), lambda: R.positions("cur_pos_tensor", (1, 3), 3),
     r"cur_pos_tensor must be \[3\]"),
    ("update-input", lambda: R.update_input("x", (1, 5, 2, 32), (8, 2, 32, 32)),
     lambda: R.update_input("x", (1, 5, 2, 31), (8, 2, 32, 32)),
     r"x must be \[1, batch, 2, 32\] for cache \[8, 2, 32, 32\], got shape \[1, 5, 2, 31\]"),
    ("update-input-padded", lambda: R.update_input("x", (1, 5, 32, 32), (8, 2, 32, 32), padded_heads=32),
     lambda: R.update_input("x", (1, 5, 32, 32), (8, 2, 32, 32)),
     r"x must be \[1, batch, 2, 32\]"),
    ("fill-input", lambda: R.fill_input("x", (1, 2, 77, 32), (8, 2, 32, 32)),
     lambda: R.fill_input("x", (1, 1, 77, 32), (8, 2, 32, 32)),
     r"x must be \[1, 2, S, 32\] for cache \[8, 2, 32, 32\], got shape \[1, 1, 77, 32\]"),
    ("batch-index", lambda: R.batch_index(3, 4), lambda: R.batch_index(4, 4),
     r"batch_idx=4 is outside the page table's 4 rows"),
    ("batch-index-negative", lambda: R.batch_index(0, 4), lambda: R.batch_index(-1, 4), r"batch_idx=-1"),
]


@pytest.mark.parametrize("ok, bad, message", [c[1:] for c in BOUNDARIES], ids=[c[0] for c in BOUNDARIES])
def test_rule_boundary(ok, bad, message):
    ok()
    with pytest.raises(R.AttentionArgError, match=message):
        bad()


def test_a_bad_batch_index_is_an_index_error_too():
    with pytest.raises(IndexError):
        R.batch_index(4, 4)


def test_rules_import_nothing_ttnn_facing():
    """The import graph stays one-way: ops use the rules, the rules know no ttsim types."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(R))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "math", "typing"}


# -- both layers refuse the same bad input -------------------------------------------------


def _z(*shape):
    return torch.zeros(shape)


def _tile(device, *shape):
    return ttsim.from_torch(_z(*shape), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)


def _ints(device, x):
    return ttsim.from_torch(torch.tensor(x, dtype=torch.int32), dtype=ttsim.int32, device=device)


def _cfg(chunk):
    return ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(8, 8), q_chunk_size=chunk,
                                   k_chunk_size=chunk)


_TABLE = [[0, 1]]  # one batch row, two 32-position pages of a [4, 2, 32, 32] cache
_PREFILL = dict(scale=None, q_chunk_size=32, k_chunk_size=32)


def _sdpa(d, q, k, v, **kw):
    return partial(T.scaled_dot_product_attention, _tile(d, *q), _tile(d, *k), _tile(d, *v), **kw)


def _paged_decode(d, q, **kw):
    cache = _tile(d, 4, 2, 32, 32)
    return partial(T.paged_scaled_dot_product_attention_decode, _tile(d, *q), cache, cache, _ints(d, _TABLE), **kw)


def _kernel_decode(q, cur_pos, **kw):
    return K.paged_sdpa_decode(_z(*q), _z(4, 2, 32, 32), _z(4, 2, 32, 32), torch.tensor(_TABLE), cur_pos,
                               scale=None, k_chunk_size=32, **kw)


# (id, op name, the op's call (its inputs made on a device), kernel call, op message, kernel message)
BOTH = [
    ("gqa", "scaled_dot_product_attention",
     lambda d: _sdpa(d, (1, 3, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32)),
     lambda: K.sdpa_streaming(_z(1, 3, 32, 32), _z(1, 2, 32, 32), _z(1, 2, 32, 32), is_causal=True, **_PREFILL),
     r"query heads \(3\) must be a multiple of key/value heads \(2\)",
     r"query heads \(3\) must be a multiple of key/value heads \(2\)"),
    ("head-dim", "scaled_dot_product_attention",
     lambda d: _sdpa(d, (1, 2, 32, 64), (1, 2, 32, 32), (1, 2, 32, 32)),
     lambda: K.sdpa_legacy(_z(1, 2, 32, 64), _z(1, 2, 32, 32), _z(1, 2, 32, 32), is_causal=True, **_PREFILL),
     r"head dims differ: input_tensor_q has 64, input_tensor_k has 32", r"head dims differ: q has 64, k has 32"),
    ("v-matches-k", "scaled_dot_product_attention",
     lambda d: _sdpa(d, (1, 2, 64, 32), (1, 2, 64, 32), (1, 2, 32, 32)),
     lambda: K.sdpa_streaming(_z(1, 2, 64, 32), _z(1, 2, 64, 32), _z(1, 2, 32, 32), is_causal=True, **_PREFILL),
     r"input_tensor_v \[1, 2, 32, 32\] does not match input_tensor_k", r"v \[1, 2, 32, 32\] does not match k"),
    ("batch", "scaled_dot_product_attention",
     lambda d: _sdpa(d, (2, 2, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32)),
     lambda: K.sdpa_legacy(_z(2, 2, 32, 32), _z(1, 2, 32, 32), _z(1, 2, 32, 32), is_causal=True, **_PREFILL),
     r"batch differs: input_tensor_q has 2, input_tensor_k has 1", r"batch differs: q has 2, k has 1"),
    ("rank", "chunked_scaled_dot_product_attention",
     lambda d: partial(T.chunked_scaled_dot_product_attention, _tile(d, 2, 32, 32), _tile(d, 4, 2, 32, 32),
                       _tile(d, 4, 2, 32, 32), _ints(d, _TABLE), 0),
     lambda: K.sdpa_streaming(_z(2, 32, 32), _z(1, 2, 32, 32), _z(1, 2, 32, 32), is_causal=True, **_PREFILL),
     r"input_tensor_q must be rank 4, got shape \[2, 32, 32\]", r"q must be rank 4, got shape \[2, 32, 32\]"),
    ("decode-q", "paged_scaled_dot_product_attention_decode",
     lambda d: _paged_decode(d, (2, 1, 2, 32), cur_pos_tensor=_ints(d, [0])),
     lambda: _kernel_decode((2, 1, 2, 32), [0]),
     r"input_tensor_q must be \[1, batch, heads, head_dim\]", r"q must be \[1, batch, heads, head_dim\]"),
    ("mask", "scaled_dot_product_attention",
     lambda d: _sdpa(d, (2, 2, 64, 32), (2, 2, 64, 32), (2, 2, 64, 32), is_causal=False,
                     attn_mask=_tile(d, 1, 1, 64, 63)),
     lambda: K.sdpa_streaming(_z(2, 2, 64, 32), _z(2, 2, 64, 32), _z(2, 2, 64, 32), is_causal=False,
                              attn_mask=_z(1, 1, 64, 63), **_PREFILL),
     r"attn_mask must be \[2 or 1, 2 or 1, 64, 64\], got shape \[1, 1, 64, 63\]",
     r"attn_mask must be \[2 or 1, 2 or 1, 64, 64\], got shape \[1, 1, 64, 63\]"),
    ("decode-mask", "paged_scaled_dot_product_attention_decode",
     lambda d: _paged_decode(d, (1, 1, 2, 32), is_causal=False, attn_mask=_tile(d, 1, 1, 2, 32)),
     lambda: _kernel_decode((1, 1, 2, 32), None, attn_mask=_z(1, 1, 2, 32)),
     r"attn_mask must be \[1, 1, 2, 64\]", r"attn_mask must be \[1, 1, 2, 64\]"),
    ("window", "scaled_dot_product_attention",
     lambda d: _sdpa(d, (1, 2, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32), sliding_window_size=0),
     lambda: K.sdpa_streaming(_z(1, 2, 32, 32), _z(1, 2, 32, 32), _z(1, 2, 32, 32), is_causal=True, window=0,
                              **_PREFILL),
     r"sliding_window_size must be a positive int or None, got 0",
     r"sliding_window_size must be a positive int or None, got 0"),
    ("sink", "scaled_dot_product_attention",
     lambda d: _sdpa(d, (1, 2, 32, 32), (1, 2, 32, 32), (1, 2, 32, 32), attention_sink=_tile(d, 1, 1, 1, 1)),
     lambda: K.sdpa_legacy(_z(1, 2, 32, 32), _z(1, 2, 32, 32), _z(1, 2, 32, 32), is_causal=True, sink=_z(1),
                           **_PREFILL),
     r"attention_sink must be \[1, 2, 1, 1\] \(one sink per query head\)",
     r"attention_sink must be 2 logits \(one sink per query head\)"),
    ("chunk-start", "chunked_scaled_dot_product_attention",
     lambda d: partial(T.chunked_scaled_dot_product_attention, _tile(d, 1, 2, 64, 32), _tile(d, 4, 2, 32, 32),
                                                      _tile(d, 4, 2, 32, 32), _ints(d, _TABLE), 32,
                                                      program_config=_cfg(64)),
     lambda: K.chunked_sdpa_paged(_z(1, 2, 64, 32), _z(4, 2, 32, 32), _z(4, 2, 32, 32), torch.tensor(_TABLE), 32,
                                  scale=None, q_chunk_size=64, k_chunk_size=64),
     r"chunk_start_idx=32 must be a non-negative multiple of q_chunk_size=64",
     r"chunk_start_idx=32 must be a non-negative multiple of q_chunk_size=64"),
    ("page-table-rows", "chunked_scaled_dot_product_attention",
     lambda d: partial(T.chunked_scaled_dot_product_attention, _tile(d, 2, 2, 32, 32), _tile(d, 4, 2, 32, 32),
                                                      _tile(d, 4, 2, 32, 32), _ints(d, _TABLE), 0),
     lambda: K.chunked_sdpa_paged(_z(2, 2, 32, 32), _z(4, 2, 32, 32), _z(4, 2, 32, 32), torch.tensor(_TABLE), 0,
                                  scale=None, q_chunk_size=32, k_chunk_size=32),
     r"page_table_tensor has 1 rows, the batch has 2", r"page_table has 1 rows, the batch has 2"),
    ("page-table-rank", "paged_scaled_dot_product_attention_decode",
     lambda d: partial(T.paged_scaled_dot_product_attention_decode, _tile(d, 1, 1, 2, 32), _tile(d, 4, 2, 32, 32),
                       _tile(d, 4, 2, 32, 32), _ints(d, [0, 1]), cur_pos_tensor=_ints(d, [0])),
     lambda: K.paged_sdpa_decode(_z(1, 1, 2, 32), _z(4, 2, 32, 32), _z(4, 2, 32, 32), torch.tensor([0, 1]), [0],
                                 scale=None, k_chunk_size=32),
     r"page_table_tensor must be \[batch, max_pages\], got shape \[2\]",
     r"page_table must be \[batch, max_pages\], got shape \[2\]"),
    ("positions", "paged_scaled_dot_product_attention_decode",
     lambda d: _paged_decode(d, (1, 1, 2, 32), cur_pos_tensor=_ints(d, [0, 0])),
     lambda: _kernel_decode((1, 1, 2, 32), [0, 0]),
     r"cur_pos_tensor must be \[1\] \(one position per batch row\), got shape \[2\]",
     r"cur_pos must be \[1\] \(one position per batch row\), got shape \[2\]"),
    ("update-positions", "paged_update_cache",
     lambda d: partial(E.paged_update_cache, _tile(d, 4, 2, 32, 32), _tile(d, 1, 1, 2, 32), update_idxs=[0, 0],
                                    page_table=_ints(d, _TABLE)),
     lambda: K.paged_update_cache(_z(4, 2, 32, 32), _z(1, 1, 2, 32), [0, 0], torch.tensor(_TABLE)),
     r"update_idxs must be \[1\] \(one position per batch row\)",
     r"update_idxs must be \[1\] \(one position per batch row\)"),
    ("update-input", "paged_update_cache",
     lambda d: partial(E.paged_update_cache, _tile(d, 4, 2, 32, 32), _tile(d, 1, 1, 2, 64), update_idxs=[0],
                                    page_table=_ints(d, _TABLE)),
     lambda: K.paged_update_cache(_z(4, 2, 32, 32), _z(1, 1, 2, 64), [0], torch.tensor(_TABLE)),
     r"input_tensor must be \[1, batch, 2 \(or tile-padded\), 32\]", r"x must be \[1, batch, 2, 32\]"),
    ("fill-input", "paged_fill_cache",
     lambda d: partial(E.paged_fill_cache, _tile(d, 4, 2, 32, 32), _tile(d, 1, 1, 32, 32), _ints(d, _TABLE)),
     lambda: K.paged_fill_cache(_z(4, 2, 32, 32), _z(1, 1, 32, 32), torch.tensor(_TABLE), 0),
     r"input_tensor must be \[1, 2, S, 32\]", r"x must be \[1, 2, S, 32\]"),
    ("batch-index", "paged_fill_cache",
     lambda d: partial(E.paged_fill_cache, _tile(d, 4, 2, 32, 32), _tile(d, 1, 2, 32, 32), _ints(d, _TABLE),
                       batch_idx=1),
     lambda: K.paged_fill_cache(_z(4, 2, 32, 32), _z(1, 2, 32, 32), torch.tensor(_TABLE), 1),
     r"batch_idx=1 is outside the page table's 1 rows", r"batch_idx=1 is outside the page table's 1 rows"),
]


@pytest.mark.parametrize("op, op_call, kernel_call, op_message, kernel_message", [c[1:] for c in BOTH],
                         ids=[c[0] for c in BOTH])
def test_the_op_and_the_kernel_refuse_the_same_input(device, monkeypatch, op, op_call, kernel_call, op_message,
                                                     kernel_message):
    monkeypatch.setattr(device, "lag", 1.1)  # nothing runs until something waits: a refusal is the call's
    call = op_call(device)
    queued = device.stats["commands"]
    with pytest.raises(ttsim.TTFatal, match=op_message) as refused:
        call()
    assert str(refused.value).startswith(f"TT_FATAL: {op}: ")
    assert device.stats["commands"] == queued
    expected = IndexError if "batch_idx" in kernel_message else ValueError
    with pytest.raises(expected, match=kernel_message):
        kernel_call()
