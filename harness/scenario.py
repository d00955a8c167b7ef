"""One serving scenario: a workload, an arm, a seed -> per-request verdicts.

The system is assembled by harness.system (mesh, model, generator, runner) and driven by
vLLM's real AsyncScheduler (harness.engine.config). This module holds the oracle (serial
answers: each request alone, concurrency 1, same system), the run loop and the verdicts.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field

import torch

from model.flags import ARMS, AS_IS, GeneratorFlags, arm_flags
from model.merge_events import MergeEvent
from model.merge_trace import MergeTraceWriter
from model.protocol import SamplingParams, read_output, tokens_of
from model.serving import start_generator, unguarded

from harness import deadline as deadlines
from harness.base.spec import RunSpec
from harness.defects import classify, verdict_class
from harness.engine.sizes import BLOCK_SIZE, MAX_SLOTS, NUM_BLOCKS
from harness.system import GeneratorFailed, System, build_runner, make_scheduler, on_cards
from harness.workloads import FaultKnobs, Request, Workload


@dataclass
class RequestVerdict:
    request_id: str
    expected: list[int]
    got: list[int]
    defect: str | None = None

    @property
    def ok(self) -> bool:
        return self.got == self.expected


@dataclass
class ScenarioResult:
    arm: str
    seed: int
    knobs: FaultKnobs
    verdicts: list[RequestVerdict]
    merges: list[MergeEvent] = field(default_factory=list)
    guard_rejects: int = 0
    steps: int = 0
    device_stats: dict = field(default_factory=dict)
    preemptions: int = 0
    # the device hung (ttsim.stray.DeviceTimeout) and the run ended there: one line, with the replay
    fatal: str | None = None
    # ttsim.diagnostics lines (Entry.line()): stray accesses the device's kernels made in this run
    diagnostics: list[str] = field(default_factory=list)

    @property
    def failed(self) -> list[RequestVerdict]:
        return [v for v in self.verdicts if not v.ok]


def serial_answer(system: System, request: Request, guard=unguarded) -> list[int]:
    """The request alone, through the plugin's calls (model/protocol.py): start-up, one prefill
    (host-sampled), then one decode per step padded to capacity with the host always fresh
    (``reset_batch`` every step). ``guard``: the deadline on each call (harness.deadline)."""
    gen = system.generator(flags=ARMS["no-merge"], enable_trace=False)
    kv_cache = start_generator(gen, system.kv_cache_spec(NUM_BLOCKS), max_batch_size=MAX_SLOTS, max_pages=system.max_pages,
                               sample_on_device="decode_only", guard=guard)
    n_pages = -(-(len(request.prompt) + request.max_tokens) // BLOCK_SIZE)
    row = torch.zeros(system.max_pages, dtype=torch.int32)
    row[:n_pages] = torch.arange(1, n_pages + 1, dtype=torch.int32)
    n = len(request.prompt)
    with guard("prefill_forward", 0):
        first = gen.prefill_forward(tokens=torch.tensor([list(request.prompt)]), page_table=row.unsqueeze(0),
                                    kv_cache=kv_cache, enable_trace=False, prompt_lens=torch.tensor([n]),
                                    start_pos=torch.tensor([0]), empty_slots=[0])
    out = tokens_of(first, 1, sampled=False, call="prefill_forward")
    tokens, positions = torch.zeros(MAX_SLOTS, 1, dtype=torch.int64), torch.full((MAX_SLOTS,), -1, dtype=torch.int32)
    table = torch.zeros(MAX_SLOTS, system.max_pages, dtype=torch.int32)
    table[0] = row
    while len(out) < request.max_tokens:
        tokens[0, 0], positions[0] = out[-1], n + len(out) - 1
        with guard("decode_forward", len(out)):
            step = gen.decode_forward(tokens=tokens.clone(), page_table=table, kv_cache=kv_cache,
                                      start_pos=positions.clone(), sampling_params=SamplingParams.greedy(MAX_SLOTS),
                                      reset_batch=True, enable_trace=False, read_from_device=False)
        with guard("read_decode_output, event_synchronize and process_decode_output_host", len(out)):
            out.append(read_output(gen, system.ttnn, step, 1, sampled=True)[0])  # the active row, as the plugin reads
    return out


def probe(spec: RunSpec) -> None:
    """The generator ``spec`` names, through one short request alone on a fresh system of its
    model (the plugin's calls; every output's shape checked): what a served worker asks of a
    user's generator before it serves anything. A generator that does not speak the contract
    raises GeneratorProtocolError (or GeneratorFailed) here, naming the call."""
    system = System(spec, FaultKnobs())
    try:
        with _deadline(system, "the probe before serving", "no-merge") as guard:
            serial_answer(system, Request("probe", tuple(range(65, 81)), 3), guard)
    finally:
        system.close()


def serial_answers(workload: Workload, spec: RunSpec, *, on_device: bool = False) -> dict[str, list[int]]:
    """Each request's answer alone. The sweep model's answer is exact on the host (see
    model.markov.greedy_reference); ``on_device=True`` runs every request alone on a fresh
    device of ``spec`` instead, which is what the Qwen models always do."""
    if spec.model == "markov" and not on_device:
        from model.markov import greedy_reference

        return {r.request_id: greedy_reference(r.prompt, r.max_tokens) for r in workload.requests}
    system = System(spec, FaultKnobs())
    try:
        with _deadline(system, f"seed {spec.seed}, the serial answers", "no-merge") as guard:
            return {r.request_id: serial_answer(system, r, guard) for r in workload.requests}
    finally:
        system.close()


@contextlib.contextmanager
def _deadline(system: System, what: str, arm: str):
    """The deadline on every call of one run on ``system`` (harness.deadline): an expired call
    ends the run as the generator's failure, in its one line; the watchdog (cards) stops after."""
    guard = deadlines.for_run(system.spec, what, arm, on_cards(system.backend))
    try:
        yield guard
    except deadlines.CallDeadlineExceeded as exc:
        raise GeneratorFailed(str(exc)) from None
    finally:
        deadlines.stop(guard)


