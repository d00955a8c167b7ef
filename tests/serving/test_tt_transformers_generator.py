"""The third generator (tests/generators/tt_transformers_style.py): tt-metal's shared
Generator shape, driving our models only through model.tt_model's adapter, under the suite.

It equals the oracle on the treatment arm; with its prefilled-slot forcing deleted, the pinned
slot-reuse seeds fail on the arm whose fix that forcing is; slot_remap moves device rows and
per-slot state together.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import ttsim
from harness import loader, scenario
from harness.base.spec import RunSpec, parse_generator, step_policy
from harness.system import System
from harness.workloads import FaultKnobs, stage3
from model.flags import ARMS
from model.markov import greedy_reference
from model.protocol import GREEDY, missing_methods, read_output
from model.tt_model import TtModelAdapter

ROOT = Path(__file__).resolve().parents[2]
STYLE = ROOT / "tests" / "generators" / "tt_transformers_style.py"
GOOD = f"{STYLE}:TtTransformersStyleGenerator"
REGRESSED = f"{STYLE}:RegressedTtTransformersStyleGenerator"
MODULE = "ttsim_user_generator_tt_transformers_style"


def _run(generator: str, seed: int, arm: str, policy: str) -> scenario.ScenarioResult:
    workload = stage3(seed)
    spec = RunSpec(seed=seed, step_policy=step_policy(policy), generator=parse_generator(generator))
    return scenario.run_scenario(workload, arm, spec, expected=scenario.serial_answers(workload, RunSpec(seed=seed)))


def _failed(result) -> dict[str, str]:
    return {v.request_id: v.defect for v in result.failed}


def test_it_loads_as_a_user_generator_and_speaks_the_protocol():
    spec = RunSpec(seed=0, generator=parse_generator(GOOD))
    user = loader.load(spec.generator, ttsim)
    assert missing_methods(user.factory) == []
    assert sys.modules[MODULE].ttnn is ttsim
    system = System(spec, FaultKnobs())
    try:
        gen = system.generator(flags=ARMS["all"])
        assert isinstance(gen.model[0], TtModelAdapter) and gen.model_args[0].max_batch_size == 8
    finally:
        system.close()


@pytest.mark.needs_fault_injection
@pytest.mark.parametrize("step_policy", ["mixed", "phased"])
def test_the_treatment_arm_equals_the_oracle(step_policy, monkeypatch):
    """Arm `all` on seeds including every pinned one: every request equals its serial answer,
    and the decode inputs went through the adapter (prepare_decode_inputs_host)."""
    calls = []
    real = TtModelAdapter.prepare_decode_inputs_host
    monkeypatch.setattr(TtModelAdapter, "prepare_decode_inputs_host",
                        lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    for seed in (0, 1, 2, 22, 29, 33, 36, 844):
        result = _run(GOOD, seed, "all", step_policy)
        assert result.failed == [], (f"seed {seed} ({step_policy}): {_failed(result)}; replay: bin/ttsim replay --arm "
                                     f"all --seed {seed} --step-policy {step_policy} --generator {GOOD}")
        assert result.guard_rejects > 0  # the generator's own merges were reported and counted
    assert calls


#: (seed, the request that reuses a slot) under the plugin's phased steps: the pinned slot-reuse
#: seeds of tests/serving/test_arms.py (the same requests as with ours)
SLOT_REUSE = [(27, "req-14"), (48, "req-11")]


@pytest.mark.needs_fault_injection
@pytest.mark.parametrize("seed, request_id", SLOT_REUSE, ids=[f"slot-reuse-seed{s}" for s, _ in SLOT_REUSE])
def test_deleting_the_prefilled_slot_forcing_fails_the_pinned_slot_reuse_seeds(seed, request_id):
    """Without the fix (arm control) the request reuses its slot's previous occupant's token; with
    it (arm slots) it passes; the regressed generator (forcing deleted) fails it again on arm slots."""
    control = _failed(_run(GOOD, seed, "control", "phased"))
    assert control.get(request_id) == "slot-reuse", f"seed {seed} control: {control}"
    fixed = _failed(_run(GOOD, seed, "slots", "phased"))
    assert request_id not in fixed, f"seed {seed} slots: {fixed}"
    regressed = _failed(_run(REGRESSED, seed, "slots", "phased"))
    assert regressed.get(request_id) == "slot-reuse", f"seed {seed} slots, forcing deleted: {regressed}"


@pytest.mark.needs_fault_injection
def test_clearing_the_prefilled_set_after_every_decode_loses_the_forcing_under_mixed_steps():
    """Upstream clears its prefilled-slot set after EVERY decode_forward. Under vLLM's stock mixed
    steps a request's final prefill chunk runs in a step whose decode does not include it yet, so
    that decode clears the record and the request's own first decode is not forced: seed 36 on
    arm slots fails req-15 with slot-reuse. The plugin's phased steps never do that (the decode
    after a prefill step includes every request): no slot reuse there (what remains on this seed
    is a stale position buffer, the guard's defect, which arm slots lacks)."""
    mixed = _failed(_run(GOOD, 36, "slots", "mixed"))
    assert mixed.get("req-15") == "slot-reuse", mixed
    phased = _failed(_run(GOOD, 36, "slots", "phased"))
    assert "slot-reuse" not in phased.values(), phased


# -- slot_remap: device rows gathered before the merge, state gathered once -------------------

def _decode(gen, system, toks, pos, table, **kw) -> list[int]:
    out = gen.decode_forward(torch.tensor(toks).reshape(-1, 1), torch.tensor(pos, dtype=torch.int32), table,
                             read_from_device=False, **kw, sampling_params=GREEDY)
    return read_output(gen, system.ttnn, out)


def _remap_run(model: str, spec: str, swap: bool, mesh_cols: int = 1) -> dict[str, list[int]]:
    """Two requests, A in slot 0 and B in slot 1, decoded 6 steps. With ``swap``, after 3 steps the
    rows are exchanged (B in row 0, A in row 1) with ``slot_remap`` [1, 0, 2, ...] and a host one
    step STALE (token and position of the step before, as vLLM's async host is at a reset): only
    the device's gathered rows hold the right token, and only the gathered state the right history."""
    system = System(RunSpec(seed=5, model=model, mesh_cols=mesh_cols, generator=parse_generator(spec)), FaultKnobs())
    try:
        gen = system.generator(flags=ARMS["all"])
        mp = system.max_pages
        prompts = {"A": list(range(40, 77)), "B": list(range(100, 150))}
        rows = {"A": torch.arange(1, mp + 1, dtype=torch.int32), "B": torch.arange(mp + 1, 2 * mp + 1,
                                                                                    dtype=torch.int32) % 48}
        seqs = {}
        for slot, name in enumerate("AB"):
            first = gen.prefill_forward(torch.tensor([prompts[name]]), rows[name].reshape(1, -1),
                                        empty_slots=[slot], sampling_params=GREEDY)
            seqs[name] = [int(first[0])]
        order = ["A", "B"]
        for step in range(6):
            kw = {"reset_batch": step == 0}
            stale = False
            if swap and step == 3:
                order = ["B", "A"]
                kw = {"reset_batch": True, "slot_remap": torch.tensor([1, 0, 2, 3, 4, 5, 6, 7])}
                stale = True
            toks = [seqs[n][-2] if stale else seqs[n][-1] for n in order]
            pos = [len(prompts[n]) + len(seqs[n]) - 1 - (1 if stale else 0) for n in order]
            table = torch.stack([rows[n] for n in order])
            got = _decode(gen, system, toks, pos, table, **kw)
            for r, n in enumerate(order):
                seqs[n].append(got[r])
        return seqs
    finally:
        system.close()


@pytest.mark.parametrize("model, mesh_cols", [("markov", 1), ("tiny", 1), ("tiny", 2)],
                         ids=["markov", "tiny-tp1", "tiny-tp2"])
def test_slot_remap_moves_the_device_rows_and_the_state_with_the_request(model, mesh_cols):
    plain = _remap_run(model, GOOD, swap=False, mesh_cols=mesh_cols)
    if model == "markov":
        assert plain == {n: greedy_reference(p, 7) for n, p in
                         (("A", list(range(40, 77))), ("B", list(range(100, 150))))}
    assert _remap_run(model, GOOD, swap=True, mesh_cols=mesh_cols) == plain


def test_untraced_serial_answers_through_it_equal_the_sweep_models_reference():
    """The oracle's own path (no merge, enable_trace=False: prepare_inputs_decode and an eager
    ttnn_decode_forward per step) through this generator gives the host reference."""
    workload = stage3(3, n_requests=6)
    on_device = scenario.serial_answers(workload, RunSpec(seed=3, generator=parse_generator(GOOD)), on_device=True)
    assert on_device == {r.request_id: greedy_reference(r.prompt, r.max_tokens) for r in workload.requests}


def test_a_bad_slot_remap_is_refused_by_the_models_gather():
    system = System(RunSpec(seed=0, generator=parse_generator(GOOD)), FaultKnobs())
    try:
        gen = system.generator(flags=ARMS["all"])
        table = torch.zeros(1, system.max_pages, dtype=torch.int32)
        gen.prefill_forward(torch.tensor([[5, 6, 7]]), table, empty_slots=[0], sampling_params=GREEDY)
        with pytest.raises(ValueError, match="gather_slots: remap is not a permutation of 0..7"):
            gen.decode_forward(torch.tensor([[1]]), torch.tensor([3]), table, reset_batch=True,
                               slot_remap=torch.tensor([1, 1, 2, 3, 4, 5, 6, 7]), sampling_params=GREEDY)
        with pytest.raises(ValueError, match="slot_remap must hold 8 entries, got 3"):
            gen.decode_forward(torch.tensor([[1]]), torch.tensor([3]), table, reset_batch=True, slot_remap=[0, 1, 2], sampling_params=GREEDY)
    finally:
        system.close()
