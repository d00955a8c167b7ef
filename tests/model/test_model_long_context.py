"""Long-context prefill: last-token logits vs the float64 reference (and streaming vs legacy SDPA).

Long runs use the same TINY model with a longer ``max_context``, ``prefill_chunk`` 512-2048
and SDPA q/k chunks of 256 (as long-context prefill uses on cards); the 245k case is the
production validation range and runs on cards only.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from model.config import TINY
from model.pcc import comp_pcc
from model.reference import reference_last_logits
from model_helpers import build, prompt, weights_for

PCC_LONG = 0.9994  # the production gate (worst case measured on cards: 0.999447 at 245k)


def _long_config(n: int, chunk: int):
    return dataclasses.replace(TINY, max_context=-(-n // 256) * 256, prefill_chunk=chunk, sdpa_chunk=256)


def _prefill(ttnn, mesh_device, cfg, toks, monkeypatch, streaming: str):
    monkeypatch.setenv("QWEN36_SDPA_STREAMING", streaming)
    model = build(ttnn, mesh_device, cfg, max_slots=1)
    return model.prefill(toks, slot=0, page_table_row=torch.arange(cfg.max_pages, dtype=torch.int32))


def _check(name, want, got, gate=PCC_LONG, record=None):
    ok, pcc = comp_pcc(want, got, gate)
    if record is not None:  # into the --hil session record
        record(f"pcc {name}", float(pcc))
    assert ok, f"{name}: PCC {pcc} < {gate}"
    assert int(want.argmax()) == int(got.argmax()), f"{name}: argmax differs"
    return pcc


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_prefill_8k_matches_reference_streaming_and_legacy(ttnn, mesh_device, monkeypatch, record_property):
    n = 8192 + 100  # past 8k, and a ragged last chunk
    cfg = _long_config(n, 512)
    toks = prompt(n)
    want = reference_last_logits(cfg, weights_for(cfg), toks)
    streaming = _prefill(ttnn, mesh_device, cfg, toks, monkeypatch, "1")
    legacy = _prefill(ttnn, mesh_device, cfg, toks, monkeypatch, "0")
    _check("streaming vs reference", want, streaming, record=record_property)
    _check("legacy vs reference", want, legacy, record=record_property)
    _check("streaming vs legacy", legacy, streaming, 0.999, record=record_property)


@pytest.mark.slow
@pytest.mark.parametrize("mesh_device", [2], indirect=True)
def test_prefill_32k_tp2_matches_reference(ttnn, mesh_device, monkeypatch, record_property):
    n = 32768
    cfg = _long_config(n, 2048)
    toks = prompt(n, offset=17)
    got = _prefill(ttnn, mesh_device, cfg, toks, monkeypatch, "1")
    _check("32k streaming TP=2 vs reference", reference_last_logits(cfg, weights_for(cfg), toks), got,
           record=record_property)


@pytest.mark.hardware_only
@pytest.mark.slow
@pytest.mark.parametrize("mesh_device", [2], indirect=True)
def test_prefill_245k_tp2_matches_reference_on_cards(ttnn, mesh_device, monkeypatch, record_property):
    """The production validation point: 245k tokens, streaming SDPA, TP=2, PCC >= 0.9994."""
    n = 245_000
    cfg = _long_config(n, 2048)
    toks = prompt(n, offset=29)
    got = _prefill(ttnn, mesh_device, cfg, toks, monkeypatch, "1")
    _check("245k streaming TP=2 vs reference", reference_last_logits(cfg, weights_for(cfg), toks), got,
           record=record_property)
