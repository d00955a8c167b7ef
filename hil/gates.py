"""Production's HTTP stage gates ("infbench" stages) against an OpenAI-compatible vLLM server.

One body per gate, pointed at either a sim-backed `vllm serve` (tests/gates start one) or
the hardware host's live server (`pytest tests/gates --endpoint URL`). Requests go through
the official ``openai`` client, greedy (temperature 0).

A transport error (connection refused, name not resolved, a dropped connection) is retried
once and recorded as ``transport-retry`` in the gate report; a second one fails the check.
Every gate writes a JSON report (:class:`GateReport`).
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

BANNER = "QWEN36_SDPA_STREAMING engaged"

GET_WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


class EndpointDown(RuntimeError):
    """The endpoint did not answer /health within the deadline (one line, no traceback)."""


class GateFailure(AssertionError):
    pass


@dataclass(frozen=True)
class Answer:
    """What a greedy completion returned: text, and token ids when the server reports them
    (a byte-level model's output is not always valid UTF-8, so text alone can hide a difference)."""

    text: str
    token_ids: tuple[int, ...] | None = None
    cached_tokens: int | None = None

    def same(self, other: "Answer") -> bool:
        if self.text != other.text:
            return False
        return self.token_ids is None or other.token_ids is None or self.token_ids == other.token_ids

    def show(self) -> str:
        return repr(self.text) + (f" ids={list(self.token_ids)}" if self.token_ids is not None else "")


@dataclass
class GateTarget:
    """What a gate runs against: a sim server (``server`` set, its log readable) or a live
    endpoint (its log readable only if given)."""

    kind: str  # "sim" or "endpoint"
    url: str
    log_text: Callable[[], str] | None
    server: object = None

    def report(self, gate: str) -> "GateReport":
        return GateReport(gate, "sim" if self.kind == "sim" else self.url)


@dataclass(frozen=True)
class GateRequest:
    request_id: str
    prompt: str
    max_tokens: int


@dataclass
class GateReport:
    gate: str
    target: str
    checks: list[dict] = field(default_factory=list)
    transport_retries: list[dict] = field(default_factory=list)

    def check(self, name: str, ok: bool, detail: str = "", **facts) -> bool:
        self.checks.append({"check": name, "status": "pass" if ok else "fail", "detail": detail, **facts})
        return ok

    @property
    def passed(self) -> bool:
        return all(c["status"] == "pass" for c in self.checks)

    def status(self) -> str:
        """pass | fail | transport-retry (passed, but only after retrying a transport error)."""
        if not self.passed:
            return "fail"
        return "transport-retry" if self.transport_retries else "pass"

    def as_json(self) -> dict:
        return {"gate": self.gate, "target": self.target, "status": self.status(), "checks": self.checks,
                "transport_retries": self.transport_retries}

    def write(self, path: Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.as_json(), indent=2, sort_keys=True) + "\n")
        return path

    def failures(self) -> str:
        return "; ".join(f"{c['check']}: {c['detail']}" for c in self.checks if c["status"] == "fail")


def health(url: str, timeout: float = 2.0) -> int | None:
    """/health's status code, or None when nothing answered. /health is vLLM's, not part of the
    OpenAI API, so it goes through httpx, the HTTP library under the openai client."""
    import httpx

    try:
        return httpx.get(f"{url.rstrip('/')}/health", timeout=timeout).status_code
    except (httpx.TransportError, httpx.InvalidURL, ValueError):
        return None


def wait_for_endpoint(url: str, deadline_s: float = 10.0) -> None:
    """Return once /health answers 200; EndpointDown (one clear line) after ``deadline_s``."""
    t0 = time.monotonic()
    status = None
    while time.monotonic() - t0 < deadline_s:
        status = health(url, timeout=min(2.0, deadline_s))
        if status == 200:
            return
        time.sleep(0.25)
    what = "nothing answered" if status is None else f"/health answered {status}"
    raise EndpointDown(f"endpoint {url} is not serving: {what} within {deadline_s:.0f} s")


def readiness(report: GateReport, url: str, log_text: str | None) -> GateReport:
    """Production's readiness probe: fails closed unless /health is 200 AND the streaming
    banner is in the server's log (no log to read = no banner seen = fail)."""
    status = health(url)
    report.check("health", status == 200, "" if status == 200 else f"/health answered {status!r}")
    if log_text is None:
        report.check("streaming-banner", False, "no server log given: cannot confirm the banner (fail closed)")
    else:
        report.check("streaming-banner", BANNER in log_text,
                     "" if BANNER in log_text else f"{BANNER!r} not in the server log")
    return report


