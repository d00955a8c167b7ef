"""The runner makes the Tenstorrent plugin's calls, in its order, with its arguments
(model/protocol.py): the KV cache through the model class, the two-phase warm-up before any
request, ``kv_cache=`` on every call, host-sampled prefill and device-sampled decode padded to
capacity, and both of the plugin's sampling paths."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import ttsim
from harness import loader, scenario
from harness.base.spec import RunSpec, parse_generator
from harness.engine.sizes import MAX_SLOTS, NUM_BLOCKS
from harness.system import System
from harness.workloads import FaultKnobs, stage3
from model.flags import ARMS
from model.generator import Generator
from model.markov import MARKOV
from model.protocol import GeneratorProtocolError, tokens_of
from model.serving import KvCacheSpec, start_generator

ROOT = Path(__file__).resolve().parents[2]
RECORDING = ROOT / "tests" / "generators" / "recording.py"
STYLE = ROOT / "tests" / "generators" / "tt_transformers_style.py"


def _recorded_run(seed: int = 3):
    workload = stage3(seed, n_requests=6, concurrency=4)
    spec = RunSpec(seed=seed, generator=parse_generator(f"{RECORDING}:RecordingGenerator"))
    calls = sys.modules[loader.load(spec.generator, ttsim).factory.__module__].CALLS
    calls.clear()
    result = scenario.run_scenario(workload, "all", spec, expected=scenario.serial_answers(workload, RunSpec(seed=seed)))
    runs = [list(calls)]
    calls.clear()
    return result, runs[0]


def test_start_up_happens_before_any_request_in_the_plugins_order():
    result, calls = _recorded_run()
    assert not result.failed
    names = [c[0] for c in calls]
    first_forward = min(names.index("prefill_forward"), names.index("decode_forward"))
    # trace_mode "all", the plugin's default: compile both, then capture prefill first, then decode
    assert names[:first_forward] == ["allocate_kv_cache", "warmup_model_prefill", "warmup_model_decode",
                                     "warmup_model_prefill", "warmup_model_decode"]
    (_, shape, layers, kv), (_, p_trace, p_kv, p_dev), (_, d0, d0_kv, d0_dev, d0_b, d0_n) = calls[:3]
    (_, p1, *_r1), (_, d1, *_r2) = calls[3:5]
    blocks = FaultKnobs.swarm(3).kv_blocks
    assert shape == (blocks, 1, 32, 32) and layers == 1
    assert (p_trace, d0, p1, d1) == (False, False, True, True)
    assert p_kv == d0_kv == kv and (p_dev, d0_dev, d0_b) == (False, True, MAX_SLOTS)
    # the page-table width of every later call (the seed's KV budget is smaller: 19 of 32 blocks here)
    assert d0_n == MARKOV.max_context // 32 and blocks < d0_n
    decodes = [c for c in calls if c[0] == "decode_forward"]
    assert {c[6] for c in decodes} == {(MAX_SLOTS, d0_n)}
    assert "prefill_forward" not in names[first_forward + 1:] or names.count("allocate_kv_cache") == 1


def test_every_call_carries_the_models_kv_cache_and_the_plugins_sampling_arguments():
    _, calls = _recorded_run()
    kv = calls[0][3]
    prefills = [c for c in calls if c[0] == "prefill_forward"]
    decodes = [c for c in calls if c[0] == "decode_forward"]
    assert prefills and decodes
    assert all(c[1] == kv for c in prefills + decodes)
    # sample_on_device decode_only: prefill is sampled on the host (no sampling_params); trace_mode
    # all: the plugin asks for a traced prefill
    assert all(c[2:] == (False, True) for c in prefills)
    # decode: greedy sampling_params per row, reset_batch, padded to capacity, read later
    assert all(c[2:6] == (MAX_SLOTS, True, (MAX_SLOTS, 1), False) for c in decodes)


def test_host_sampling_runs_without_sampling_params_and_no_merge():
    """The plugin's other path: no on-device sampling, logits back, sampled by the runner."""
    workload = stage3(4, n_requests=6, concurrency=4)
    expected = scenario.serial_answers(workload, RunSpec(seed=4))
    spec = RunSpec(seed=4, sample_on_device=None, generator=parse_generator(f"{STYLE}:TtTransformersStyleGenerator"))
    result = scenario.run_scenario(workload, "control", spec, expected=expected, record_merges=True)
    assert not result.failed and result.merges == []


