"""The model's prefill attention switch (production's QWEN36_SDPA_STREAMING, patch 0020).

The choice is the model's: it reads the variable once through ``model.settings`` (or is
handed it), logs the readiness banner only when streaming is engaged, and the two paths
issue different ttnn calls, so on a card ``[streaming]`` and ``[legacy]`` run different
kernels. These run on either backend (the call recorder wraps whichever module the
session hands the model).
"""

from __future__ import annotations

import logging
from collections import Counter

import pytest
import torch

from model import settings
from model.config import TINY
from model_helpers import build, pages, prompt

BANNER = "QWEN36_SDPA_STREAMING engaged"


class _Calls:
    """The ttnn module the model is handed, noting the name of every call it makes (in order)."""

    def __init__(self, mod, names: list, path: str = "ttnn"):
        self._mod, self._names, self._path = mod, names, path

    def __getattr__(self, name):
        obj = getattr(self._mod, name)
        path = f"{self._path}.{name}"
        if name in ("transformer", "experimental"):
            return _Calls(obj, self._names, path)
        if callable(obj) and not isinstance(obj, type) and not name[0].isupper():
            def noted(*args, **kwargs):
                self._names.append(path)
                return obj(*args, **kwargs)
            return noted
        return obj


def _prefill_calls(ttnn, mesh_device, streaming: bool) -> list[str]:
    """Every ttnn call (in order) of a 300-token prefill (chunks at 0, 128, 256) and of a
    continuation (128 tokens, then 172 at start_pos=128)."""
    names: list[str] = []
    model = build(ttnn, mesh_device, TINY, sdpa_streaming=streaming)
    model.ttnn = _Calls(ttnn, names)  # construction (weights, caches) is not what differs
    toks = prompt(300)
    model.prefill(toks, slot=0, page_table_row=pages(TINY, 0))
    model.prefill(toks[:128], slot=1, page_table_row=pages(TINY, 1))
    model.prefill(toks[128:], slot=1, page_table_row=pages(TINY, 1), start_pos=128)
    return names


def _attention_of_second_chunk(names: list[str]) -> list[str]:
    """The calls from the second chunk's K fill to its output projection (its attention core)."""
    fills = [i for i, n in enumerate(names) if n == "ttnn.experimental.paged_fill_cache"]
    start = fills[2]  # two fills (K, V) per chunk; TINY has one attention layer
    end = names.index("ttnn.permute", start)
    return [n.removeprefix("ttnn.") for n in names[start:end + 1]]


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_streaming_and_legacy_prefill_issue_different_ttnn_calls(ttnn, mesh_device):
    streaming = _prefill_calls(ttnn, mesh_device, True)
    legacy = _prefill_calls(ttnn, mesh_device, False)
    core = {"streaming": _attention_of_second_chunk(streaming), "legacy": _attention_of_second_chunk(legacy)}
    counts = {k: Counter(v) for k, v in (("streaming", streaming), ("legacy", legacy))}
    diff = {n: (counts["streaming"][n], counts["legacy"][n]) for n in sorted(set(streaming) | set(legacy))
            if counts["streaming"][n] != counts["legacy"][n]}
    print("\nsecond chunk's attention, streaming:", " -> ".join(core["streaming"]))
    print("second chunk's attention, legacy:   ", " -> ".join(core["legacy"]))
    print("calls whose count differs (streaming, legacy):", diff)
    chunked = "ttnn.transformer.chunked_scaled_dot_product_attention"
    full = "ttnn.transformer.scaled_dot_product_attention"
    fill = "ttnn.experimental.paged_fill_cache"
    assert chunked in streaming and full not in streaming
    assert full in legacy and chunked not in legacy
    assert counts["streaming"][fill] == counts["legacy"][fill] == 2 * 6  # both keep the cache decode reads
    assert counts["streaming"][chunked] == counts["legacy"][full] == 6  # one attention call per chunk
    # legacy materialises the earlier K/V: joined by concat in each of the 4 chunks past position 0
    # (K and V), and for the continuation read back from the pages (one slice + permute per K/V)
    assert counts["legacy"]["ttnn.concat"] - counts["streaming"]["ttnn.concat"] == 2 * 4
    assert counts["legacy"]["ttnn.slice"] - counts["streaming"]["ttnn.slice"] == 2
    assert counts["legacy"]["ttnn.from_torch"] - counts["streaming"]["ttnn.from_torch"] == 6  # the masks
    assert core["streaming"] != core["legacy"]


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "legacy"])
@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_the_banner_is_logged_exactly_when_streaming_is_engaged(ttnn, mesh_device, caplog, streaming):
    with caplog.at_level(logging.INFO, logger="model"):
        model = build(ttnn, mesh_device, TINY, sdpa_streaming=streaming)
        model.prefill(prompt(40), slot=0, page_table_row=pages(TINY, 0))
    banners = [r for r in caplog.records if r.getMessage() == BANNER]
    assert len(banners) == (1 if streaming else 0), caplog.text
    assert all(r.name == "model.qwen36" and r.levelno == logging.WARNING for r in banners)


@pytest.mark.parametrize("value, engaged", [("1", True), ("0", False), (None, False), ("on", False),
                                            ("true", False), (" 1", False)])
