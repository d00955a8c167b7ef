"""model.tt_model: our models behind tt_transformers' model interface give what the models
themselves give (same logits, same tokens, same positions), and refuse what does not fit."""

from __future__ import annotations

from enum import Enum

import pytest
import torch

from model.config import TINY
from model.markov import MARKOV, MarkovModel, greedy_reference
from model.protocol import GREEDY
from model.tt_model import (PAGE_TABLE_INPUT_IDX, SLOTS_INPUT_IDX, Mode, TtModelAdapter, copy_host_to_device,
                            padded_prefill_lengths, pages_wide)
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
        tile = tt.ttnn_prefill_forward(x, user_id=slot, page_table=pt, chunk_start_idx=start)
        firsts.append(int(torch.argmax(tt.process_output_prefill(tile, len(p) - 1))))
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
    got = tt.process_output_prefill(tt.ttnn_prefill_forward(x, user_id=1, page_table=pt, chunk_start_idx=start),
                                    len(p) - 1)
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
    logits = tt.ttnn_decode_forward(*again[:4], on_device_logits=True, slots=again[SLOTS_INPUT_IDX])
    out, _ = tt.sampling.sample(logits, tt_out_tok=again[0], enable_trace=False)
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
    with pytest.raises(ValueError, match=r"page_table must be int \[2, pages\]"):
        tt.prepare_decode_inputs_host(torch.zeros(2, 1, dtype=torch.int64), torch.zeros(2, dtype=torch.int64),
                                      torch.zeros(3, 2, dtype=torch.int32))
    with pytest.raises(ValueError, match=r"page_table must be int \[2, pages\]"):
        tt.prepare_decode_inputs_host(torch.zeros(2, 1, dtype=torch.int64), torch.zeros(2, dtype=torch.int64),
                                      torch.zeros(2, 2))
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
    with pytest.raises(ValueError, match="not a tile start"):
        tt.ttnn_prefill_forward([1] * 40, page_table=pt[0], get_last_token=16)
    with pytest.raises(ValueError, match="not a tile start"):
        tt.ttnn_prefill_forward([1] * 40, page_table=pt[0], get_last_token=64)
    with pytest.raises(ValueError, match="one request per call"):
        tt.ttnn_prefill_forward([1] * 40, page_table=pt[0], batch_size=2)


# -- what tt-metal's shared Generator (models/tt_transformers/tt/generator.py @ 50868c00) needs --------


class _UpstreamMode(Enum):
    """tt_transformers' own ``common.Mode``: another Enum class with our values."""
    DECODE = "decode"
    PREFILL = "prefill"


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_switch_mode_takes_upstreams_own_mode_enum(ttnn, mesh_device):
    tt = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=2), ttnn, mesh_device)
    tt.switch_mode(_UpstreamMode.DECODE)
    assert tt.mode is Mode.DECODE
    tt.switch_mode(_UpstreamMode.PREFILL)
    assert tt.mode is Mode.PREFILL
    tt.switch_mode(Mode.DECODE)
    assert tt.mode is Mode.DECODE


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_switch_mode_refuses_other_values_and_non_enums(ttnn, mesh_device):
    tt = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=2), ttnn, mesh_device)
    other = Enum("Other", {"DECODE": "decoding", "TRAIN": "train"})
    for bad in (other.DECODE, other.TRAIN, "decode", None):
        with pytest.raises(ValueError, match="expected a Mode"):
            tt.switch_mode(bad)
    assert tt.mode is None


