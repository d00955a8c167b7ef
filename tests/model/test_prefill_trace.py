"""The hybrid's prefill-only state and its traced chunk (model/prefill_state.py): a prefill
replaying the captured chunk answers as the eager prefill does, on the persistent batch-1
scratch, and publishes the scratch into its slot without touching the others."""

from __future__ import annotations

import pytest
import torch

from model.config import TINY
from model_helpers import build, pages, prompt


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_a_traced_prefill_equals_the_eager_one(ttnn, mesh_device):
    """A 300-token prompt: two full chunks replay the trace, the tail runs eagerly; the logits are
    the eager prefill's bit for bit (same ops, same bytes; the trace reads its chunk's start from a
    device tensor), on the paged chunked branch."""
    toks = prompt(300)
    eager = build(ttnn, mesh_device, TINY, sdpa_streaming=True)
    want = eager.prefill(toks, slot=0, page_table_row=pages(TINY, 0))
    traced = build(ttnn, mesh_device, TINY, sdpa_streaming=True)
    traced.capture_prefill_trace()
    got = traced.prefill(toks, slot=0, page_table_row=pages(TINY, 0), traced=True)
    assert torch.equal(got, want), f"traced vs eager differ by {(got - want).abs().max().item()}"


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_the_prefill_state_is_allocated_on_first_use_and_kept(ttnn, mesh_device):
    """Nothing at construction; the first prefill (or the trace's capture) binds it, and every
    later prefill runs on the same buffers (a captured trace's addresses stay valid)."""
    model = build(ttnn, mesh_device, TINY)
    assert model.prefill_state is None
    model.prefill(prompt(40), slot=2, page_table_row=pages(TINY, 2))
    state = model.prefill_state
    addresses = [t.buffer_address() for t in (*state.conv.values(), *state.rec.values(), state.zero_conv,
                                              state.zero_rec)]
    model.prefill(prompt(50, offset=3), slot=3, page_table_row=pages(TINY, 3))
    assert model.prefill_state is state
    assert addresses == [t.buffer_address() for t in (*state.conv.values(), *state.rec.values(), state.zero_conv,
                                                      state.zero_rec)]


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_a_new_sequence_starts_from_the_zero_buffers_and_publishes_only_its_slot(ttnn, mesh_device):
    """The scratch is reset by copying the zero buffers in (upstream's in-place reset): a prompt
    prefilled after another one answers as it does on a fresh model, and the other slot's state
    is untouched by the publish."""
    fresh = build(ttnn, mesh_device, TINY)
    want = fresh.prefill(prompt(60, offset=11), slot=1, page_table_row=pages(TINY, 1))
    model = build(ttnn, mesh_device, TINY)
    model.prefill(prompt(45), slot=0, page_table_row=pages(TINY, 0))
    i = next(iter(model.state_pool))
    slot0 = ttnn.to_torch(ttnn.get_device_tensors(model.state_pool[i])[0])[0].clone()
    got = model.prefill(prompt(60, offset=11), slot=1, page_table_row=pages(TINY, 1))
    assert torch.equal(got, want)
    assert torch.equal(ttnn.to_torch(ttnn.get_device_tensors(model.state_pool[i])[0])[0], slot0)