@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_a_model_built_without_a_choice_reads_the_environment_once(ttnn, mesh_device, monkeypatch, caplog,
                                                                    value, engaged):
    """Production's switch: exactly "1" is streaming, anything else legacy; read when the model
    is built (a later change of the variable does not move a built model to the other path)."""
    if value is None:
        monkeypatch.delenv(settings.STREAMING_ENV, raising=False)
    else:
        monkeypatch.setenv(settings.STREAMING_ENV, value)
    with caplog.at_level(logging.INFO, logger="model"):
        model = build(ttnn, mesh_device, TINY)
    assert model.sdpa_streaming is engaged
    assert (BANNER in caplog.text) is engaged
    monkeypatch.setenv(settings.STREAMING_ENV, "0" if engaged else "1")
    assert model.sdpa_streaming is engaged


def test_settings_read_only_the_streaming_variable():
    assert settings.sdpa_streaming({"QWEN36_SDPA_STREAMING": "1"}) is True
    for env in ({}, {"QWEN36_SDPA_STREAMING": "0"}, {"QWEN36_SDPA_STREAMING": "yes"}, {"SDPA_STREAMING": "1"}):
        assert settings.sdpa_streaming(env) is False, env
    assert settings.STREAMING_BANNER == BANNER


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_a_non_bool_choice_is_refused_naming_it(ttnn, mesh_device):
    with pytest.raises(ValueError, match=r"sdpa_streaming must be a bool or None, got '1'"):
        build(ttnn, mesh_device, TINY, sdpa_streaming="1")


class _MaskSeen:
    """Hands the model its ttnn module, keeping each mask legacy's full SDPA is given (chip 0)."""

    def __init__(self, ttnn, masks: list):
        self._ttnn = ttnn
        full = ttnn.transformer.scaled_dot_product_attention

        def sdpa(q, k, v, **kw):
            assert kw.get("is_causal") is False, "legacy SDPA must not use is_causal (top-left diagonal)"
            mask = ttnn.to_torch(ttnn.get_device_tensors(kw["attn_mask"])[0]).float()
            masks.append((int(q.shape[2]), int(k.shape[2]), mask))
            return full(q, k, v, **kw)

        self.transformer = _Namespace(ttnn.transformer, scaled_dot_product_attention=sdpa)

    def __getattr__(self, name):
        return getattr(self._ttnn, name)


class _Namespace:
    def __init__(self, mod, **override):
        self._mod, self._override = mod, override

    def __getattr__(self, name):
        return self._override[name] if name in self._override else getattr(self._mod, name)


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_legacy_masks_show_each_query_its_keys_up_to_its_own_position(ttnn, mesh_device):
    """Every chunk's mask is [1, 1, t, start + t]: query row r (position start + r) sees keys
    0 .. start + r (0) and no later key (-inf), for full and ragged chunks and a continuation."""
    masks: list = []
    model = build(ttnn, mesh_device, TINY, sdpa_streaming=False)
    model.ttnn = _MaskSeen(ttnn, masks)
    toks = prompt(300)
    model.prefill(toks, slot=0, page_table_row=pages(TINY, 0))
    model.prefill(toks[128:], slot=1, page_table_row=pages(TINY, 1), start_pos=128)
    assert [(t, s) for t, s, _ in masks] == [(128, 128), (128, 256), (44, 300), (128, 256), (44, 172 + 128)]
    for t, s, mask in masks:
        start = s - t
        assert tuple(mask.shape) == (1, 1, t, s)
        visible = torch.arange(s)[None, :] <= (start + torch.arange(t))[:, None]
        assert torch.equal(mask[0, 0] == 0, visible) and bool(torch.isneginf(mask[0, 0][~visible]).all())


def _f32_mask(start: int, t: int) -> torch.Tensor:
    """The mask as first written (float32, rounded to bf16 by from_torch): the bytes to match."""
    pos = torch.arange(start, start + t).reshape(t, 1)
    blocked = torch.arange(start + t).reshape(1, start + t) > pos
    return torch.zeros(t, start + t).masked_fill_(blocked, float("-inf")).reshape(1, 1, t, start + t)


@pytest.mark.parametrize("start,t", [(0, 128), (128, 128), (256, 44), (0, 1), (96, 33)])
@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True)
def test_legacy_mask_built_in_bf16_stores_the_bytes_of_the_f32_construction(ttnn, mesh_device, start, t):
    """The mask is built directly in bf16 (no float32 tensor, no rounding pass): on every chip it
    holds exactly the bytes the float32 construction stored, +0.0 (not -0.0) included, for full,
    ragged (tile-padded) and one-row chunks."""
    model = build(ttnn, mesh_device, TINY, sdpa_streaming=False)
    scope = []
    got = model._causal_offset_mask(lambda x: scope.append(x) or x, start, t)
    want = model._rep(_f32_mask(start, t), model.act_dtype)
    assert got.dtype == want.dtype and tuple(got.shape) == (1, 1, t, start + t)
    for g, w in zip(ttnn.get_device_tensors(got), ttnn.get_device_tensors(want)):
        g, w = ttnn.to_torch(g), ttnn.to_torch(w)
        assert g.dtype == w.dtype == torch.bfloat16
        assert torch.equal(g.view(torch.int16), w.view(torch.int16))
    assert scope == [got]  # the scope owns it (freed with the chunk)
