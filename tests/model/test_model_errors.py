"""Bad input to the model's interface: clear errors naming the argument, raised before any
device work (so a refused call leaves caches and states untouched)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from model.config import TINY
from model.qwen36 import Qwen36Model
from model_helpers import DecodeInputs, build, pages, prompt, snapshot_state, to_dev, weights_for


@pytest.fixture
def model(ttnn, mesh_device):
    return build(ttnn, mesh_device, TINY)


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"tokens": []}, "tokens must be non-empty"),
        ({"tokens": [[1, 2], [3, 4]]}, "tokens must be a 1-D"),
        ({"tokens": torch.zeros(2, 3, dtype=torch.int64)}, "tokens must be a 1-D"),
        ({"tokens": [1, 300]}, "tokens: id 300 is outside the vocab"),
        ({"slot": 4}, r"slot must be an int in \[0, 4\)"),
        ({"slot": -1}, "slot must be"),
        ({"start_pos": 100}, "start_pos=100 must be a multiple of prefill_chunk=128"),
        ({"start_pos": -128}, "start_pos must be a non-negative int"),
        ({"page_table_row": torch.zeros(2, 8, dtype=torch.int32)}, "page_table_row must be a 1-D int32"),
        ({"page_table_row": torch.zeros(8)}, "page_table_row must be a 1-D int32"),
        ({"page_table_row": torch.arange(1, dtype=torch.int32)}, "page_table_row has 1 pages"),
        ({"page_table_row": torch.full((128,), 9999, dtype=torch.int32)}, "page_table_row entries"),
        ({"tokens": [1] * 10, "start_pos": 4096}, "exceeds max_context 4096"),
    ],
)
def test_prefill_rejects_bad_input(ttnn, mesh_device, model, kwargs, match):
    args = {"tokens": prompt(40), "slot": 0, "page_table_row": pages(TINY, 0), "start_pos": 0, **kwargs}
    tokens = args.pop("tokens")
    before = snapshot_state(ttnn, model)
    with pytest.raises(ValueError, match=match):
        model.prefill(tokens, **args)
    after = snapshot_state(ttnn, model)
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_decode_rejects_bad_shapes_and_dtypes(ttnn, mesh_device, model):
    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=2)
    tok, pos, pt, sl = inp.args()
    i32 = ttnn.int32
    bad = {
        "tokens must be \\[1, B\\]": (to_dev(ttnn, mesh_device, torch.zeros(2, dtype=torch.int32), ttnn.uint32),
                                       pos, pt, sl),
        "tokens must be uint32": (to_dev(ttnn, mesh_device, torch.zeros(1, 2, dtype=torch.int32), i32), pos, pt, sl),
        "positions must be \\[B\\] = \\[2\\]": (tok, to_dev(ttnn, mesh_device, torch.zeros(3, dtype=torch.int32), i32),
                                              pt, sl),
        "positions must be int32": (tok, to_dev(ttnn, mesh_device, torch.zeros(2, dtype=torch.int32), ttnn.uint32),
                                    pt, sl),
        "page_table must be \\[B, max_pages\\]": (tok, pos, to_dev(ttnn, mesh_device,
                                                                  torch.zeros(3, 8, dtype=torch.int32), i32), sl),
        "slots must be \\[B\\]": (tok, pos, pt, to_dev(ttnn, mesh_device, torch.zeros(1, 2, dtype=torch.int32), i32)),
        "tokens must be a device ttnn.Tensor": (torch.zeros(1, 2), pos, pt, sl),
    }
    for match, args in bad.items():
        with pytest.raises(ValueError, match=match):
            model.decode(*args)
    big = to_dev(ttnn, mesh_device, torch.zeros(1, 33, dtype=torch.int32), ttnn.uint32)
    with pytest.raises(ValueError, match="batch B=33"):
        model.decode(big, pos, pt, sl)


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_reset_slot_and_sampling_reject_bad_arguments(ttnn, mesh_device, model):
    for slot in (4, -1, 1.0, None):
        with pytest.raises(ValueError, match="slot must be an int"):
            model.reset_slot(slot)
    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=2)
    inp.set([1, 2], [-1, -1], [-1, -1], [None, None])
    logits = model.decode(*inp.args())
    wrong = to_dev(ttnn, mesh_device, torch.zeros(1, 3, dtype=torch.int32), ttnn.uint32)
    with pytest.raises(ValueError, match=r"out_tokens must be \[1, 2\]"):
        model.sample_on_device(logits, wrong)


@pytest.mark.parametrize("mesh_device", [2], indirect=True)
def test_constructor_validates_config_against_tp_and_its_arguments(ttnn, mesh_device):
    w = weights_for(TINY)
    odd = dataclasses.replace(TINY, num_kv_heads=1, num_heads=3)
    with pytest.raises(ValueError, match="num_heads=3 is not divisible by the TP degree 2"):
        Qwen36Model(ttnn, mesh_device, odd, w, num_blocks=8)
    with pytest.raises(ValueError, match="num_blocks must be a positive int"):
        Qwen36Model(ttnn, mesh_device, TINY, w, num_blocks=0)
    with pytest.raises(ValueError, match="max_slots must be a positive int"):
        Qwen36Model(ttnn, mesh_device, TINY, w, max_slots=0, num_blocks=8)
    partial = {k: v for k, v in w.items() if not k.startswith("layers.3.")}
    with pytest.raises(ValueError, match="weights is missing"):
        Qwen36Model(ttnn, mesh_device, TINY, partial, num_blocks=8)


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_reset_slot_zeroes_only_that_slot(ttnn, mesh_device, model):
    model.prefill(prompt(50), slot=0, page_table_row=pages(TINY, 0))
    model.prefill(prompt(50, offset=3), slot=1, page_table_row=pages(TINY, 1))
    before = snapshot_state(ttnn, model)
    model.reset_slot(1)
    after = snapshot_state(ttnn, model)
    for k in before:
        if k.startswith("conv"):
            assert torch.equal(before[k][..., 0, :], after[k][..., 0, :])
            assert bool((after[k][..., 1, :] == 0).all()) and bool((before[k][..., 1, :] != 0).any())
        elif k.startswith("state"):
            assert torch.equal(before[k][0], after[k][0])
            assert bool((after[k][1] == 0).all()) and bool((before[k][1] != 0).any())
        else:
            assert torch.equal(before[k], after[k])  # K/V pages are the page table's business
