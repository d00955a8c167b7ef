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
    defect: str = ""  # the verdict class every failed request has without the fix
    first_wrong: int = 0  # the output index every failed request first goes wrong at

    @property
    def url(self) -> str:
        return f"https://github.com/{self.repo}/{self.kind}/{self.number}"


CATALOGUE: dict[str, UpstreamBug] = {b.name: b for b in (
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
)}


#: public upstream bugs ttsim does not reproduce faithfully: name -> (url, why).
#: docs/fidelity.md gives the full trace and the measurements behind each reason
NOT_REPRODUCED: dict[str, tuple[str, str]] = {
    "upstream-56474": (
        "https://github.com/tenstorrent/tt-metal/issues/56474",
        "its empty 1-token completion is a wrong prefill token, from prefill-only persistent state prepared "
        "behind live decode traces, which our models do not have; its other half (widths 2/4/8 staged after "
        "width 1's capture) clobbers token and position together and the keep rejects them"),
    "upstream-56215": (
        "https://github.com/tenstorrent/tt-metal/issues/56215",
        "it needs a traced prefill whose scratch zeroes the decode token buffer but not the position buffer; "
        "our generator traces no prefill, and where upstream's prefill writes those zeros is not public"),
    "upstream-122": (
        "https://github.com/tenstorrent/vllm-tt-plugin/pull/122",
        "the same mechanism as upstream-56215 (fixed on the plugin side by capturing decode before prefill): "
        "it needs a traced prefill whose scratch zeroes the token buffer alone"),
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
    """One side of scenario ``name``: its workload (stage 3 on ``seed``, default the entry's)
    under ``arm`` (default the entry's) with the fix in force or not, on our generator
    configured as the entry says. Returns the harness.scenario.ScenarioResult."""
    from harness import scenario
    from harness.base.spec import RunSpec
    from harness.workloads import stage3

    bug = lookup(name)
    seed = bug.seed if seed is None else seed
    arm = bug.arm if arm is None else arm
    spec = RunSpec(seed=seed, generator_options=bug.fixed if fixed else bug.broken, scenario=name)
    return scenario.run_arms(stage3(seed), [arm], spec)[arm]


@dataclass
class Reproduction:
    bug: UpstreamBug
    seed: int
    broken: object  # ScenarioResult without the fix
    fixed: object  # with it

    def mismatched(self) -> list[str]:
        """Failed requests (without the fix) whose failure is not the issue's kind."""
        return [f"{v.request_id}: {v.defect} at output {first_difference(v.expected, v.got)}"
                for v in self.broken.failed
                if v.defect != self.bug.defect or first_difference(v.expected, v.got) != self.bug.first_wrong]

    @property
    def ok(self) -> bool:
        """Fails without the fix, every failure the issue's kind, and passes with it."""
        return bool(self.broken.failed) and not self.mismatched() and not self.fixed.failed

    def lines(self) -> list[str]:
        b = self.bug
        out = [f"{b.name}: {b.repo}#{b.number} {b.title} ({b.url})", f"  reproduces: {b.reproduces}",
               f"  issue reports: {b.failure}"]
        for side, r in (("without the fix", self.broken), ("with the fix", self.fixed)):
            out.append(f"  {side} (arm {r.arm}, seed {r.seed}): {len(r.failed)} of {len(r.verdicts)} requests failed")
            out += [f"    {v.request_id}: {v.defect} at output {first_difference(v.expected, v.got)} "
                    f"(expected {v.expected[:4]}..., got {v.got[:4]}...)" for v in r.failed]
            out += [f"    {line}" for line in ((r.fatal,) if r.fatal else ())]
        out.append("  REPRODUCED" if self.ok else f"  NOT REPRODUCED: {self.why_not()}")
        return out

    def why_not(self) -> str:
        if not self.broken.failed:
            return "no request fails without the fix"
        if self.mismatched():
            b = self.bug
            return f"failures not of the issue's kind ({b.defect} at output {b.first_wrong}): {'; '.join(self.mismatched())}"
        return f"{len(self.fixed.failed)} requests fail with the fix"


def check(name: str, seed: int | None = None) -> Reproduction:
    """Both sides of scenario ``name`` on ``seed`` (default the entry's)."""
    bug = lookup(name)
    seed = bug.seed if seed is None else seed
    return Reproduction(bug, seed, run_named(name, False, seed), run_named(name, True, seed))