def test_padded_prefill_lengths_are_upstreams_up_to_the_cap():
    assert padded_prefill_lengths(127) == []
    assert padded_prefill_lengths(128) == [128]
    assert padded_prefill_lengths(1023) == [128]
    assert padded_prefill_lengths(1024) == [128, 1024]
    assert padded_prefill_lengths(4095) == [128, 1024, 2048]
    assert padded_prefill_lengths(4096) == [128, 1024, 2048, 4096]


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_model_args_answer_the_generators_warmup_and_resume_questions(ttnn, mesh_device):
    """Warm-up lengths up to the most one prefill call takes (max_context), no traced prefill
    length, one request per prefill call, and the chunk grid a resumed prefill starts on."""
    args = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=2), ttnn, mesh_device).model_args
    assert args.max_prefill_chunk_size == MARKOV.max_context == args.capped_warmup_seq_len
    assert args.get_warmup_prefill_supported_seq_lens() == [128, 1024]
    assert args.trace_prefill_supported_seq_lens == () and args.disable_batched_prefill
    assert args.get_attn_sdpa_program_config(_UpstreamMode.PREFILL, 1024, 0, None).q_chunk_size == MARKOV.prefill_chunk
    tiny = TtModelAdapter(build(ttnn, mesh_device, TINY, max_slots=2), ttnn, mesh_device).model_args
    assert tiny.get_attn_sdpa_program_config(_UpstreamMode.PREFILL, 128, 0).q_chunk_size == TINY.prefill_chunk
    assert tiny.get_warmup_prefill_supported_seq_lens() == padded_prefill_lengths(TINY.max_context)


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_untraced_decode_with_upstreams_four_inputs_reads_the_prepared_slots(ttnn, mesh_device):
    """tt-metal's untraced decode passes only (tokens, pos, rope, page_table): the slots come from
    the inputs prepare_inputs_decode made, and give the same logits as passing them."""
    tt = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=4), ttnn, mesh_device)
    pt = torch.zeros(3, tt.model_args.max_pages, dtype=torch.int32)
    inputs = tt.prepare_inputs_decode(torch.tensor([[5], [0], [9]]), torch.tensor([3, -1, 7]), pt)
    four = tt.process_output_decode(tt.ttnn_decode_forward(*inputs[:4]).cpu(), 3)
    five = tt.process_output_decode(tt.ttnn_decode_forward(*inputs[:4], slots=inputs[SLOTS_INPUT_IDX]).cpu(), 3)
    assert torch.equal(four, five)
    assert int(four[0, 0].argmax()) == greedy_reference([0, 0, 0, 5], 1)[0]


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_each_prepared_decode_rebinds_its_own_slots(ttnn, mesh_device):
    """A later prepare_inputs_decode (another width) replaces an earlier binding, trace inputs
    included: two identical hybrids (whose state is read by slot), one given its slots, one
    decoding with upstream's four inputs after an earlier 2-row binding, give the same logits."""
    given, bound = (TtModelAdapter(build(ttnn, mesh_device, TINY, max_slots=4), ttnn, mesh_device) for _ in "ab")
    for tt in (given, bound):
        p = prompt(20)
        tt.ttnn_prefill_forward(p, user_id=2, page_table=pages(TINY, 2), chunk_start_idx=0)
    table = torch.stack([pages(TINY, s) for s in range(4)])
    bound.bind_decode_trace_inputs(bound.prepare_inputs_decode(torch.tensor([[1], [2]]), torch.tensor([0, 1]),
                                                                table[:2]))
    args = (torch.tensor([[0], [0], [7], [0]]), torch.tensor([-1, -1, 20, -1]), table)
    want_inputs = given.prepare_inputs_decode(*args)
    want = given.process_output_decode(
        given.ttnn_decode_forward(*want_inputs[:4], slots=want_inputs[SLOTS_INPUT_IDX]).cpu(), 4)
    four = bound.prepare_inputs_decode(*args)
    got = bound.process_output_decode(bound.ttnn_decode_forward(*four[:4]).cpu(), 4)
    assert _read_ints(ttnn, four[SLOTS_INPUT_IDX]) == [-1, -1, 2, -1]
    assert torch.equal(got[2], want[2])


