"""Production's three incidents as directed scenarios any generator meets (DESIGN.md §1, §10).

A seed's sweep finds a defect where one generator's device commands happen to produce it;
another generator's commands differ, so a seed says nothing about it. An incident instead
puts the device in the state production saw, through the workload alone (prompt lengths,
admission steps, the step policy), with ttsim's own semantics doing the rest (trace replays
writing each sampled token and position into the trace's inputs, a width's store keeping its
last batch, another trace's replay clobbering an input it shares memory with). Nothing
reaches into the generator: the runner drives it through the plugin's calls, as always.
Engine steps depend only on the workload and the scheduler, never on the generator, so the
admission steps below hold for every generator.

- ``slot-reuse``: request B takes request A's freed slot and its prompt length equals A's
  final position, so at B's first decode the slot's device row holds A's next token at a
  position the keep rule accepts. Only the prefilled-slot fix forces the host there.
- ``stale-position-buffer``: under vLLM's stock (mixed) steps, eight requests fill slots 0-7,
  six finish, and slots 0 and 7 run on in the width-8 trace; slot 7 finishes, slot 0 runs
  alone at width 1; then seven new requests fill slots 1-7. The merge into width 8 reads that
  width's store, an older batch: ``dev_pos = [29, -1, -1, -1, -1, -1, -1, 28]`` against eight
  active host rows, production's read. The new request in slot 7 has prompt length 28, the
  decode in its own prefill step has cleared the prefilled-slot marks (upstream clears them
  after every decode), so only the batch guard keeps the older batch's token out.
- ``garbage-position``: the same schedule without the collision; after width 8 ran, the width-1 store's position
  row holds another trace's activations (two bf16 values seen as one int32, as production's
  1206993233) when the next merge into width 1 reads it. No position can match it, so every
  generator must answer right with the clamp or without it: in upstream's mechanics the clamp
  changes which rows the guard rejects, never an answer (DESIGN.md §10). This incident is a
  survival check, not a regression test of the clamp.

Each incident names the fix it tests, the arm without it and the arm with it (model.flags),
and the request that goes wrong without the fix.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.base.seeds import stream
from harness.base.spec import MIXED, PHASED, StepPolicy
from harness.workloads import FaultKnobs, Request, Workload, prompt_text

#: the seeds each incident runs on (the prompt texts; lengths and steps are the incident's)
SEEDS = (0, 1, 2)


@dataclass(frozen=True)
class Incident:
    name: str
    production: str  # what production saw (DESIGN.md §1)
    fix: str  # the model.flags.GeneratorFlags field the incident regression-tests ("" : none)
    fix_name: str  # how production names that fix
    without: str  # the arm without the fix
    with_fix: str  # the arm with it
    victim: str  # the request that goes wrong without the fix
    policy: StepPolicy

    def workload(self, seed: int) -> Workload:
        return _WORKLOADS[self.name](seed)


def _req(rng, name: str, length: int, max_tokens: int, arrival_step: int = 0) -> Request:
    return Request(name, prompt_text(rng, length), max_tokens, arrival_step)


def _slot_reuse(seed: int) -> Workload:
    """A alone, then B in A's freed slot with A's final position as its prompt length."""
    rng = stream("incident", "slot-reuse", seed=seed)
    a = _req(rng, "A", 16 + int(rng.integers(0, 24)), 4 + int(rng.integers(0, 5)))
    b = _req(rng, "B", a.final_position, 6)
    return Workload("incident-slot-reuse", (a, b), 1, FaultKnobs(readback_lag=0.0))


#: the engine step from which the second wave is admitted: by then slot 7's request has
#: finished and slot 0's has run alone at width 1 for several steps
SECOND_WAVE = 30


def _stale_batch(seed: int, z7_length: int = 28) -> Workload:
    """The schedule that leaves width 8's store with slots 0 and 7 at positions 29 and 28 while
    eight rows are active again (lengths fixed: the steps, not the texts, make the state); the
    new request in slot 7 has prompt length ``z7_length`` (28: the stale row's position)."""
    rng = stream("incident", "stale-position-buffer", seed=seed)
    first = ([_req(rng, "X", 19, 40)] + [_req(rng, f"S{i}", 16 + i, 2) for i in range(1, 7)]
             + [_req(rng, "Y", 19, 10)])  # Y's final position: 28
    # the second wave fits one prefill step (7 prompts + X's decode within 128 tokens)
    second = ([_req(rng, f"Z{i}", 16, 6, SECOND_WAVE) for i in range(1, 7)]
              + [_req(rng, "Z7", z7_length, 6, SECOND_WAVE)])
    return Workload("incident-stale-position-buffer", tuple(first + second), 8, FaultKnobs(readback_lag=0.0))


def _garbage(seed: int) -> Workload:
    """The stale schedule with no stale row to collide with (slot 7's new prompt is 24 long):
    what remains is the activations that width 8's replays leave in width 1's position row."""
    return _stale_batch(seed, z7_length=24)


_WORKLOADS = {"slot-reuse": _slot_reuse, "stale-position-buffer": _stale_batch, "garbage-position": _garbage}

INCIDENTS: dict[str, Incident] = {i.name: i for i in (
    Incident("slot-reuse", "a reused slot inherited the previous request's token: 1 of 32 concurrent requests "
             "returned a coherent wrong answer (expected one of ['391']; got: '33')",
             "prefilled_slots_fix", "the prefilled-slot fix (QWEN36_PREFILLED_SLOTS_FIX)",
             "control", "slots", "B", PHASED),
    Incident("stale-position-buffer", "a merge consumed a device position buffer of an older batch "
             "(dev_pos=[29,-1,-1,-1,-1,-1,-1,28] against an 8-slot active batch) and substituted a finished "
             "request's token", "merge_batch_guard", "the merge batch guard (QWEN36_MERGE_BATCH_GUARD)",
             "slots", "slots+guard", "Z7", MIXED),
    Incident("garbage-position", "uninitialized garbage sat in position buffers (1206993233, 1196966132: two bf16 "
             "activations seen as one int32)", "position_clamp", "the position clamp (QWEN36_POSITION_CLAMP)",
             "slots+guard", "all", "", MIXED),
)}