def run_scenario(workload: Workload, arm: str, spec: RunSpec, *, expected: dict[str, list[int]] | None = None,
                 record_merges: bool = False) -> ScenarioResult:
    """One arm on ``spec``'s seed, alone on a fresh system."""
    return run_arms(workload, [arm], spec, expected=expected, record_merges=record_merges)[arm]


def run_arms(workload: Workload, arms: list[str], spec: RunSpec, *, expected: dict[str, list[int]] | None = None,
             record_merges: bool = False) -> dict[str, ScenarioResult]:
    """Every arm of ``arms`` on ``spec``'s seed; each result equals :func:`run_scenario`'s for that
    arm. ``spec`` decides the rest (harness.base.spec.RunSpec): the step policy, the sampling
    mode (production's "decode_only"; None: host sampling, where no merge runs), the merge
    trace each arm's merges are appended to (one run each), the generator. A generator
    declaring ``supports_async_decode`` False runs without async scheduling, as the plugin
    runs it.

    On ttsim, arms that read the device alike share a run while their merges write the same
    inputs (harness.shared_arms); an arm that parts is run again from the start. On cards
    (a backend given) every arm runs alone: a card's timing does not replay, so arms sharing a
    run would not be independent samples; a user's generator decides its own merges, so its
    arms cannot share a run either."""
    from harness.shared_arms import group_arms

    flags = {arm: arm_flags(arm) for arm in dict.fromkeys(arms)}
    alone = spec.backend is not None or spec.generator is not None
    # as-is has `all`'s flags (a run can tell arms apart only by their flags): it runs alone
    shareable = {arm: f for arm, f in flags.items() if arm != AS_IS}
    todo = deque([[arm] for arm in flags] if alone else group_arms(shareable) + ([[AS_IS]] if AS_IS in flags else []))
    results: dict[str, ScenarioResult] = {}
    traces: dict[str, MergeTraceWriter] = {}
    # nothing in a scenario reads a gradient: inference mode spares every small torch op
    # autograd's bookkeeping (~10% of a sweep); no tensor of the run outlives it
    with torch.inference_mode():
        if expected is None:
            expected = serial_answers(workload, spec)
        try:
            while todo:
                run = _GroupRun(workload, todo.popleft(), spec, record_merges, traces)
                results.update(run.run(expected))
                todo.extend(run.departed)
        finally:  # each finished arm's merges, as one run each, in the order the arms were asked for
            for arm in flags:
                if arm in traces:
                    traces[arm].close()
    return {arm: results[arm] for arm in arms}


