"""model.tt_model: our models behind tt_transformers' model interface give what the models
themselves give (same logits, same tokens, same positions), and refuse what does not fit."""

from __future__ import annotations

import pytest
import torch

from model.config import TINY
from model.markov import MARKOV, MarkovModel, greedy_reference
from model.tt_model import PAGE_TABLE_INPUT_IDX, SLOTS_INPUT_IDX, Mode, TtModelAdapter, copy_host_to_device
from model_helpers import DecodeInputs, build, chip0, logits_rows, pages, prompt


def _read_ints(ttnn, t) -> list[int]:
    return [int(v) for v in chip0(ttnn, t).reshape(-1).tolist()]


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_adapter_decode_samples_the_models_tokens_and_advances_positions(ttnn, mesh_device):
    """The sweep model through the adapter: prefill, then decode steps fed back on the device only
    (argmax into the token input, plus_one on positions) give the model's greedy answer; a row at
    -1 stays -1. The direct model calls on the same inputs give the same tokens."""
    model = MarkovModel(ttnn, mesh_device, max_slots=4)
    tt = TtModelAdapter(model, ttnn, mesh_device)
    assert tt.model_args.max_batch_size == 4 and tt.model_args.max_pages == MARKOV.max_context // MARKOV.block_size
    prompts = [[5, 6, 7], [200, 1, 2, 3, 4]]
    row = torch.zeros(1, tt.model_args.max_pages, dtype=torch.int32)
    firsts = []
    for slot, p in enumerate(prompts):
        x, _, _, pt, _, start = tt.prepare_inputs_prefill(torch.tensor([p]), 0, row)
        firsts.append(int(torch.argmax(tt.process_output_prefill(tt.ttnn_prefill_forward(x, user_id=slot,
                                                                                         page_table=pt,
                                                                                         chunk_start_idx=start)))))
    toks = torch.tensor([[firsts[0]], [0], [firsts[1]]])
    pos = torch.tensor([len(prompts[0]), -1, len(prompts[1])])
    pt = torch.zeros(3, tt.model_args.max_pages, dtype=torch.int32)
    inputs = tt.prepare_inputs_decode(toks, pos, pt)
    assert _read_ints(ttnn, inputs[SLOTS_INPUT_IDX]) == [0, -1, 2] and inputs[2] is None
    got = [[firsts[0]], [firsts[1]]]
    for _ in range(5):
        # the same values on buffers of their own, run through the model directly
        direct_tokens = ttnn.from_torch(chip0(ttnn, inputs[0]), dtype=ttnn.uint32, layout=ttnn.ROW_MAJOR_LAYOUT,
                                        device=mesh_device)
        direct_pos = ttnn.from_torch(chip0(ttnn, inputs[1]), dtype=ttnn.int32, layout=ttnn.ROW_MAJOR_LAYOUT,
                                     device=mesh_device)
        model.sample_on_device(model.decode(direct_tokens, direct_pos, inputs[PAGE_TABLE_INPUT_IDX],
                                            inputs[SLOTS_INPUT_IDX]), direct_tokens)
        out, log_probs = tt.ttnn_decode_forward(*inputs[:4], sampling_on_device=True, slots=inputs[SLOTS_INPUT_IDX])
        assert out is inputs[0] and log_probs is None
        host = tt.process_output_decode(out.cpu(), 3, is_tokens=True)
        assert host.tolist() == _read_ints(ttnn, direct_tokens)
        got[0].append(int(host[0]))
        got[1].append(int(host[2]))
    assert got[0] == greedy_reference(prompts[0], 6)
    assert got[1] == greedy_reference(prompts[1], 6)
    assert _read_ints(ttnn, inputs[1]) == [len(prompts[0]) + 5, -1, len(prompts[1]) + 5]


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_adapter_prefill_and_decode_equal_the_hybrids_own(ttnn, mesh_device):
    """Two identical hybrids: one driven directly, one through the adapter. Prefill logits, decode
    logits (no sampling), and the sampled token with its advanced position are the same bytes."""
    direct, adapted = build(ttnn, mesh_device, TINY, max_slots=2), build(ttnn, mesh_device, TINY, max_slots=2)
    tt = TtModelAdapter(adapted, ttnn, mesh_device)
    p = prompt(45)
    want = direct.prefill(p, slot=1, page_table_row=pages(TINY, 1))
    x, _, _, pt, _, start = tt.prepare_inputs_prefill(torch.tensor([p]), 0, pages(TINY, 1).reshape(1, -1))
    got = tt.process_output_prefill(tt.ttnn_prefill_forward(x, user_id=1, page_table=pt, chunk_start_idx=start))
    assert torch.equal(got, want)
    first = int(want.argmax())

    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=2)
    inp.set([0, first], [-1, len(p)], [-1, 1], [None, pages(TINY, 1)])
    want_logits = logits_rows(ttnn, direct.decode(*inp.args()))
    table = torch.stack([torch.zeros(TINY.max_pages, dtype=torch.int32), pages(TINY, 1)])
    inputs = tt.prepare_inputs_decode(torch.tensor([[0], [first]]), torch.tensor([-1, len(p)]), table)
    tt.bind_decode_trace_inputs(inputs)  # the slots come from the bound inputs
    got_logits = tt.process_output_decode(tt.ttnn_decode_forward(*inputs[:4]).cpu(), 2)
    assert got_logits.shape == (2, 1, TINY.vocab_size)
    assert torch.equal(got_logits[1, 0], want_logits[1].to(got_logits.dtype))

    # one more step each, sampling on device: same token, position advanced, inactive row kept
    inp.set([0, int(want_logits[1].argmax())], [-1, len(p) + 1], [-1, 1], [None, pages(TINY, 1)])
    direct.sample_on_device(direct.decode(*inp.args()), inp.tokens)
    again = tt.prepare_inputs_decode(torch.tensor([[0], [int(got_logits[1, 0].argmax())]]),
                                     torch.tensor([-1, len(p) + 1]), table)
    out, _ = tt.ttnn_decode_forward(*again[:4], on_device_logits=True, slots=again[SLOTS_INPUT_IDX])
    assert tt.process_output_decode(out.cpu(), 2, is_tokens=True)[1] == _read_ints(ttnn, inp.tokens)[1]
    assert _read_ints(ttnn, again[1]) == [-1, len(p) + 2]
    tt.switch_mode(Mode.DECODE)
    assert tt.mode is Mode.DECODE


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_adapter_refuses_what_does_not_fit(ttnn, mesh_device):
    model = MarkovModel(ttnn, mesh_device, max_slots=4)
    tt = TtModelAdapter(model, ttnn, mesh_device, max_pages=2)
    pt = torch.zeros(2, 2, dtype=torch.int32)
    with pytest.raises(TypeError, match="has no 'prefill'"):
        TtModelAdapter(object(), ttnn, mesh_device)
    with pytest.raises(ValueError, match="max_batch_size=5 must be in 1..4"):
        TtModelAdapter(model, ttnn, mesh_device, max_batch_size=5)
    with pytest.raises(ValueError, match="batch 5 must be in 1..4"):
        tt.prepare_decode_inputs_host(torch.zeros(5, 1, dtype=torch.int64), torch.zeros(5, dtype=torch.int64))
    with pytest.raises(ValueError, match="2 tokens for 3 positions"):
        tt.prepare_decode_inputs_host(torch.zeros(2, 1, dtype=torch.int64), torch.zeros(3, dtype=torch.int64))
    with pytest.raises(ValueError, match=r"page_table must be int \[2, 2\]"):
        tt.prepare_decode_inputs_host(torch.zeros(2, 1, dtype=torch.int64), torch.zeros(2, dtype=torch.int64),
                                      torch.zeros(2, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"slots must hold 2 ids in -1..3"):
        tt.prepare_decode_inputs_host(torch.zeros(2, 1, dtype=torch.int64), torch.zeros(2, dtype=torch.int64), pt,
                                      slots=[0, 4])
    host = tt.prepare_decode_inputs_host(torch.zeros(2, 1, dtype=torch.int64), torch.zeros(2, dtype=torch.int64), pt)
    dev = copy_host_to_device(host, mesh_device=mesh_device, ttnn=ttnn)
    with pytest.raises(ValueError, match="no slots tensor"):
        tt.ttnn_decode_forward(*dev[:4])
    with pytest.raises(TypeError, match="unexpected keyword"):
        tt.ttnn_decode_forward(*dev[:4], slots=dev[SLOTS_INPUT_IDX], temperature=0.5)
    with pytest.raises(ValueError, match="hold no slots tensor"):
        tt.bind_decode_trace_inputs(dev[:4])
    with pytest.raises(ValueError, match="pass ttnn="):
        copy_host_to_device(host, mesh_device=mesh_device)
    with pytest.raises(ValueError, match="5 host tensors for 4 device tensors"):
        copy_host_to_device(host, device_tensors=dev[:4], ttnn=ttnn)
    with pytest.raises(ValueError, match="prefill is not traced"):
        tt.prepare_inputs_prefill(torch.tensor([[1, 2]]), 0, pt[:1], trace_enabled=True)
    with pytest.raises(ValueError, match=r"tokens must be \[1, S\]"):
        tt.prepare_inputs_prefill(torch.tensor([1, 2]), 0, pt[:1])
    assert not tt.model_args.can_enable_trace(128, 0)
    with pytest.raises(ValueError, match="expected a Mode"):
        tt.switch_mode("decode")
