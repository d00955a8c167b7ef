"""The Tenstorrent plugin's step policy (harness/engine/scheduler.py): with ``step_policy="phased"``
every engine step is all-prefill or all-decode, chunk continuations run in prefill steps only,
and a prefill step that cannot be scheduled under KV pressure falls back to a decode step.
vLLM's stock policy ("mixed"; "phased", what production runs, is the default) is the
negative control: it mixes them."""

from __future__ import annotations

import pytest

from harness import scenario
from harness.base.spec import PHASED, RunSpec, step_policy
from harness.workloads import stage3
from model.serving import TTRunner

pytestmark = pytest.mark.needs_fault_injection


def _steps(monkeypatch, seed: int, policy: str, arm: str = "all"):
    """Run one seed; return each step's kinds ({"prefill", "decode"}) and the result."""
    kinds: list[set[str]] = []
    execute = TTRunner.execute

    def spy(self, so):
        step = set()
        for rid in so.num_scheduled_tokens:
            st = self.reqs.get(rid)
            fresh = rid in {nr.req_id for nr in so.scheduled_new_reqs} or rid in so.scheduled_cached_reqs.resumed_req_ids
            step.add("prefill" if fresh or st is None or not st.prefilled else "decode")
        kinds.append(step)
        return execute(self, so)

    monkeypatch.setattr(TTRunner, "execute", spy)
    workload = stage3(seed)
    result = scenario.run_scenario(workload, arm, RunSpec(seed=seed, step_policy=step_policy(policy)), expected=scenario.serial_answers(workload, RunSpec(seed=seed)))
    return kinds, result


@pytest.mark.parametrize("seed", [0, 33])
def test_phased_steps_are_all_prefill_or_all_decode(monkeypatch, seed):
    kinds, result = _steps(monkeypatch, seed, "phased")
    assert not [k for k in kinds if k == {"prefill", "decode"}], "a phased step mixed prefill and decode"
    assert {"prefill"} in kinds and {"decode"} in kinds
    assert all(len(v.got) == len(v.expected) for v in result.verdicts), "a request did not run to its length"


def test_vllms_stock_steps_mix_them(monkeypatch):
    kinds, _ = _steps(monkeypatch, 0, "mixed")
    assert any(k == {"prefill", "decode"} for k in kinds)


def test_under_kv_pressure_a_phased_run_still_finishes_every_request(monkeypatch):
    """Seed 3 preempts (a tight KV budget), and with 16 requests for 8 slots most prefill passes
    find nothing to admit: they must fall back to decode steps (else the run stalls), and the
    finished requests such a discarded pass reported must reach the runner (else its slots
    never free)."""
    kinds, result = _steps(monkeypatch, 3, "phased", arm="all")
    assert result.preemptions > 0
    assert result.failed == [], f"replay: {RunSpec(seed=3).replay_command('all')}"


def test_an_unknown_step_policy_is_named():
    with pytest.raises(ValueError, match="unknown step policy 'tt'; choose from mixed, phased"):
        step_policy("tt")


def test_a_step_policy_is_a_type_not_a_string():
    with pytest.raises(TypeError, match="step_policy must be a StepPolicy"):
        RunSpec(step_policy="phased")
    assert step_policy("phased") is PHASED and PHASED.plugin_layout and not step_policy("mixed").plugin_layout


def _bare_scheduler():
    from harness.system import make_scheduler

    return make_scheduler(RunSpec(step_policy=PHASED))


class _Req:
    def __init__(self, partial: bool):
        self.is_prefill_chunk = partial


def test_a_partial_prefill_is_pending_prefill_work():
    s = _bare_scheduler()
    assert not s._pending_prefill()
    s.running = [_Req(partial=False)]
    assert not s._pending_prefill()  # a decode alone is not prefill work
    s.running = [_Req(partial=False), _Req(partial=True)]
    assert s._pending_prefill()  # its next chunk can only run in a prefill step


def test_a_discarded_empty_prefill_pass_hands_its_finished_and_preempted_ids_on(monkeypatch):
    """The base scheduler reports finished/preempted requests once, in the next output it
    builds; when the prefill pass is thrown away for a decode retry, the retry must carry them."""
    from types import SimpleNamespace

    from vllm.v1.core.sched.async_scheduler import AsyncScheduler

    s = _bare_scheduler()
    s.running = [_Req(partial=False)]
    outputs = iter([SimpleNamespace(total_num_scheduled_tokens=0, finished_req_ids={"gone"}, preempted_req_ids={"p"}),
                    SimpleNamespace(total_num_scheduled_tokens=1, finished_req_ids=set(), preempted_req_ids=None)])
    monkeypatch.setattr(AsyncScheduler, "schedule", lambda self, *a, **k: next(outputs))
    monkeypatch.setattr(type(s), "_pending_prefill", lambda self: True)
    out = s.schedule()
    assert out.total_num_scheduled_tokens == 1
    assert out.finished_req_ids == {"gone"} and out.preempted_req_ids == {"p"}