class _GroupRun:
    """One run of ``group`` (one arm, or arms sharing a run): what its merges decided per arm
    (events, guard rejections, the class of each request a merge kept wrong), the engine loop,
    and the verdicts. ``departed``: the groups that parted from this run (run them again)."""

    def __init__(self, workload: Workload, group: list[str], spec: RunSpec, record_merges: bool, traces: dict):
        self.workload, self.group, self.spec = workload, group, spec
        self.record_merges = record_merges
        self.arm_of = {arm_flags(arm): arm for arm in group}
        self.merges: dict[str, list[MergeEvent]] = {arm: [] for arm in group}
        self.blame: dict[str, dict[str, str]] = {arm: {} for arm in group}
        self.rejects = dict.fromkeys(group, 0)  # guard rejections, counted from each arm's own events
        self.writers = {arm: MergeTraceWriter(spec.merge_trace, arm=arm, seed=spec.seed, model=spec.model)
                        if spec.merge_trace else None for arm in group}
        # registered now, so a failing run's merges are still written; an arm that parts from
        # this run is rerun, and the rerun's writer replaces this one
        traces.update((arm, w) for arm, w in self.writers.items() if w is not None)
        self.departed: list[list[str]] = []

    def on_merge(self, event: MergeEvent) -> None:
        # a lone arm owns every event (a user's generator reports its own flags, whatever the arm)
        arm = self.group[0] if len(self.group) == 1 else self.arm_of[GeneratorFlags(**event.inputs.flags)]
        self.rejects[arm] += event.guard_rejected
        if self.writers[arm] is not None:
            self.writers[arm](event)
        for row in event.kept_wrong():
            if row.request_id is not None:
                self.blame[arm].setdefault(row.request_id, classify(event, row))
        if self.record_merges:
            self.merges[arm].append(event)

    def run(self, expected: dict[str, list[int]]) -> dict[str, ScenarioResult]:
        from model.serving import Engine

        spec, knobs = self.spec, self.workload.knobs
        system = System(spec, knobs)
        device_timeout = system.backend.device_timeout
        shared = {arm: arm_flags(arm) for arm in self.group} if len(self.group) > 1 else None
        fatal = None
        try:
            with _deadline(system, f"seed {spec.seed}, arm {self.group[0]}", self.group[0]) as guard:
                gen, runner = build_runner(system, arm_flags(self.group[0]), knobs, on_merge=self.on_merge,
                                           shared_arms=shared, guard=guard)
                if knobs.kv_blocks > NUM_BLOCKS:
                    raise ValueError(f"kv_blocks={knobs.kv_blocks} exceeds the device KV cache ({NUM_BLOCKS} blocks)")
                # the plugin's platform turns vLLM's async scheduling off for a model not declaring
                # supports_async_decode (vllm-tt-plugin platform.py); a generator declaring nothing keeps it
                caps = getattr(gen, "model_capabilities", None) or {}
                engine = Engine(make_scheduler(spec, num_blocks=knobs.kv_blocks), runner,
                                batch_queue=1 if caps.get("supports_async_decode", True) is False else 2)
                try:
                    self._drive(engine)
                    # the run ends when its device work has: a hang in work no read waited on is the run's too
                    system.ttnn.synchronize_device(system.mesh)
                except device_timeout as exc:
                    # a card is unrecoverable after the watchdog: the run ends here, its unfinished
                    # requests fail, and the sweep goes on with the next seed
                    fatal = f"{exc} at engine step {engine.steps}"
                except deadlines.CallDeadlineExceeded:
                    raise  # _deadline words it
                except Exception as exc:
                    if system.user is None:
                        raise
                    raise GeneratorFailed(f"the generator {system.user.spec.text} raised {type(exc).__name__}: {exc} "
                                          f"at engine step {engine.steps} (seed {spec.seed}, arm {self.group[0]}); "
                                          f"replay: {spec.replay_command(self.group[0])}") from exc
            arms = gen.arms if shared else self.group
            self.departed = gen.departed if shared else []
            return {arm: self._result(arm, engine, runner, system, expected, fatal) for arm in arms}
        finally:
            try:
                system.close()
            except device_timeout:  # commands queued behind the hang: the card is unrecoverable anyway
                if fatal is None:
                    raise

    def _drive(self, engine) -> None:
        """Admit the workload's requests in order, each once the engine has reached its
        ``arrival_step`` (an idle engine takes the next one at once) and up to the workload's
        concurrency; step until every one finished."""
        from vllm import SamplingParams
        from vllm.v1.request import Request as VllmRequest

        workload = self.workload
        pending = deque(workload.requests)
        in_flight: set[str] = set()
        # every step schedules a token unless the engine is stuck; far more steps than tokens
        # means no progress (a scheduler that never falls back), not a slow run
        max_steps = 4 * sum(len(r.prompt) + r.max_tokens for r in workload.requests) + 100
        max_steps += max((r.arrival_step for r in workload.requests), default=0)
        while pending or engine.has_work():
            if engine.steps > max_steps:
                raise RuntimeError(f"no progress after {engine.steps} engine steps (seed {self.spec.seed}, "
                                   f"arm {self.group[0]})")
            in_flight -= engine.finished
            while (pending and len(in_flight) < workload.concurrency
                   and (pending[0].arrival_step <= engine.steps or not engine.has_work())):
                r = pending.popleft()
                sp = SamplingParams(max_tokens=r.max_tokens, temperature=0.0, ignore_eos=True)
                engine.add_request(VllmRequest(r.request_id, prompt_token_ids=list(r.prompt), sampling_params=sp,
                                               pooling_params=None, arrival_time=float(engine.steps)))
                in_flight.add(r.request_id)
            engine.step()

    def _result(self, arm: str, engine, runner, system: System, expected: dict, fatal: str | None) -> ScenarioResult:
        verdicts = []
        for r in self.workload.requests:
            v = RequestVerdict(r.request_id, expected[r.request_id], engine.outputs.get(r.request_id, []))
            if not v.ok:  # the merge's records when the generator reports them, else the host's view
                v.defect = verdict_class(merge_defect=self.blame[arm].get(r.request_id),
                                         merge_on=arm_flags(arm).merge,
                                         decode_log=runner.decode_log.get(r.request_id, {}),
                                         expected=v.expected, got=v.got,
                                         cut_short=fatal is not None and r.request_id not in engine.finished,
                                         host_fresh=runner.host_fresh_every_step)
            verdicts.append(v)
        return ScenarioResult(arm, self.spec.seed, self.workload.knobs, verdicts, self.merges[arm], self.rejects[arm],
                              engine.steps, dict(system.mesh.stats), runner.preemptions,
                              fatal and f"{fatal}; replay: {self.spec.replay_command(arm)}",
                              system.backend.diagnostics(system.mesh))