@pytest.mark.our_generator
def test_our_generator_refuses_host_sampled_decode_at_warm_up():
    """Ours samples decode on the device only (as production's): it says so before any request."""
    system = System(RunSpec(seed=0), FaultKnobs())
    try:
        gen = system.generator(flags=ARMS["all"])
        with pytest.raises(ValueError, match="samples decode on the device"):
            start_generator(gen, system.kv_cache_spec(NUM_BLOCKS), max_batch_size=MAX_SLOTS, max_pages=system.max_pages, sample_on_device=None)
    finally:
        system.close()


def test_a_hybrid_model_class_gets_per_layer_specs():
    class PerLayer(Generator):
        def allocate_kv_cache_per_layer(self, specs):
            self.specs = specs
            return ["per-layer"]

        def allocate_kv_cache(self, *a):
            raise AssertionError("the plugin prefers allocate_kv_cache_per_layer")

    system = System(RunSpec(seed=0), FaultKnobs())
    try:
        gen = system.generator(PerLayer, flags=ARMS["all"])
        spec = KvCacheSpec((48, 2, 32, 64), torch.float32, 2)
        assert start_generator(gen, spec, max_batch_size=8, max_pages=16, sample_on_device="decode_only") == ["per-layer"]
        assert gen.specs == [((48, 2, 32, 64), torch.float32, 0), ((48, 2, 32, 64), torch.float32, 1)]
    finally:
        system.close()


@pytest.mark.parametrize("out, rows, sampled, message", [
    ([1, 2], 2, True, "returned list; the plugin expects a torch tensor"),
    (torch.tensor([[1], [2]]), 3, True, "returned 2 tokens for 3 rows"),
    (torch.zeros(2), 2, False, r"returned a torch.float32 tensor of shape \(2,\); host sampling expects floating"),
    # a [3, 7] output holds 21 elements, enough for 8 rows by count: its shape is what the plugin unpacks
    (torch.zeros(3, 7, dtype=torch.int64), 8, True, r"shape \(3, 7\); sampled tokens are integer ids of shape"),
    (torch.zeros(8, 1), 8, True, r"returned a torch.float32 tensor of shape \(8, 1\); sampled tokens are integer"),
    (torch.zeros(8, 5, dtype=torch.int64), 8, False, "host sampling expects floating logits"),
    (torch.zeros(8, 2, 5), 8, False, r"shape \(8, 2, 5\); host sampling expects"),
])
def test_an_output_of_the_wrong_shape_is_named_in_one_line(out, rows, sampled, message):
    with pytest.raises(GeneratorProtocolError, match=message):
        tokens_of(out, rows, sampled=sampled, call="G.decode")


def test_outputs_the_plugin_accepts():
    logits = torch.zeros(2, 1, 5)
    logits[0, 0, 3] = logits[1, 0, 4] = 1.0
    assert tokens_of((logits, torch.zeros(2)), 2, sampled=False, call="c") == [3, 4]  # a (logits, rope_deltas) pair
    assert tokens_of(logits.reshape(2, 5), 2, sampled=False, call="c") == [3, 4]
    assert tokens_of((torch.tensor([[7], [9], [0]]), None), 2, sampled=True, call="c") == [7, 9]