def test_pages_wide_slices_or_zero_pads_to_max_pages():
    """The plugin's block tables are min(max_pages, num_blocks) wide (upstream's decode warm-up uses
    that width too): the adapter's are always max_pages wide."""
    table = torch.arange(10, dtype=torch.int32).reshape(2, 5)
    assert pages_wide(table, 3).tolist() == [[0, 1, 2], [5, 6, 7]]
    assert pages_wide(table, 5).tolist() == table.tolist()
    assert pages_wide(table, 7).tolist() == [[0, 1, 2, 3, 4, 0, 0], [5, 6, 7, 8, 9, 0, 0]]
    assert pages_wide(table, 7).dtype == torch.int32


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_decode_inputs_take_page_tables_of_any_width(ttnn, mesh_device):
    tt = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=2), ttnn, mesh_device, max_pages=3)
    for width, want in ((5, [[0, 1, 2], [5, 6, 7]]), (2, [[0, 1, 0], [5, 6, 0]])):
        table = torch.arange(10, dtype=torch.int32).reshape(2, 5)[:, :width]
        host = tt.prepare_decode_inputs_host(torch.zeros(2, 1, dtype=torch.int64), torch.zeros(2, dtype=torch.int64),
                                             table)
        assert chip0(ttnn, host[PAGE_TABLE_INPUT_IDX]).tolist() == want


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_on_device_logits_keeps_logits_on_device_and_advances_positions(ttnn, mesh_device):
    """tt-metal's on_device_logits: the logits come back on the device (the sampling module samples),
    positions advance with -1 rows kept, and the token input is left alone."""
    tt = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=4), ttnn, mesh_device)
    pt = torch.zeros(3, tt.model_args.max_pages, dtype=torch.int32)
    plain = tt.prepare_inputs_decode(torch.tensor([[5], [0], [9]]), torch.tensor([3, -1, 7]), pt)
    want = tt.process_output_decode(tt.ttnn_decode_forward(*plain[:4]).cpu(), 3)
    inputs = tt.prepare_inputs_decode(torch.tensor([[5], [0], [9]]), torch.tensor([3, -1, 7]), pt)
    logits = tt.ttnn_decode_forward(*inputs[:4], on_device_logits=True)
    assert not isinstance(logits, tuple) and ttnn.is_tensor_storage_on_device(logits)
    assert torch.equal(tt.process_output_decode(logits.cpu(), 3), want)
    assert _read_ints(ttnn, inputs[1]) == [4, -1, 8]
    assert _read_ints(ttnn, inputs[0]) == [5, 0, 9]


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_greedy_sampling_traces_replay_the_models_answer(ttnn, mesh_device, monkeypatch):
    """Upstream's traced decode with on-device sampling: a decode trace (on_device_logits) and the
    sampling module's own trace writing the argmax into the decode's token input; replaying both
    steps the model on the device alone and gives its greedy answer."""
    tt = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=2), ttnn, mesh_device)
    p = [7, 8, 9]
    pt = torch.zeros(2, tt.model_args.max_pages, dtype=torch.int32)
    first = greedy_reference(p, 1)[0]
    inputs = tt.prepare_inputs_decode(torch.tensor([[first], [0]]), torch.tensor([len(p), -1]), pt)
    tt.sampling.precompile(tt.ttnn_decode_forward(*tt.prepare_inputs_decode(
        torch.tensor([[first], [0]]), torch.tensor([len(p), -1]), pt)[:4], on_device_logits=True),
        tt_out_tok=inputs[0])
    tt.bind_decode_trace_inputs(inputs)
    tid = ttnn.begin_trace_capture(mesh_device, cq_id=0)
    logits = tt.ttnn_decode_forward(*inputs[:4], on_device_logits=True)
    ttnn.end_trace_capture(mesh_device, tid, cq_id=0)
    tt.sampling.capture_trace(logits=logits, tt_out_tok=inputs[0], skip_precompile=True)
    # the precompile wrote a token into the input: restage the host's, as upstream's first decode reloads
    copy_host_to_device(tt.prepare_decode_inputs_host(torch.tensor([[first], [0]]), torch.tensor([len(p), -1]), pt),
                        device_tensors=inputs, ttnn=ttnn)
    replayed = []
    real_execute = ttnn.execute_trace
    monkeypatch.setattr(ttnn, "execute_trace", lambda dev, t, **kw: (replayed.append(t), real_execute(dev, t, **kw)))
    got = [first]
    for _ in range(6):
        ttnn.execute_trace(mesh_device, tid, cq_id=0, blocking=False)
        out, lp = tt.sampling.sample(logits=logits, tt_out_tok=inputs[0], enable_trace=True)
        assert out is inputs[0] and lp is None
        got.append(int(tt.process_output_decode(out.cpu(), 2, is_tokens=True)[0]))
    assert got == greedy_reference(p, 7)
    assert _read_ints(ttnn, inputs[1]) == [len(p) + 6, -1]
    assert len(replayed) == 12 and set(replayed[1::2]) == {tt.sampling._traces[id(logits)][0]} != {tid}
    with pytest.raises(ValueError, match="not the tensor the sampling trace was captured with"):
        tt.sampling.sample(logits=logits, tt_out_tok=inputs[1], enable_trace=True)
    tt.sampling.reset_trace()


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_greedy_sampling_without_a_trace_samples_eagerly(ttnn, mesh_device):
    """No trace for these logits (or enable_trace off): one eager argmax, into a fresh output
    when no tt_out_tok is given; the seed and state calls change nothing."""
    tt = TtModelAdapter(MarkovModel(ttnn, mesh_device, max_slots=2), ttnn, mesh_device)
    pt = torch.zeros(2, tt.model_args.max_pages, dtype=torch.int32)
    inputs = tt.prepare_inputs_decode(torch.tensor([[3], [4]]), torch.tensor([1, 2]), pt)
    logits = tt.ttnn_decode_forward(*inputs[:4], on_device_logits=True)
    s = tt.sampling
    s.apply_decode_state([GREEDY], reset_batch=True)
    s.seed_manager.apply_slot_remap(torch.tensor([1, 0]))
    assert s.seed_manager.reset_seed_from_slots_if_needed([None, None], [0, 1]) == []
    out, _ = s.sample(logits=logits, enable_trace=True)
    assert out is not inputs[0] and s.tt_sampling.max_batch_size == 2
    assert tt.process_output_decode(out.cpu(), 2, is_tokens=True).tolist() == [
        greedy_reference([0, 3], 1)[0], greedy_reference([0, 0, 4], 1)[0]]


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_prefill_tile_of_a_padded_prompt_holds_the_last_real_tokens_logits(ttnn, mesh_device):
    """Upstream pads a prompt with zeros to its prefill length and reads row (last % 32) of the tile
    at get_last_token, after untilize and a read: that row is the real last token's logits."""
    model = MarkovModel(ttnn, mesh_device, max_slots=2)
    tt = TtModelAdapter(model, ttnn, mesh_device)
    row = torch.zeros(1, tt.model_args.max_pages, dtype=torch.int32)
    for n in (5, 32, 33, 70):
        p = prompt(n)
        want = model.prefill(p, slot=0, page_table_row=row[0])
        x, _, _, pt, _, start = tt.prepare_inputs_prefill(torch.tensor([p + [0] * (128 - n)]), 0, row)
        last = n - 1
        tile = tt.ttnn_prefill_forward(x, user_id=0, page_table=pt, chunk_start_idx=start,
                                       get_last_token=(last // 32) * 32)
        assert list(tile.shape) == [1, 1, 32, MARKOV.vocab_size]
        host = ttnn.untilize(tile, use_multicore=True).cpu(blocking=False)
        ttnn.synchronize_device(mesh_device)  # as upstream before it reads a non-blocking copy
        assert torch.equal(tt.process_output_prefill(host, last_token_idx=last % 32), want)


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_prefill_tile_of_a_resumed_chunk_and_the_default_tile(ttnn, mesh_device):
    """A chunk continuing at 128 (positions 128..): the tile's rows are those tokens' own logits;
    get_last_token=-1 is the tile holding the chunk's last row."""
    model = MarkovModel(ttnn, mesh_device, max_slots=2)
    tt = TtModelAdapter(model, ttnn, mesh_device)
    row = torch.zeros(tt.model_args.max_pages, dtype=torch.int32)
    chunk = prompt(40, offset=3)
    rows = model.prefill(chunk, slot=1, page_table_row=row, start_pos=128, rows=8)
    assert torch.equal(rows[-1], model.prefill(chunk, slot=1, page_table_row=row, start_pos=128))
    tile = tt.ttnn_prefill_forward(chunk, user_id=1, page_table=row, chunk_start_idx=128)
    for i in range(8):
        assert torch.equal(tt.process_output_prefill(tile, last_token_idx=32 + i), rows[i])
    with pytest.raises(ValueError, match="rows=41 must be in 1..40"):
        model.prefill(chunk, slot=1, page_table_row=row, start_pos=128, rows=41)