class GateClient:
    """The openai client plus the transport-retry rule."""

    TRANSPORT_ERRORS: tuple = ()

    def __init__(self, url: str, report: GateReport, *, model: str | None = None, timeout: float = 120.0):
        import openai

        self.openai = openai
        self.client = openai.OpenAI(base_url=f"{url.rstrip('/')}/v1", api_key="EMPTY", max_retries=0,
                                    timeout=timeout)
        self.report = report
        self.model = model or self._call("models", "list", lambda: self.client.models.list().data[0].id)

    def _call(self, check: str, request_id: str, fn):
        try:
            return fn()
        except self.openai.APIConnectionError as exc:  # includes timeouts: no answer reached us
            self.report.transport_retries.append({"check": check, "request": request_id,
                                                  "error": f"{type(exc).__name__}: {exc.__cause__ or exc}"})
            return fn()  # once; a second transport error propagates and fails the gate

    def complete(self, check: str, req: GateRequest) -> Answer:
        def go():
            # the request id names it in the server's records (vLLM's request_id; ttsim serve-explain)
            r = self.client.completions.create(model=self.model, prompt=req.prompt, max_tokens=req.max_tokens,
                                               temperature=0, extra_body={"return_token_ids": True,
                                                                          "request_id": f"{check}-{req.request_id}"})
            c = r.choices[0]
            ids = getattr(c, "token_ids", None)
            details = getattr(r.usage, "prompt_tokens_details", None)
            cached = getattr(details, "cached_tokens", None) if details is not None else None
            return Answer(c.text, tuple(ids) if ids is not None else None, cached)

        return self._call(check, req.request_id, go)

    def chat(self, check: str, request_id: str, messages, *, max_tokens: int, stream: bool = False, tools=None):
        """Returns (content, tool_calls as [(name, arguments)], finish_reason, chunks)."""

        def go():
            kw = {"tools": tools, "tool_choice": "auto"} if tools else {}
            if not stream:
                r = self.client.chat.completions.create(model=self.model, messages=messages, max_tokens=max_tokens,
                                                        temperature=0, **kw)
                m = r.choices[0].message
                calls = [(t.function.name, t.function.arguments) for t in (m.tool_calls or [])]
                return m.content or "", calls, r.choices[0].finish_reason, 1
            content, calls, finish, chunks = [], {}, None, 0
            for chunk in self.client.chat.completions.create(model=self.model, messages=messages,
                                                             max_tokens=max_tokens, temperature=0, stream=True, **kw):
                chunks += 1
                if not chunk.choices:
                    continue
                ch = chunk.choices[0]
                if ch.delta.content:
                    content.append(ch.delta.content)
                for t in ch.delta.tool_calls or []:
                    name, args = calls.get(t.index, ("", ""))
                    calls[t.index] = (name + (t.function.name or ""), args + (t.function.arguments or ""))
                finish = ch.finish_reason or finish
            return "".join(content), [calls[i] for i in sorted(calls)], finish, chunks

        return self._call(check, request_id, go)


# -- stage 2 ------------------------------------------------------------------------------------

def stage2(report: GateReport, client: GateClient, *, require_tool_call: bool) -> GateReport:
    """Smoke: completion, chat, streamed chat (equal to the same chat unstreamed), and a
    streamed get_weather tool call through the server's tool parser.

    ``require_tool_call``: a real model asked for the weather calls get_weather, so on the
    live endpoint a parsed call is required. The sim's byte-level toy model cannot decide to
    call a tool; there the check proves the tools path end to end (the request with tools is
    accepted and streamed to its finish, and the streamed parse equals the unstreamed parse of
    the same greedy output) and that no call is invented, not that the model calls tools.
    """
    a = client.complete("completion", GateRequest("completion", "The capital of France is", 16))
    report.check("completion", len(a.text) > 0 or bool(a.token_ids), f"answer {a.show()}")
    msgs = [{"role": "user", "content": "Say hello in one short sentence."}]
    text, _, finish, _ = client.chat("chat", "chat", msgs, max_tokens=16)
    report.check("chat", bool(text) and finish in ("length", "stop"), f"finish {finish}, content {text!r}")
    s_text, _, s_finish, chunks = client.chat("streamed-chat", "streamed-chat", msgs, max_tokens=16, stream=True)
    report.check("streamed-chat", chunks > 1 and s_text == text and s_finish == finish,
                 f"{chunks} chunks, streamed {s_text!r} vs unstreamed {text!r}")
    weather = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
    u_text, u_calls, u_finish, _ = client.chat("tool-call", "tool-call-unstreamed", weather, max_tokens=48,
                                               tools=[GET_WEATHER])
    t_text, t_calls, t_finish, t_chunks = client.chat("tool-call", "tool-call-streamed", weather, max_tokens=48,
                                                      stream=True, tools=[GET_WEATHER])
    parsed_ok = all(name == "get_weather" and _is_json_object(args) for name, args in t_calls)
    same = t_calls == u_calls and t_text == u_text
    if require_tool_call:
        ok = bool(t_calls) and parsed_ok and same and t_finish == "tool_calls"
    else:
        emitted = "<tool_call>" in u_text + t_text
        ok = t_chunks > 1 and same and parsed_ok and (bool(t_calls) or not emitted) and t_finish is not None
    report.check("streamed-tool-call", ok,
                 f"streamed calls {t_calls} content {t_text!r} finish {t_finish}; unstreamed calls {u_calls} "
                 f"finish {u_finish}", tool_call_required=require_tool_call, tool_calls=len(t_calls))
    return report


