"""Seeded workloads and swarm fault knobs for the serving path.

Everything is drawn from one seed through named streams (harness.base.seeds.stream), so a seed
names one workload and one set of knob rates, in any process and on either backend.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from harness.base.seeds import stream


@dataclass(frozen=True)
class Request:
    request_id: str
    prompt: tuple[int, ...]
    max_tokens: int
    #: the engine step from which the request may be admitted (an idle engine takes it at once);
    #: the workload's order and concurrency still apply
    arrival_step: int = 0

    @property
    def final_position(self) -> int:
        """Position the device holds for this slot after its last decode."""
        return len(self.prompt) + self.max_tokens - 1


@dataclass(frozen=True)
class FaultKnobs:
    """Swarm knobs: each seed enables each knob with p=0.5 and then draws its rate.

    readback_lag    probability that the device has not executed what the host enqueued
                    (how far a non-blocking read can trail)
    bucket_churn    per decode step, probability of running in a larger batch bucket than
                    needed (forced bucket changes)
    collide         probability that a prompt's length equals an earlier request's final
                    position (prompt-length collisions with a slot's previous occupant)
    scratch_allocs  per step, probability of a scratch device allocation that is freed
                    again (allocator reuse patterns: what lands under new trace buffers)
    kv_blocks       the scheduler's KV budget in blocks (incl. vLLM's null block); a tight
                    budget makes vLLM preempt running requests and resume them later
    """

    readback_lag: float = 0.5
    bucket_churn: float = 0.0
    collide: float = 0.0
    scratch_allocs: float = 0.0
    kv_blocks: int = 48

    @classmethod
    def swarm(cls, seed: int) -> "FaultKnobs":
        rng = stream("knobs", seed=seed)
        # five draws each: the fifth switched eager trace capture, now the plugin's warm-up for
        # every seed; still drawn so that every other knob keeps its value per seed
        on = rng.random(5) < 0.5
        rates = rng.random(5)
        kv_on, kv_rate = rng.random(2)  # drawn after the others: adding it kept earlier knobs
        return cls(
            readback_lag=float(0.2 + 0.7 * rates[0]) if on[0] else 0.5,
            bucket_churn=float(0.5 * rates[1]) if on[1] else 0.0,
            collide=float(0.3 + 0.7 * rates[2]) if on[2] else 0.0,
            scratch_allocs=float(0.5 * rates[3]) if on[3] else 0.0,
            kv_blocks=int(14 + 10 * kv_rate) if kv_on < 0.5 else 48,
        )

    def describe(self) -> str:
        return " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in asdict(self).items())



@dataclass(frozen=True)
class Workload:
    name: str
    requests: tuple[Request, ...]
    concurrency: int
    knobs: FaultKnobs = field(default_factory=FaultKnobs)


_faker = None


def prompt_text(rng: np.random.Generator, length: int) -> tuple[int, ...]:
    """Seeded English-like text (faker, seeded from our stream) cut to ``length`` bytes."""
    global _faker
    if _faker is None:
        from faker import Faker

        _faker = Faker("en_US")
    fake = _faker
    fake.seed_instance(int(rng.integers(2**31)))
    text = b""
    while len(text) < length:
        text += (fake.sentence(nb_words=8) + " ").encode()
    return tuple(text[:length])


def stage3(seed: int, *, n_requests: int = 32, concurrency: int = 16, knobs: FaultKnobs | None = None,
           min_prompt: int = 16, max_prompt: int = 96, min_tokens: int = 4, max_tokens: int = 12) -> Workload:
    """The production stage-3 shape: 32 requests at concurrency 16, seeded text prompts.

    With the ``collide`` knob, a prompt's length is set to the final position of an earlier
    request, so that when it lands in that request's freed slot the device buffer's stale
    position equals the new request's first decode position.
    """
    if n_requests <= 0 or concurrency <= 0:
        raise ValueError(f"need n_requests > 0 and concurrency > 0, got {n_requests}, {concurrency}")
    knobs = knobs or FaultKnobs.swarm(seed)
    rng = stream("workload", "stage3", seed=seed)
    reqs: list[Request] = []
    for i in range(n_requests):
        max_new = int(rng.integers(min_tokens, max_tokens + 1))
        length = int(rng.integers(min_prompt, max_prompt + 1))
        if reqs and rng.random() < knobs.collide:
            # a recent request is the likeliest previous occupant of the slot this one gets
            recent = reqs[-min(len(reqs), 8):]
            earlier = recent[int(rng.integers(len(recent)))]
            length = earlier.final_position + int(rng.integers(0, 2))
        reqs.append(Request(f"req-{i:02d}", prompt_text(rng, length), max_new))
    return Workload("stage3", tuple(reqs), concurrency, knobs)
