"""The hybrid's layout as upstream qwen36's, under the plugin's warm-up orders: where its
prefill-only state lands (behind which trace), what each trace's replays overwrite, the decode
inputs restaged every step, and the named scenario upstream-56474 that rests on all of it.

The model's own semantics (the traced chunk, the scratch) are pinned in tests/model; here the
generator and the plugin's start-up decide the allocation order, as on a card."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch

import ttsim
from harness import scenario, upstream_bugs
from harness.base.spec import RunSpec, trace_mode
from harness.defects import first_difference
from harness.engine.sizes import BLOCK_SIZE
from harness.system import System, build_runner
from harness.workloads import FaultKnobs, stage3
from model.flags import ARMS
from model.prefill_state import PrefillState
from model.protocol import GREEDY, read_output

pytestmark = pytest.mark.our_generator


def _system(mode: str) -> System:
    return System(RunSpec(seed=0, model="tiny", trace_mode=trace_mode(mode)), FaultKnobs(readback_lag=0.0))


def _row(system: System, first_block: int, n: int) -> torch.Tensor:
    row = torch.zeros(system.max_pages, dtype=torch.int32)
    row[:n] = torch.arange(first_block, first_block + n, dtype=torch.int32)
    return row


@pytest.fixture
def allocation_warnings(monkeypatch):
    """For each PrefillState built: whether its allocations warned that a trace is live (tt-metal's
    own signal that the buffers may be overwritten by that trace's replays)."""
    seen: list[bool] = []
    init = PrefillState.__init__

    def recording(self, model):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ttsim.TraceAllocationWarning)
            init(self, model)
        seen.append(any(issubclass(w.category, ttsim.TraceAllocationWarning) for w in caught))

    monkeypatch.setattr(PrefillState, "__init__", recording)
    return seen


def _serve(mode: str, prompts: list[list[int]]):
    """Start the plugin's way under ``mode``, then prefill each prompt in its own slot and decode
    each four steps alone (a replay of the width-1 trace per step). Returns the system (open)
    and the generator."""
    system = _system(mode)
    gen, _ = build_runner(system, ARMS["all"], FaultKnobs(readback_lag=0.0))
    for slot, toks in enumerate(prompts):
        n = len(toks)
        row = _row(system, 1 + slot * 4, 4)
        logits = gen.prefill_forward(tokens=torch.tensor([toks]), page_table=row.unsqueeze(0), prompt_lens=[n],
                                     start_pos=[0], empty_slots=[slot], enable_trace=system.spec.trace_mode.trace_prefill)
        tok = int(logits.reshape(-1).argmax())
        for step in range(4):
            out = gen.decode_forward(tokens=[[tok]], start_pos=[n + step], page_table=row.unsqueeze(0),
                                     sampling_params=GREEDY, reset_batch=step == 0, read_from_device=False)
            tok = read_output(gen, ttsim, out, 1)[0]
    return system, gen


def _zeros_hold(model) -> bool:
    state = model.prefill_state
    return all(not ttsim.to_torch(ttsim.get_device_tensors(t)[0]).any() for t in (state.zero_conv, state.zero_rec))


PROMPTS = [list(b"the weather in Paris is"), list(b"get_weather(city=")]


@pytest.mark.parametrize("mode, behind", [("all", False), ("decode-first", True), ("decode_only", True)])
def test_the_warm_up_order_decides_whether_the_prefill_state_lands_behind_the_decode_traces(
        mode, behind, allocation_warnings):
    """"all" (the plugin's default, PR #126's order): the chunk trace's warm-up binds the state
    before any decode capture. PR #122's decode-first order, and "decode_only" (the first request
    binds it), allocate it with the decode traces live; their replays then overwrite the zero
    buffers every new sequence resets from (tt-metal #56474)."""
    system, gen = _serve(mode, PROMPTS)
    try:
        assert allocation_warnings == [behind]
        assert _zeros_hold(gen.model) is not behind
    finally:
        system.close()