def _is_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


# -- stage 3 ------------------------------------------------------------------------------------

def run_concurrent(client: GateClient, check: str, requests: list[GateRequest], concurrency: int) -> dict[str, Answer]:
    """Submit in order, at most ``concurrency`` in flight (production's stage-3 shape)."""
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        futures = {r.request_id: pool.submit(client.complete, check, r) for r in requests}
        return {rid: f.result() for rid, f in futures.items()}


def _diff(expected: dict[str, Answer], got: dict[str, Answer]) -> list[str]:
    return [f"{rid}: expected {expected[rid].show()} got {got[rid].show()}"
            for rid in expected if not expected[rid].same(got[rid])]


def stage3(report: GateReport, client: GateClient, requests: list[GateRequest], *, concurrency: int = 16,
           repeats: int = 2, cache_prompt: str | None = None) -> GateReport:
    """32 requests at concurrency 16 each equal to its serial answer; byte-identical over
    repeats; batch invariance; cold vs cached prefill. A failure names the request."""
    serial = {r.request_id: client.complete("serial", r) for r in requests}
    runs = [run_concurrent(client, "concurrent", requests, concurrency) for _ in range(repeats)]
    bad = _diff(serial, runs[0])
    report.check("concurrent-equals-serial", not bad, "; ".join(bad),
                 failed_requests=[b.split(":")[0] for b in bad], requests=len(requests), concurrency=concurrency,
                 completion_tokens=sum(len(a.token_ids) for a in runs[0].values() if a.token_ids is not None))
    drift = [d for run in runs[1:] for d in _diff(runs[0], run)]
    report.check("determinism", not drift, "; ".join(drift), repeats=repeats)

    # batch invariance: one prompt alone, then 8 copies sharing every decode batch
    probe = requests[0]
    copies = [GateRequest(f"{probe.request_id}-copy{i}", probe.prompt, probe.max_tokens) for i in range(8)]
    batch = run_concurrent(client, "batch-invariance", copies, len(copies))
    varied = [f"{rid}: {a.show()} vs alone {serial[probe.request_id].show()}" for rid, a in batch.items()
              if not a.same(serial[probe.request_id])]
    report.check("batch-invariance", not varied, "; ".join(varied), batch=len(copies))

    # cold vs cached prefill: the same long prompt twice; the second must hit the prefix cache
    prompt = cache_prompt or ("Prefix caching check. " * 24)
    cold = client.complete("prefix-cache", GateRequest("prefix-cold", prompt, 8))
    warm = client.complete("prefix-cache", GateRequest("prefix-cached", prompt, 8))
    hit = warm.cached_tokens
    ok = cold.same(warm) and (hit is None or hit > 0)
    report.check("cold-vs-cached-prefill", ok,
                 f"cold {cold.show()} cached {warm.show()}; cached tokens {hit!r}"
                 + (" (the second request did not hit the prefix cache)" if hit == 0 else ""),
                 cached_tokens=hit)
    return report


# -- haystack (semantic: a real model only) ----------------------------------------------------

def haystack_prompt(n_words: int, needle: str, depth: float, seed: int = 0) -> str:
    """~n_words of filler with ``needle`` inserted at fraction ``depth`` of the way in."""
    import random

    if not 0.0 <= depth <= 1.0:
        raise ValueError(f"depth must be in [0, 1], got {depth}")
    rng = random.Random(seed)
    words = ["grass", "river", "stone", "cloud", "market", "lamp", "window", "garden", "copper", "letter"]
    filler = [rng.choice(words) for _ in range(n_words)]
    at = round(depth * len(filler))
    body = " ".join(filler[:at] + [needle] + filler[at:])
    return f"{body}\n\nQuestion: what is the secret number mentioned above? Answer with the number only.\nAnswer:"


def haystack_answer_ok(answer: str, number: str) -> bool:
    """The answer names the needle's number as a whole token (not as part of another number)."""
    import re

    return re.search(rf"(?<!\d){re.escape(number)}(?!\d)", answer) is not None


def haystack(report: GateReport, client: GateClient, *, tokens: int, depths=(0.1, 0.5, 0.9)) -> GateReport:
    for depth in depths:
        number = str(70000 + int(depth * 1000) + tokens // 1000)
        # ~0.7 words per token for English BPE vocabularies
        prompt = haystack_prompt(int(tokens * 0.7), f"The secret number is {number}.", depth)
        a = client.complete("haystack", GateRequest(f"haystack-{tokens}-{depth}", prompt, 16))
        report.check(f"haystack-{tokens // 1000}k-depth{depth}", haystack_answer_ok(a.text, number),
                     f"expected {number}, answered {a.text!r}")
    return report
