"""Decode: after prefill, per-slot GDN state, inactive rows, traces, on-device sampling."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.system import TRACED_DEVICE_PARAMS
from model.config import TINY
from model.pcc import comp_pcc
from model.reference import ReferenceSession
from model_helpers import DecodeInputs, build, chip0, logits_rows, pages, prompt, snapshot_state, weights_for


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_decode_after_prefill_equals_prefill_of_longer_prompt(ttnn, mesh_device):
    """Prefill P then decode 3 greedy tokens == prefill of P + those tokens (PCC >= 0.99, same
    argmax), and both track the float64 reference."""
    model = build(ttnn, mesh_device, TINY)
    toks = prompt(140)
    logits = model.prefill(toks, slot=0, page_table_row=pages(TINY, 0))
    ref = ReferenceSession(TINY, weights_for(TINY))
    ref.prefill(toks)
    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=1)
    seq = list(toks)
    for step in range(3):
        tok = int(logits.argmax())
        inp.set([tok], [len(seq)], [0], [pages(TINY, 0)])
        seq.append(tok)
        dec = logits_rows(ttnn, model.decode(*inp.args()))[0]
        longer = model.prefill(seq, slot=1, page_table_row=pages(TINY, 1))
        ok, pcc = comp_pcc(longer, dec, 0.99)
        assert ok, f"step {step}: decode vs longer prefill PCC {pcc}"
        assert int(dec.argmax()) == int(longer.argmax())
        want = ref.decode(tok)
        ok, pcc = comp_pcc(want, dec, 0.99)
        assert ok, f"step {step}: decode vs reference PCC {pcc}"
        logits = dec


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_gdn_state_is_per_slot_no_leakage(ttnn, mesh_device):
    """A and B interleaved (prefill A, decode A, prefill B, then decode both in one batch with an
    inactive row between them) == each alone in a batch of one."""
    a_toks, b_toks = prompt(70), prompt(100, offset=33)
    steps = 3

    def alone(toks, slot):
        m = build(ttnn, mesh_device, TINY)
        first = int(m.prefill(toks, slot=slot, page_table_row=pages(TINY, slot)).argmax())
        inp = DecodeInputs(ttnn, mesh_device, TINY, batch=1)
        out, tok, pos = [], first, len(toks)
        for _ in range(steps + 1):
            inp.set([tok], [pos], [slot], [pages(TINY, slot)])
            row = logits_rows(ttnn, m.decode(*inp.args()))[0]
            out.append(row)
            tok, pos = int(row.argmax()), pos + 1
        return first, out

    a_first, a_alone = alone(a_toks, 2)
    b_first, b_alone = alone(b_toks, 1)

    m = build(ttnn, mesh_device, TINY)
    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=3)
    assert int(m.prefill(a_toks, slot=2, page_table_row=pages(TINY, 2)).argmax()) == a_first
    inp.set([a_first, 0, 0], [len(a_toks), -1, -1], [2, -1, -1], [pages(TINY, 2), None, None])
    row = logits_rows(ttnn, m.decode(*inp.args()))[0]
    assert comp_pcc(a_alone[0], row, 0.9999)[0]
    assert int(m.prefill(b_toks, slot=1, page_table_row=pages(TINY, 1)).argmax()) == b_first
    a_tok, a_pos = int(row.argmax()), len(a_toks) + 1
    b_tok, b_pos = b_first, len(b_toks)
    for step in range(steps):
        inp.set([a_tok, 0, b_tok], [a_pos, -1, b_pos], [2, -1, 1], [pages(TINY, 2), None, pages(TINY, 1)])
        rows = logits_rows(ttnn, m.decode(*inp.args()))
        for name, got, want in (("A", rows[0], a_alone[step + 1]), ("B", rows[2], b_alone[step])):
            ok, pcc = comp_pcc(want, got, 0.9999)
            assert ok, f"step {step}: {name} in a batch vs alone PCC {pcc}"
            assert int(got.argmax()) == int(want.argmax())
        a_tok, b_tok = int(rows[0].argmax()), int(rows[2].argmax())
        a_pos, b_pos = a_pos + 1, b_pos + 1


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_inactive_rows_leave_caches_and_states_untouched(ttnn, mesh_device):
    model = build(ttnn, mesh_device, TINY)
    model.prefill(prompt(60), slot=0, page_table_row=pages(TINY, 0))
    model.prefill(prompt(45, offset=9), slot=1, page_table_row=pages(TINY, 1))
    before = snapshot_state(ttnn, model)
    # every row inactive (position -1, slot -1): nothing may change
    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=4)
    inp.set([5, 6, 7, 8], [-1] * 4, [-1] * 4, [pages(TINY, 0), pages(TINY, 1), None, None])
    model.decode(*inp.args())
    after = snapshot_state(ttnn, model)
    for k in before:
        assert torch.equal(before[k], after[k]), f"{k} changed by an all-inactive decode"
    # one active row (slot 0): slot 1's conv/recurrent state and slot 1's pages stay bit-identical
    inp.set([5, 6, 0, 0], [60, -1, -1, -1], [0, -1, -1, -1], [pages(TINY, 0), pages(TINY, 1), None, None])
    model.decode(*inp.args())
    after = snapshot_state(ttnn, model)
    nb, tp = TINY.max_pages, model.tp
    for k in before:
        if k.startswith("conv"):  # [1, 1, max_slots, tp * width]: row = slot
            assert torch.equal(before[k][..., 1, :], after[k][..., 1, :]), f"{k}: slot 1 changed"
            assert not torch.equal(before[k][..., 0, :], after[k][..., 0, :]), f"{k}: slot 0 not updated"
        elif k.startswith("state"):  # chips concatenated on dim 0: [tp * max_slots, Hv_c, Dk, Dv]
            per = before[k].shape[0] // tp
            for c in range(tp):
                assert torch.equal(before[k][c * per + 1], after[k][c * per + 1]), f"{k}: slot 1 changed"
                assert not torch.equal(before[k][c * per], after[k][c * per]), f"{k}: slot 0 not updated"
        else:  # K/V caches, chips on dim 0: slot 1 owns blocks [nb, 2 nb) on every chip
            per = before[k].shape[0] // tp
            for c in range(tp):
                lo = c * per + nb
                assert torch.equal(before[k][lo:lo + nb], after[k][lo:lo + nb]), f"{k}: slot 1's pages changed"
                lo = c * per
                assert not torch.equal(before[k][lo:lo + nb], after[k][lo:lo + nb]), f"{k}: slot 0 not written"


@pytest.mark.filterwarnings("ignore:Allocating device buffers is unsafe")  # the untraced twin allocates
@pytest.mark.parametrize("device_params", [TRACED_DEVICE_PARAMS], indirect=True, ids=["qwen36-trace-region"])
@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_traced_decode_equals_untraced(ttnn, mesh_device):
    """Capture decode + on-device sampling once; replay with new input contents written into the
    SAME buffers; logits and sampled tokens equal an untraced twin model step for step."""
    toks = prompt(64, offset=5)
    traced, plain = build(ttnn, mesh_device, TINY), build(ttnn, mesh_device, TINY)
    for m in (traced, plain):
        first = int(m.prefill(toks, slot=0, page_table_row=pages(TINY, 0)).argmax())
        b_first = int(m.prefill(prompt(40, offset=77), slot=3, page_table_row=pages(TINY, 3)).argmax())
    t_in = DecodeInputs(ttnn, mesh_device, TINY, batch=2)
    p_in = DecodeInputs(ttnn, mesh_device, TINY, batch=2)
    tid = ttnn.begin_trace_capture(mesh_device, cq_id=0)
    t_logits = traced.decode(*t_in.args())
    traced.sample_on_device(t_logits, t_in.tokens)
    ttnn.end_trace_capture(mesh_device, tid, cq_id=0)
    try:
        a_tok, b_tok = first, b_first
        for step in range(4):
            rows = [[a_tok, b_tok], [64 + step, 40 + step], [0, 3], [pages(TINY, 0), pages(TINY, 3)]]
            if step == 2:  # row 1 goes inactive mid-way
                rows = [[a_tok, 0], [64 + step, -1], [0, -1], [pages(TINY, 0), None]]
            t_in.set(*rows)
            p_in.set(*rows)
            ttnn.execute_trace(mesh_device, tid, cq_id=0, blocking=True)
            p_logits = plain.decode(*p_in.args())
            plain.sample_on_device(p_logits, p_in.tokens)
            want, got = logits_rows(ttnn, p_logits), logits_rows(ttnn, t_logits)
            active = [0] if step == 2 else [0, 1]
            assert torch.equal(got[active], want[active]), f"step {step}: traced logits differ"
            t_tok, p_tok = chip0(ttnn, t_in.tokens), chip0(ttnn, p_in.tokens)
            assert torch.equal(t_tok[0, active], p_tok[0, active])
            assert int(t_tok[0, 0]) == int(want[0].argmax())
            a_tok = int(t_tok[0, 0])
            b_tok = int(t_tok[0, 1]) if step != 2 else b_tok
    finally:
        ttnn.release_trace(mesh_device, tid)


@pytest.mark.parametrize("mesh_device", [2], indirect=True)
def test_sample_on_device_writes_argmax_into_existing_buffer(ttnn, mesh_device):
    model = build(ttnn, mesh_device, TINY)
    model.prefill(prompt(30), slot=0, page_table_row=pages(TINY, 0))
    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=2)
    inp.set([65, 66], [30, -1], [0, -1], [pages(TINY, 0), None])
    logits = model.decode(*inp.args())
    addr = inp.tokens.buffer_address()
    model.sample_on_device(logits, inp.tokens)
    assert inp.tokens.buffer_address() == addr
    host = logits_rows(ttnn, logits)
    shards = [ttnn.to_torch(t) for t in ttnn.get_device_tensors(inp.tokens)]
    assert torch.equal(shards[0], shards[1]), "sampled tokens differ between chips"
    assert int(shards[0][0, 0]) == int(host[0].argmax())
    lg_shards = [ttnn.to_torch(t) for t in ttnn.get_device_tensors(logits)]
    assert torch.equal(lg_shards[0], lg_shards[1]), "logits are not replicated"


@pytest.mark.needs_fault_injection
@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_inactive_rows_survive_nan_garbage_in_fresh_buffers(ttnn, mesh_device):
    """Freed memory full of NaN (as a card's DRAM may hold): the attention output rows of
    inactive rows (position -1: never written by the SDPA decode kernel) hold that garbage,
    and it must not reach the GDN pools through the one-hot conv-state scatter (8 layers: GDN
    layers 4-6 follow attention layer 3)."""
    cfg = dataclasses.replace(TINY, num_layers=8)
    model = build(ttnn, mesh_device, cfg)
    model.prefill(prompt(60), slot=0, page_table_row=pages(cfg, 0))
    model.prefill(prompt(45, offset=9), slot=1, page_table_row=pages(cfg, 1))
    inp = DecodeInputs(ttnn, mesh_device, cfg, batch=4)
    before = snapshot_state(ttnn, model)
    poison = ttnn.from_torch(torch.full((1, 1, 2048, 2048), float("nan")), dtype=ttnn.bfloat16,
                             layout=ttnn.TILE_LAYOUT, device=mesh_device,
                             mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device))
    ttnn.synchronize_device(mesh_device)
    ttnn.deallocate(poison)  # its NaN bytes stay behind as residue for the next allocations
    inp.set([65, 66, 67, 68], [60, -1, 45, -1], [0, -1, 1, -1], [pages(cfg, 0), None, pages(cfg, 1), None])
    rows = logits_rows(ttnn, model.decode(*inp.args()))
    assert torch.isfinite(rows[[0, 2]]).all()
    after = snapshot_state(ttnn, model)
    for k, v in after.items():
        assert torch.isfinite(v).all(), f"{k}: NaN garbage of an inactive row leaked into the pool"
        if k.startswith("conv"):
            assert torch.equal(before[k][..., 2:, :], v[..., 2:, :]), f"{k}: unused slots changed"