def test_the_tt_transformers_shaped_generator_captures_every_width_in_the_plugins_warm_up():
    """Its decode warm-up's capture phase allocates every bucket's inputs and captures every
    trace, so nothing it runs later allocates during a capture."""
    from harness.system import build_runner

    system = System(RunSpec(seed=0, generator=parse_generator(f"{STYLE}:TtTransformersStyleGenerator")), FaultKnobs())
    try:
        gen, runner = build_runner(system, ARMS["all"], FaultKnobs())
        assert [c[0] for c in gen.lifecycle] == ["allocate_kv_cache", "warmup_model_prefill", "warmup_model_decode",
                                                 "warmup_model_prefill", "warmup_model_decode"]
        assert [c[1] for c in gen.lifecycle[1:]] == [False, False, True, True]
        assert sorted(gen._traces) == [1, 2, 4, 8] and all(t.trace_id is not None for t in gen._traces.values())
    finally:
        system.close()


@pytest.mark.parametrize("temperature, top_k, greedy", [
    ([0.0, 0.0], [5, 5], True),     # temperature 0 on every row
    ([0.7, 0.2], [1, 1], True),     # top-k 1 on every row
    ([0.0, 0.7], [5, 5], False),    # one sampled row
    (0.0, [5, 9], True),            # a scalar covers every row
    (torch.tensor([0.0, 0.3]), torch.tensor([1, 2]), False),
])
def test_only_greedy_sampling_params_are_taken_as_greedy(temperature, top_k, greedy):
    from types import SimpleNamespace

    from model.protocol import is_greedy

    assert is_greedy(SimpleNamespace(temperature=temperature, top_k=top_k)) is greedy


@pytest.mark.our_generator
def test_our_generator_refuses_sampling_it_cannot_do():
    from types import SimpleNamespace

    system = System(RunSpec(seed=0), FaultKnobs())
    try:
        gen = system.generator(flags=ARMS["all"])
        table = torch.zeros(1, system.max_pages, dtype=torch.int32)
        with pytest.raises(ValueError, match="samples greedily only"):
            gen.decode_forward(torch.tensor([[1]]), torch.tensor([3]), table, reset_batch=True,
                               sampling_params=SimpleNamespace(temperature=[0.7], top_k=[40]))
    finally:
        system.close()


@pytest.mark.parametrize("mode, captures", [
    ("all", [("warmup_model_prefill", True), ("warmup_model_decode", True)]),  # PR #126's order
    ("decode_only", [("warmup_model_decode", True)]),
    ("decode-first", [("warmup_model_decode", True), ("warmup_model_prefill", True)]),  # PR #122's
])
def test_the_capture_phase_follows_the_plugins_trace_mode_and_order(mode, captures):
    """vllm-tt-plugin model_runner.py @ e3fc8494 warmup_model: compile both, reset the prefill
    flag, then capture prefill (trace_mode "all" only) and decode; PR #122 put decode first."""
    from harness.base.spec import trace_mode

    calls = []

    class Plugged:
        already_warmed_up_prefill = True

        def allocate_kv_cache(self, shape, dtype, num_layers):
            return []

        def warmup_model_prefill(self, enable_trace, **kw):
            calls.append(("warmup_model_prefill", enable_trace, self.already_warmed_up_prefill))

        def warmup_model_decode(self, enable_trace, **kw):
            calls.append(("warmup_model_decode", enable_trace, None))

    m = trace_mode(mode)
    start_generator(Plugged(), KvCacheSpec((4, 1, 32, 32), torch.float32, 1), max_batch_size=8, max_pages=4,
                    sample_on_device="decode_only", trace_prefill=m.trace_prefill, decode_first=m.decode_first)
    assert [c[:2] for c in calls] == [("warmup_model_prefill", False), ("warmup_model_decode", False)] + captures
    assert all(c[2] is False for c in calls[2:] if c[0] == "warmup_model_prefill")  # reset between the phases
    spec = RunSpec(seed=5, trace_mode=m)
    assert spec.replay_command("all").endswith("" if mode == "all" else f" --trace-mode {mode}")
    assert m.what_if is (mode == "decode-first")