def _decodes(monkeypatch, seed: int, policy: str, **workload_kw):
    """Per decode_forward call: (rows handed over, reset_batch, did a prefill or a finish come
    since the previous decode, did the decoding set change)."""
    from model.generator import Generator

    calls, since = [], {"event": True, "last": None}
    execute, decode = TTRunner.execute, Generator.decode_forward

    def spy_execute(self, so):
        if so.finished_req_ids or so.scheduled_new_reqs or so.scheduled_cached_reqs.resumed_req_ids or any(
                not self.reqs[r].prefilled for r in so.num_scheduled_tokens if r in self.reqs):
            since["event"] = True
        return execute(self, so)

    def spy_decode(self, tokens, start_pos, *a, reset_batch=False, **k):
        batch = tuple(r for r, p in enumerate(start_pos.tolist()) if p >= 0)
        calls.append((tokens.shape[0], reset_batch, since["event"], batch != since["last"]))
        since["event"], since["last"] = False, batch
        return decode(self, tokens, start_pos, *a, reset_batch=reset_batch, **k)

    monkeypatch.setattr(TTRunner, "execute", spy_execute)
    monkeypatch.setattr(Generator, "decode_forward", spy_decode)
    workload = stage3(seed, **workload_kw)
    scenario.run_scenario(workload, "all", RunSpec(seed=seed, step_policy=step_policy(policy)), expected=scenario.serial_answers(workload, RunSpec(seed=seed)))
    return calls


def test_phased_decodes_are_padded_to_capacity_and_reset_after_every_layout_change(monkeypatch):
    """With prompts longer than a step's token budget (chunked prefill) and requests finishing,
    layout events come between decodes whose active rows look the same: the plugin resets
    after each of them. (Under phased steps a prefill step between two equal decode batches
    does not happen here: pending chunks keep every step a prefill step until the request
    decodes, which changes the batch; so the prefill-step half of the rule is not observable
    in these runs, only its finish/preempt half.)"""
    calls = _decodes(monkeypatch, 0, "phased", max_prompt=400)
    assert any(event and not changed for _, _, event, changed in calls), "no layout event between equal batches"
    assert {rows for rows, *_ in calls} == {8}
    assert all(reset for _, reset, event, changed in calls if event or changed)
    steady = [reset for _, reset, event, changed in calls if not event and not changed]
    assert steady and not any(steady), "a steady decode (nothing changed since the last) must not reset"


def test_mixed_decodes_keep_todays_rows_and_reset_rule(monkeypatch):
    calls = _decodes(monkeypatch, 0, "mixed")
    assert min(rows for rows, *_ in calls) < 8
    assert all(reset == changed for _, reset, _, changed in calls)


def test_phased_decodes_condense_rows_and_send_the_remap_the_generator_applies(monkeypatch):
    """The plugin's condensed rows: some phased decode moves a request to another row, sends
    ``slot_remap`` (a permutation, with reset_batch, as the layout changed), and the generator
    gathers the model's per-slot state by it; mixed decodes never send one."""
    from model.generator import Generator
    from model.markov import MarkovModel

    seen, gathered = {"phased": [], "mixed": []}, []
    decode, gather = Generator.decode_forward, MarkovModel.gather_slots
    policy = {"now": None}

    def spy_decode(self, *a, slot_remap=None, reset_batch=None, **kw):
        if slot_remap is not None:
            seen[policy["now"]].append((slot_remap.tolist(), reset_batch))
        return decode(self, *a, slot_remap=slot_remap, reset_batch=reset_batch, **kw)

    monkeypatch.setattr(Generator, "decode_forward", spy_decode)
    monkeypatch.setattr(MarkovModel, "gather_slots", lambda self, remap: (gathered.append(list(remap)),
                                                                          gather(self, remap)))
    for p in ("phased", "mixed"):
        policy["now"] = p
        workload = stage3(0)
        scenario.run_scenario(workload, "all", RunSpec(seed=0, step_policy=step_policy(p)), expected=scenario.serial_answers(workload, RunSpec(seed=0)))
    assert seen["phased"] and not seen["mixed"]
    assert all(sorted(r) == list(range(8)) and r != list(range(8)) and reset for r, reset in seen["phased"])
    assert gathered == [r for r, _ in seen["phased"]]


@pytest.mark.parametrize("policy", ["mixed", "phased"])
def test_the_host_is_fresh_at_every_merge(policy):
    """The runner resolves every outstanding output before a reload (a reset, or the first
    decode after a prefill), so at every merge the host's token and position are the request's
    current ones: in a run where no request fails, no merge keeps a device row the host
    disagrees with. (A one-step-stale host would show the device one ahead on every continuing
    row, kept by the rule and counted wrong here.)"""
    workload = stage3(0)
    result = scenario.run_scenario(workload, "all+last-run", RunSpec(seed=0, step_policy=step_policy(policy)), expected=scenario.serial_answers(workload, RunSpec(seed=0)), record_merges=True)
    assert result.failed == []
    assert result.merges, "the run must merge"
    wrong = [(e.step, r.slot) for e in result.merges for r in e.kept_wrong() if r.request_id is not None]
    assert wrong == [], f"{policy}: merges kept rows a fresh host disagrees with at (step, row) {wrong[:5]}"