def test_the_hybrid_restages_every_decode_input_and_keeps_its_sample_apart():
    """qwen36's model declares ``_tt_vllm_always_refresh_decode_trace_inputs``: every step copies the
    host's token and position into the trace's inputs and the sample goes to a buffer of its own
    (F1: reload_inputs, no token feedback); such a model takes no async decode."""
    system = _system("all")
    try:
        gen, runner = build_runner(system, ARMS["all"], FaultKnobs(readback_lag=0.0))
        assert gen.refresh_inputs and gen.model_capabilities["supports_async_decode"] is False
        assert runner.host_fresh_every_step
        row = _row(system, 1, 4)
        toks = PROMPTS[0]
        gen.prefill_forward(tokens=torch.tensor([toks]), page_table=row.unsqueeze(0), prompt_lens=[len(toks)],
                            start_pos=[0], empty_slots=[0])
        for step, host_token in enumerate((7, 9, 11)):  # not what the device sampled: the host's say
            out = gen.decode_forward(tokens=[[host_token]], start_pos=[len(toks) + step], page_table=row.unsqueeze(0),
                                     sampling_params=GREEDY, reset_batch=step == 0, read_from_device=False)
            sampled = read_output(gen, ttsim, out, 1)[0]
            trace = out.trace
            assert ttsim.to_torch(trace.tokens).reshape(-1)[0] == host_token
            assert ttsim.to_torch(trace.positions).reshape(-1)[0] == len(toks) + step + 1  # plus_one ran
            assert ttsim.to_torch(trace.sampled).reshape(-1)[0] == sampled
    finally:
        system.close()


def test_a_prefill_replay_overwrites_the_decode_inputs_staged_behind_it_and_the_refresh_restages_them():
    """tt-metal #56215's mechanism reaching the device: under "all" the chunk trace is captured
    before the decode inputs are staged, so they sit in its freed scratch, and each full-chunk
    replay overwrites their token AND position rows (the reported token-only zeroing needs a free
    span ending between the two, which our layout never has). The hybrid restages them before each
    decode, so a request decoding across another's long prefill answers as it does alone."""
    system, gen = _serve("all", [PROMPTS[0]])
    try:
        before = {b: (ttsim.to_torch(t.tokens).reshape(-1).tolist(), ttsim.to_torch(t.positions).reshape(-1).tolist())
                  for b, t in gen._traces.items()}
        long = [(i * 7) % 200 + 32 for i in range(2 * 128 + 5)]
        gen.prefill_forward(tokens=torch.tensor([long]), page_table=_row(system, 20, 9).unsqueeze(0),
                            prompt_lens=[len(long)], start_pos=[0], empty_slots=[1], enable_trace=True)
        ttsim.synchronize_device(system.mesh)
        after = {b: (ttsim.to_torch(t.tokens).reshape(-1).tolist(), ttsim.to_torch(t.positions).reshape(-1).tolist())
                 for b, t in gen._traces.items()}
        moved = [b for b in before if before[b] != after[b]]
        assert moved, "no decode input lies in the chunk trace's replayed span"
        for b in moved:
            assert after[b][0] != before[b][0] and after[b][1] != before[b][1], (b, before[b], after[b])
    finally:
        system.close()


@pytest.fixture(scope="module")
def r56474():
    return upstream_bugs.check("upstream-56474")


def test_56474_decode_first_breaks_the_prefill_and_prefill_first_does_not(r56474):
    broken, fixed = r56474.broken, r56474.fixed
    assert r56474.ok and r56474.lines()[-1] == "  REPRODUCED"
    assert not fixed.failed
    first = {v.request_id: first_difference(v.expected, v.got) for v in broken.failed}
    assert any(v.defect == "prefill-state" and first[v.request_id] == 0 for v in broken.failed)
    # the route's other face: a first token right by chance, the GDN state it left wrong
    assert all((v.defect, first[v.request_id] == 0) in {("prefill-state", True), ("model-state", False)}
               for v in broken.failed), [(v.request_id, v.defect, first[v.request_id]) for v in broken.failed]
    strict = dataclasses.replace(r56474.bug, also=())
    judged = upstream_bugs.Reproduction(strict, r56474.seed, broken, fixed)
    assert not judged.ok and judged.why_not().startswith("failures not of the issue's kind")


def test_production_s_fixes_do_not_close_56474():
    """No merge runs for a model without async decode: the arms are alike, and each breaks."""
    bug = upstream_bugs.lookup("upstream-56474")
    workload = stage3(bug.seed, **bug.workload)
    spec = RunSpec(seed=bug.seed, model="tiny", trace_mode=trace_mode("decode-first"))
    results = scenario.run_arms(workload, ["control", "all"], spec)
    assert results["control"].failed and [v.got for v in results["control"].verdicts] == \
        [v.got for v in results["all"].verdicts]


def test_57364_the_write_lands_past_the_row_without_the_fix_and_in_it_with_it():
    r = upstream_bugs.check("upstream-57364")
    assert r.ok, "\n".join(r.lines())
    for call in r.broken.calls:  # accepted, as the card accepts it; nothing lands in the cache
        assert call.refusal is None and call.written == {}
        (line,) = call.diagnostics
        assert "write page 28 (page-table index 28)" in line and "owner no row of this call" in line
    (bounded,) = r.fixed.calls
    assert bounded.written == {(4, 900 % 256 % BLOCK_SIZE): 7.0} and bounded.diagnostics == []
