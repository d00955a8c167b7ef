"""Public upstream bugs as named regression scenarios (`ttsim scenario NAME`).

Each entry names a public tt-metal / vllm-tt-plugin issue or pull request, the configuration
that puts the code BEFORE its fix in force (a generator option named after the upstream
behaviour; its default is the fixed behaviour) and the seed on which the failure emerges from
ttsim's own semantics, and how the issue reports the failure. ``run_named`` runs one side;
``check`` runs both and says whether the bug reproduces: failing without the fix in the way
the issue reports, passing with it. docs/fidelity.md traces each mechanism to upstream.

This module is light (no torch, no vLLM) until a scenario runs, so the CLI lists and checks
the names before any work (harness.commands.scenario).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.defects import first_difference


@dataclass(frozen=True)
class UpstreamBug:
    """A bug reproduced by a serving workload: stage 3 on ``seed`` (``workload``: stage3's keyword
    arguments) with ``model`` under ``arm``, the two sides differing in our generator's options
    (``broken`` / ``fixed``) and the plugin's trace mode and warm-up order (``broken_trace`` /
    ``fixed_trace``, harness.base.spec.TRACE_MODES)."""
    name: str
    repo: str
    number: int
    kind: str  # "issues" or "pull" (the URL's path segment)
    title: str
    reproduces: str  # the mechanism, in one sentence
    failure: str  # how the issue reports the failure, and how it shows here
    arm: str  # model.flags arm the two runs share (the fixes in force besides this one)
    seed: int
    broken: dict = field(default_factory=dict)  # generator options: the code before the fix
    fixed: dict = field(default_factory=dict)  # generator options: with the fix
    defect: str = ""  # the verdict class of the failure the issue reports
    first_wrong: int = 0  # the output index that failure first goes wrong at
    #: classes of the same route that a failed request may show instead, at any output (a wrong
    #: state whose first wrong token comes later); at least one failure must be the reported kind
    also: tuple = ()
    model: str = "markov"
    workload: dict = field(default_factory=dict)
    broken_trace: str = "all"
    fixed_trace: str = "all"

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{self.kind}/{self.number}"


@dataclass(frozen=True)
class DeviceBug:
    """A bug of one device op, reproduced by calling it as the issue does: ``runner``
    (``module:function``, called with ``fixed``) returns a harness.op_scenarios.OpSide."""
    name: str
    repo: str
    number: int
    kind: str
    title: str
    reproduces: str
    failure: str
    runner: str

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{self.kind}/{self.number}"


CATALOGUE: dict = {b.name: b for b in (
    UpstreamBug(
        name="upstream-54565", repo="tenstorrent/tt-metal", number=54565, kind="pull",
        title="Gate the async-ahead token keep on supports_async_decode",
        reproduces="a model declaring supports_async_decode=False runs without vLLM's async scheduling (the "
                   "plugin turns it off), so the host is fresh at every step; the keep still adopts the device's "
                   "token wherever dev_pos == host_pos or host_pos + 1, which can only be a stale token of an "
                   "earlier request that reused the slot at that position",
        failure="Qwen3.6-27B: 8 of 32 requests truncated at the second token; here (a byte vocabulary, no EOS) "
                "the second token, the first decode's (output 1), is the previous occupant's, class slot-reuse",
        # the Qwen path upstream had: F1's keep with no prefilled-slot marks, guard or clamp
        arm="control", seed=9,
        broken={"supports_async_decode": False, "async_keep_gate": False},
        fixed={"supports_async_decode": False, "async_keep_gate": True},
        defect="slot-reuse", first_wrong=1,
    ),
    UpstreamBug(
        name="upstream-56474", repo="tenstorrent/tt-metal", number=56474, kind="issues",
        title="[Qwen3.6] Prepare persistent prefill state and every decode bucket before trace capture",
        reproduces="with vllm-tt-plugin PR #122's warm-up order (decode captured before prefill) the hybrid's "
                   "prefill-only state (batch-1 GDN scratch, zero buffers, chunk inputs) is first allocated in "
                   "the trace-enabled prefill warm-up, behind the live decode traces; their replays overwrite it, "
                   "and a new sequence then resets its GDN state from a clobbered zero buffer",
        failure="Qwen3.6-27B batch 8: a completion of 1 empty token (the prefill's token wrong); here a wrong "
                "first token (output 0, class prefill-state), or a first token right by chance and a later one "
                "wrong (model-state: the decode inputs are the host's, the state the prefill left is not)",
        arm="all", seed=0, model="tiny", workload={"n_requests": 8, "concurrency": 4, "max_prompt": 48,
                                                   "max_tokens": 6},
        broken_trace="decode-first", fixed_trace="all",  # PR #126 restored the prefill-first order
        defect="prefill-state", first_wrong=0, also=("model-state",),
    ),
    DeviceBug(
        name="upstream-57364", repo="tenstorrent/tt-metal", number=57364, kind="issues",
        title="[ttnn][sdpa] 8 defects in SDPA, kv_cache, paged_cache and indexer_score (paged_update_cache)",
        reproduces="paged_update_cache bounds cache_position_modulo by the cache's blocks, never by the "
                   "page-table row: position 900 under modulo 1024 reads entry 28 of an 8-entry row and writes "
                   "the block it finds there; a position past the row without the modulo does the same",
        failure="silent DRAM corruption outside the cache (page_table_ptr[28] on an 8-entry row); here the "
                "write lands in the block the bytes after the row name, and ttsim.diagnostics records it; the "
                "fix the issue asks for (the modulo within the row's positions) keeps the write in the row",
        runner="harness.op_scenarios:paged_update_past_the_row",
    ),
)}


#: public upstream bugs ttsim does not reproduce faithfully: name -> (url, why).
#: docs/fidelity.md gives the full trace and the measurements behind each reason
NOT_REPRODUCED: dict[str, tuple[str, str]] = {
    "upstream-56215": (
        "https://github.com/tenstorrent/tt-metal/issues/56215",
        "its decode token buffer is zeroed by each prefill replay while the position buffer still matches the "
        "host; the hybrid's traced prefill (trace mode all) does leave every decode input inside its replayed "
        "span, but the token and position inputs are staged back to back (64-byte allocations) in one freed "
        "span, so each replay overwrites both and the keep rejects the position; and that generator restages "
        "its inputs every step (qwen36's declaration), our device-token generator's sweep model traces no "
        "prefill"),
    "vllm-tt-plugin-122": (
        "https://github.com/tenstorrent/vllm-tt-plugin/pull/122",
        "the same mechanism as upstream-56215 (fixed on the plugin side by capturing decode before prefill): "
        "it needs the token input alone in the prefill trace's replayed span, which no layout of ours produces"),
}


def names() -> list[str]:
    return list(CATALOGUE)


def lookup(name: str) -> UpstreamBug:
    """The entry called ``name``; KeyError with one line: why a known bug is not reproduced, else
    the names there are."""
    if name in NOT_REPRODUCED:
        url, why = NOT_REPRODUCED[name]
        raise KeyError(f"{name} ({url}) is not reproduced on ttsim: {why} (docs/fidelity.md)")
    if name not in CATALOGUE:
        raise KeyError(f"unknown scenario {name!r}; choose from {', '.join(CATALOGUE)}")
    return CATALOGUE[name]


def run_named(name: str, fixed: bool, seed: int | None = None, *, arm: str | None = None):
    """One side of workload scenario ``name``: its workload (stage 3 on ``seed``, default the
    entry's) under ``arm`` (default the entry's) with the fix in force or not, on our generator
    configured as the entry says. Returns the harness.scenario.ScenarioResult."""
    from harness import scenario
    from harness.base.spec import RunSpec, trace_mode
    from harness.workloads import stage3

    bug = lookup(name)
    seed = bug.seed if seed is None else seed
    arm = bug.arm if arm is None else arm
    spec = RunSpec(seed=seed, model=bug.model, generator_options=bug.fixed if fixed else bug.broken, scenario=name,
                   trace_mode=trace_mode(bug.fixed_trace if fixed else bug.broken_trace))
    return scenario.run_arms(stage3(seed, **bug.workload), [arm], spec)[arm]


@dataclass
class Reproduction:
    bug: UpstreamBug
    seed: int
    broken: object  # ScenarioResult without the fix
    fixed: object  # with it

    def _reported(self, v) -> bool:
        return v.defect == self.bug.defect and first_difference(v.expected, v.got) == self.bug.first_wrong

    def mismatched(self) -> list[str]:
        """Failed requests (without the fix) whose failure is neither the issue's kind nor its route's."""
        return [f"{v.request_id}: {v.defect} at output {first_difference(v.expected, v.got)}"
                for v in self.broken.failed if not self._reported(v) and v.defect not in self.bug.also]

    @property
    def ok(self) -> bool:
        """Fails without the fix, at least once as the issue reports and every time by its route,
        and passes with it."""
        return (any(self._reported(v) for v in self.broken.failed) and not self.mismatched()
                and not self.fixed.failed)

    def lines(self) -> list[str]:
        b = self.bug
        out = [f"{b.name}: {b.repo}#{b.number} {b.title} ({b.url})", f"  reproduces: {b.reproduces}",
               f"  issue reports: {b.failure}"]
        for side, r, trace in (("without the fix", self.broken, b.broken_trace),
                               ("with the fix", self.fixed, b.fixed_trace)):
            out.append(f"  {side} (model {b.model}, arm {r.arm}, seed {r.seed}, trace mode {trace}): "
                       f"{len(r.failed)} of {len(r.verdicts)} requests failed")
            out += [f"    {v.request_id}: {v.defect} at output {first_difference(v.expected, v.got)} "
                    f"(expected {v.expected[:4]}..., got {v.got[:4]}...)" for v in r.failed]
            out += [f"    {line}" for line in ((r.fatal,) if r.fatal else ())]
        out.append("  REPRODUCED" if self.ok else f"  NOT REPRODUCED: {self.why_not()}")
        return out

    def why_not(self) -> str:
        if not self.broken.failed:
            return "no request fails without the fix"
        if not any(self._reported(v) for v in self.broken.failed):
            b = self.bug
            return f"no failure as the issue reports ({b.defect} at output {b.first_wrong})"
        if self.mismatched():
            b = self.bug
            return f"failures not of the issue's kind ({b.defect} at output {b.first_wrong}): {'; '.join(self.mismatched())}"
        return f"{len(self.fixed.failed)} requests fail with the fix"


def check(name: str, seed: int | None = None):
    """Both sides of scenario ``name``: a workload scenario on ``seed`` (default the entry's), a
    Reproduction; a device scenario (no seed), a harness.op_scenarios.OpReproduction."""
    bug = lookup(name)
    if isinstance(bug, DeviceBug):
        import importlib

        from harness.op_scenarios import OpReproduction

        module, attr = bug.runner.split(":")
        run = getattr(importlib.import_module(module), attr)
        return OpReproduction(bug, run(False), run(True))
    seed = bug.seed if seed is None else seed
    return Reproduction(bug, seed, run_named(name, False, seed), run_named(name, True, seed))
