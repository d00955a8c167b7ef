"""Control-vs-treatment sweeps: every arm over the same seeds, with rates and intervals.

A seed names one stage-3 workload and one draw of swarm knob rates; every arm runs that
same seed, so arms differ only in the generator's flags. Per-request verdicts compare
each request's output with its serial answer.
"""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections import Counter
from dataclasses import dataclass, field

from model.flags import arm_flags

from harness import scenario
from harness.base.spec import RunSpec
from harness.base.stats import wilson
from harness.system import generator_loaded, make_scheduler
from harness.workloads import stage3
from harness.sweep import EXECUTORS


@dataclass
class ArmSummary:
    runs: int = 0
    requests: int = 0
    failed_requests: int = 0
    failing_seeds: list[int] = field(default_factory=list)
    defects: Counter = field(default_factory=Counter)
    guard_rejects: int = 0
    preemptions: int = 0
    first_failure: dict | None = None

    def add(self, seed: int, result: scenario.ScenarioResult) -> None:
        self.runs += 1
        self.requests += len(result.verdicts)
        failed = result.failed
        self.failed_requests += len(failed)
        self.guard_rejects += result.guard_rejects
        self.preemptions += result.preemptions
        if failed:
            self.failing_seeds.append(seed)
            for v in failed:
                self.defects[v.defect] += 1
            if self.first_failure is None:
                v = failed[0]
                self.first_failure = {"seed": seed, "request": v.request_id, "defect": v.defect,
                                      "expected": v.expected, "got": v.got}

    def as_json(self, arm: str, spec: RunSpec) -> dict:
        """The summary as the report's JSON; the first failure's replay line from ``spec`` (the
        sweep's, on that failure's seed)."""
        lo, hi = wilson(self.failed_requests, self.requests)
        out = {
            "runs": self.runs,
            "requests": self.requests,
            "failed_requests": self.failed_requests,
            "failing_seeds": self.failing_seeds,
            "rate": self.failed_requests / self.requests if self.requests else 0.0,
            "wilson95": [lo, hi],
            "defects": dict(sorted(self.defects.items())),
            "guard_rejects": self.guard_rejects,
            "preemptions": self.preemptions,
        }
        if self.first_failure:
            out["first_failure"] = {**self.first_failure,
                                    "replay": spec.with_seed(self.first_failure["seed"]).replay_command(arm)}
        return out


def run_seed(spec: RunSpec, arms: list[str]) -> list[tuple[str, scenario.ScenarioResult]]:
    """Every arm on ``spec``'s seed (the serial answers are computed once and shared; on ttsim,
    arms share runs while their merges agree: scenario.run_arms). On cards (``spec.backend``)
    the same workload and host-side knobs run, and the hardware's own timing replaces ttsim's
    readback lag."""
    workload = stage3(spec.seed)
    expected = scenario.serial_answers(workload, spec)
    results = scenario.run_arms(workload, arms, spec, expected=expected)
    return [(arm, results[arm]) for arm in arms]


@dataclass(frozen=True)
class Job:
    """One seed of a sweep: the sweep's spec on that seed, and the arms to run."""
    spec: RunSpec
    arms: tuple[str, ...]


def _worker(job: Job):
    warnings.simplefilter("ignore")
    # the user's generator, loaded where the job runs (a fork pool's worker finds it loaded
    # already; a Ray worker imports it here)
    with generator_loaded(job.spec):
        return job.spec.seed, [(arm, _slim(r)) for arm, r in run_seed(job.spec, list(job.arms))]


def _slim(r: scenario.ScenarioResult) -> scenario.ScenarioResult:
    r.merges = []  # not needed for summaries; keeps inter-process traffic small
    return r


def warm_up(spec: RunSpec) -> None:
    """Pay the one-time costs (vLLM's imports, its config) in this process: once before a
    fork pool's workers start, so they inherit them. The import alone takes 5-7 s of one
    core here, whatever the sweep's size (vLLM's own start-up: it imports torch's compiler)."""
    make_scheduler(spec)


def sweep(arms: list[str], seeds: range, spec: RunSpec, workers: int = 1, progress=None, executor: str = "local",
          ray_address: str | None = None) -> dict[str, ArmSummary]:
    """Run ``arms`` over ``seeds``, each on ``spec`` with its seed; results are merged in seed
    order, so the summary does not depend on the executor, the number of workers or their
    timing. ``executor``: "local" (in-process for one worker, else a fork pool) or "ray" (a Ray
    task per seed on ``workers`` CPUs of a private local Ray, or on the cluster at
    ``ray_address``)."""
    for arm in arms:
        arm_flags(arm)  # KeyError naming an unknown arm
    if executor not in EXECUTORS:
        raise ValueError(f"unknown executor {executor!r}; choose from {', '.join(EXECUTORS)}")
    if spec.backend is not None and (workers > 1 or executor != "local"):
        raise ValueError("a hardware backend runs in one process (cards are exclusive): "
                         "workers must be 1 and the executor local")
    summaries = {arm: ArmSummary() for arm in arms}
    jobs = [Job(spec.with_seed(seed), tuple(arms)) for seed in seeds]
    results: dict[int, list] = {}
    runner = EXECUTORS[executor](workers, functools.partial(warm_up, spec), ray_address)
    with contextlib.closing(runner.imap_unordered(_worker, jobs)) as it:
        for done, (seed, res) in enumerate(it, 1):
            results[seed] = res
            if progress:
                progress(done, len(jobs))
    for seed in seeds:
        for arm, r in results[seed]:
            summaries[arm].add(seed, r)
    return summaries
