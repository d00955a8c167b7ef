"""HTTP gates: a sim-backed `vllm serve` per arm (session-scoped, shared by the gate tests
of one xdist group), or the live server given with ``--endpoint URL``.

Sim servers bind 127.0.0.1 on a free port, are awaited with a deadline, are reaped at
session end, and a failing test gets the server's log tail attached.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from hil import gates

from gate_seeds import CONTROL_ENV, GATE_SEED

@dataclass
class Target:
    kind: str  # "sim" or "endpoint"
    url: str
    log_text: Callable[[], str] | None
    server: object = None

    def report(self, gate: str) -> gates.GateReport:
        return gates.GateReport(gate, "sim" if self.kind == "sim" else self.url)


@pytest.fixture(scope="session")
def endpoint(request) -> str | None:
    url = request.config.getoption("--endpoint")
    if url is None:
        return None
    try:
        gates.wait_for_endpoint(url, request.config.getoption("--endpoint-deadline"))
    except gates.EndpointDown as exc:
        pytest.exit(str(exc), returncode=2)
    return url


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory) -> str:
    from ttsim_vllm import modeldir

    return modeldir.write(str(tmp_path_factory.mktemp("ttsim-model")), "tiny")


@pytest.fixture(scope="session")
def sim_servers(tmp_path_factory, model_dir):
    """Start-once sim servers by arm ("treatment": production flags; "control": fixes off)."""
    from ttsim_vllm import server as S

    started: dict[str, S.Server] = {}

    def get(arm: str) -> S.Server:
        if arm not in started:
            env = {"TTSIM_SEED": str(GATE_SEED), "QWEN36_SDPA_STREAMING": "1",
                   **(CONTROL_ENV if arm == "control" else {})}
            log = tmp_path_factory.mktemp(f"server-{arm}") / "vllm-serve.log"
            try:
                started[arm] = S.start(model_dir, log, env=env)
            except S.ServerError as exc:
                pytest.fail(f"sim server ({arm}) did not start: {exc}", pytrace=False)
        return started[arm]

    yield get
    for s in started.values():
        s.stop()


@pytest.fixture(scope="session")
def target(endpoint, sim_servers, request) -> Target:
    if endpoint is not None:
        path = request.config.getoption("--server-log")
        return Target("endpoint", endpoint, (lambda: Path(path).read_text(errors="replace")) if path else None)
    s = sim_servers("treatment")
    return Target("sim", s.url, s.log_text, s)


@pytest.fixture
def report_path(request, tmp_path_factory):
    """Where a gate's JSON report goes: $TTSIM_RUNS_DIR/gates, else the session's tmp dir."""
    runs = os.environ.get("TTSIM_RUNS_DIR")
    base = Path(runs) / "gates" if runs else tmp_path_factory.getbasetemp() / "gates"

    def path(gate: str) -> Path:
        p = base / f"{gate}.json"
        request.node.user_properties.append(("gate_report", str(p)))
        return p

    return path


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed and call.when == "call":
        for name in ("target", "control_target"):
            t = item.funcargs.get(name) if hasattr(item, "funcargs") else None
            if t is not None and getattr(t, "server", None) is not None:
                report.sections.append((f"vllm serve log ({name}, tail)", t.server.log_tail(60)))
        for key, value in item.user_properties:
            if key == "gate_report":
                report.sections.append(("gate report", value))
    return report
