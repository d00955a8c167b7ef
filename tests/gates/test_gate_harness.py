"""The gate harness itself, without a model: haystack prompts and answer checks, the
transport-retry rule, the fail-closed readiness probe, an endpoint that does not answer."""

from __future__ import annotations

import http.server
import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from hil import gates


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Fake(http.server.BaseHTTPRequestHandler):
    """A minimal OpenAI-compatible server on 127.0.0.1 whose first `drop` POSTs are cut
    off without an answer (a transport error seen by the client)."""

    drop = 0
    seen = 0

    def log_message(self, *a):
        pass

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "fake", "object": "model", "created": 0,
                                                        "owned_by": "t"}]}).encode()
        body = body if self.path.endswith("/models") else b""  # /health: an empty 200
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))  # of what is sent: httpx refuses a short body
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        self.rfile.read(int(self.headers["content-length"]))
        type(self).seen += 1
        if type(self).seen <= type(self).drop:
            self.connection.shutdown(socket.SHUT_RDWR)  # no status line: a transport error
            return
        body = json.dumps({"id": "c", "object": "text_completion", "created": 0, "model": "fake",
                           "choices": [{"index": 0, "text": " 42", "finish_reason": "length", "logprobs": None,
                                        "token_ids": [32, 52, 50]}],
                           "usage": {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def fake_server():
    handler = type("Handler", (_Fake,), {"drop": 0, "seen": 0})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}", handler
    srv.shutdown()
    srv.server_close()


def test_haystack_places_the_needle_at_its_depth():
    for depth in (0.0, 0.25, 0.5, 1.0):
        words = gates.haystack_prompt(400, "NEEDLE", depth).split("\n")[0].split(" ")
        assert words.index("NEEDLE") == round(depth * 400)
        assert words.count("NEEDLE") == 1 and len(words) == 401
    assert gates.haystack_prompt(100, "x", 0.5, seed=3) == gates.haystack_prompt(100, "x", 0.5, seed=3)
    with pytest.raises(ValueError, match="depth"):
        gates.haystack_prompt(10, "x", 1.5)


def test_haystack_answer_check_wants_the_whole_number():
    assert gates.haystack_answer_ok(" 70512", "70512")
    assert gates.haystack_answer_ok("The secret number is 70512.", "70512")
    assert not gates.haystack_answer_ok("705123", "70512")
    assert not gates.haystack_answer_ok("170512", "70512")
    assert not gates.haystack_answer_ok("I do not know", "70512")


def test_a_transport_error_is_retried_once_and_recorded_not_a_plain_pass(fake_server):
    url, handler = fake_server
    handler.drop = 1
    report = gates.GateReport("t", url)
    client = gates.GateClient(url, report, model="fake", timeout=10)
    a = client.complete("serial", gates.GateRequest("req-00", "hi", 3))
    assert a.text == " 42" and a.token_ids == (32, 52, 50)
    report.check("answer", True)
    assert report.passed and report.status() == "transport-retry"
    assert [r["request"] for r in report.transport_retries] == ["req-00"]
    assert json.loads(json.dumps(report.as_json()))["status"] == "transport-retry"


def test_a_second_transport_error_fails(fake_server):
    import openai

    url, handler = fake_server
    handler.drop = 2
    report = gates.GateReport("t", url)
    client = gates.GateClient(url, report, model="fake", timeout=10)
    with pytest.raises(openai.APIConnectionError):
        client.complete("serial", gates.GateRequest("req-00", "hi", 3))
    assert len(report.transport_retries) == 1


def test_readiness_fails_closed(fake_server):
    url, _ = fake_server
    ok = gates.readiness(gates.GateReport("r", url), url, "x\nQWEN36_SDPA_STREAMING engaged\n")
    assert ok.passed
    no_log = gates.readiness(gates.GateReport("r", url), url, None)
    assert not no_log.passed and "fail closed" in no_log.failures()
    no_banner = gates.readiness(gates.GateReport("r", url), url, "QWEN36_SDPA_STREAMING off\n")
    assert not no_banner.passed and "not in the server log" in no_banner.failures()
    dead = f"http://127.0.0.1:{_free_port()}"
    down = gates.readiness(gates.GateReport("r", dead), dead, "QWEN36_SDPA_STREAMING engaged")
    assert not down.passed and "/health answered None" in down.failures()


def test_wait_for_endpoint_gives_up_at_its_deadline_with_one_line():
    url = f"http://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    with pytest.raises(gates.EndpointDown) as exc:
        gates.wait_for_endpoint(url, deadline_s=1.5)
    assert time.monotonic() - t0 >= 1.5  # not before its deadline (how soon after: bench/bench_deadlines.py)
    assert "\n" not in str(exc.value) and url in str(exc.value)


def test_endpoint_that_does_not_answer_exits_non_zero_with_one_line(tmp_path):
    url = f"http://127.0.0.1:{_free_port()}"
    p = subprocess.run([sys.executable, "-m", "pytest", "tests/gates/test_gates.py", "-q", "-n", "0",
                        "-p", "no:cacheprovider", "-p", "no:faker", "--endpoint", url, "--endpoint-deadline", "2"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if f"endpoint {url} is not serving" in ln]
    assert len(lines) == 1, p.stdout + p.stderr  # how long it takes: bench/bench_deadlines.py


def test_answers_differ_by_token_ids_even_when_their_text_is_the_same():
    """Invalid UTF-8 bytes all decode to U+FFFD: the text alone would hide a wrong token."""
    a = gates.Answer("\ufffd", (200,))
    assert not a.same(gates.Answer("\ufffd", (201,)))
    assert a.same(gates.Answer("\ufffd", (200,)))
    assert a.same(gates.Answer("\ufffd", None))  # a server that reports no ids: text only
    assert not a.same(gates.Answer("x", (200,)))


def test_stage3_rate_counts_failed_requests_over_repeats_with_a_wilson_interval():
    from gate_seeds import stage3_rate

    from harness.base.stats import wilson

    reports = []
    for failed in (["req-11"], [], ["req-11", "req-16"]):
        r = gates.GateReport("stage3", "sim")
        r.check("concurrent-equals-serial", not failed, "", failed_requests=failed, requests=32, concurrency=16)
        r.check("determinism", True)
        reports.append(r)
    rate = stage3_rate(reports)
    assert (rate["repeats"], rate["failing_repeats"], rate["failed_requests"], rate["requests"]) == (3, 2, 3, 96)
    assert rate["rate"] == 3 / 96 and rate["wilson95"] == list(wilson(3, 96))


def test_the_wrong_answer_rate_counts_every_answer_check_and_nothing_else():
    from gate_seeds import in_process_rate, wrong_answer_rate

    from harness.base.stats import wilson

    r = gates.GateReport("stage3", "sim")
    r.check("concurrent-equals-serial", False, "req-11: expected a got b; req-16: expected c got d",
            failed_requests=["req-11", "req-16"], requests=32, concurrency=16)
    r.check("determinism", False, "req-24: expected e got f", repeats=2)
    r.check("batch-invariance", True)
    r.check("cold-vs-cached-prefill", False, "a cache miss")  # not an answer check
    clean = gates.GateReport("stage3", "sim")
    for name in ("concurrent-equals-serial", "determinism", "batch-invariance", "cold-vs-cached-prefill"):
        clean.check(name, True)
    got = wrong_answer_rate([r, clean])
    assert (got["wrong"], got["answers"]) == (3, 144) and got["wilson95"] == list(wilson(3, 144))
    assert 0 < in_process_rate("all") < in_process_rate("control") < 0.05
