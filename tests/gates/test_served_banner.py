"""The readiness probe's banner comes from the served MODEL: with QWEN36_SDPA_STREAMING=1 the
model logs "QWEN36_SDPA_STREAMING engaged" into the server log and the probe passes; with 0 (or
unset) it takes the legacy path, logs nothing, and the probe fails closed, as production's does.

In process: the worker's log handler, the mesh and model built as ``init_device`` builds them,
the probe's verdict on what the handler wrote. Over HTTP: one real `vllm serve` started with
QWEN36_SDPA_STREAMING=0 (the sim servers of the other gates start with 1).
"""

from __future__ import annotations

import io
import logging

from harness.base.spec import RunSpec
import pytest

from hil import gates

from gate_seeds import GATE_SEED


def _served_log(monkeypatch, value: str | None) -> str:
    """What the worker's log handler writes while the served model is built (model tiny)."""
    from harness.system import System
    from harness.workloads import FaultKnobs
    from harness.vllm import worker

    if value is None:
        monkeypatch.delenv("QWEN36_SDPA_STREAMING", raising=False)
    else:
        monkeypatch.setenv("QWEN36_SDPA_STREAMING", value)
    handler = next(h for h in worker.log.handlers if type(h) is logging.StreamHandler)  # not pytest's capture
    buf = io.StringIO()
    old = handler.setStream(buf)
    try:
        System(RunSpec(seed=GATE_SEED, model="tiny"), FaultKnobs()).close()
    finally:
        handler.setStream(old)
    return buf.getvalue()


@pytest.mark.parametrize("value, engaged", [("1", True), ("0", False), (None, False)], ids=["1", "0", "unset"])
def test_readiness_verdict_on_the_served_models_log(monkeypatch, value, engaged):
    log_text = _served_log(monkeypatch, value)
    assert log_text.count(gates.BANNER) == (1 if engaged else 0), log_text
    monkeypatch.setattr(gates, "health", lambda url, timeout=5.0: 200)  # only the banner is judged here
    r = gates.readiness(gates.GateReport("readiness", "http://sim"), "http://sim", log_text)
    assert r.passed is engaged, r.failures()
    if not engaged:
        assert "'QWEN36_SDPA_STREAMING engaged' not in the server log" in r.failures()


def test_a_server_started_with_streaming_off_fails_readiness(endpoint, sim_servers):
    """`bin/ttsim serve` with QWEN36_SDPA_STREAMING=0: /health is 200, the model runs the legacy
    path, and the probe fails on the missing banner."""
    if endpoint is not None:
        pytest.skip("a sim server started with streaming off; not the live endpoint")
    s = sim_servers("tiny", "legacy")
    log_text = s.log_text()
    assert "ttsim worker ready: legacy SDPA" in log_text, log_text[-2000:]
    r = gates.readiness(gates.GateReport("readiness-legacy", s.url), s.url, log_text)
    assert [c["check"] for c in r.checks if c["status"] == "fail"] == ["streaming-banner"], r.failures()


def test_the_workers_log_lines_outlive_the_stream_it_was_first_imported_under():
    """The worker module may first be imported under a caller's capture (an in-process
    `ttsim serve-replay` under pytest's capsys); its lines must still reach the process's stderr
    once that capture is closed, not raise "I/O operation on closed file"."""
    import subprocess
    import sys
    from pathlib import Path

    code = ("import io, sys\n"
            "sys.stderr = io.StringIO()\n"
            "from harness.vllm import worker\n"
            "sys.stderr.close(); sys.stderr = sys.__stderr__\n"
            "worker.log.info('after the capture closed')\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[2], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "(ttsim) INFO after the capture closed" in p.stderr, p.stderr[-2000:]
    assert "Logging error" not in p.stderr, p.stderr[-2000:]
