"""HTTP gates: a sim-backed `vllm serve` per arm (session-scoped, shared by the gate tests
of one file: --dist=loadfile keeps a file on one worker), or the live server given with ``--endpoint URL``.

Sim servers bind 127.0.0.1 on a free port, are awaited with a deadline, are reaped at
session end, and a failing test gets the server's log tail attached.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import served
from hil import gates

from gate_seeds import CONTROL_ENV, GATE_SEED

# The gate servers run production's configuration: the seed's swarm knobs (the worker's
# default), the plugin's phased steps (the platform's default) and, in the treatment, the
# fixes as production sets them (on by default; no candidate fix).

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
def model_dirs(tmp_path_factory):
    """The generated model directory of each sim model, written once per session."""
    from harness.engine import modeldir

    dirs: dict[str, str] = {}

    def get(model: str) -> str:
        if model not in dirs:
            dirs[model] = modeldir.write(str(tmp_path_factory.mktemp(f"model-{model}")), model)
        return dirs[model]

    return get


@pytest.fixture(scope="session")
def sim_servers(tmp_path_factory, model_dirs, pytestconfig):
    """Start-once sim servers by (model, arm); "treatment" = production's fixes (the defaults),
    "control" = production's fixes off, "legacy" = the treatment with QWEN36_SDPA_STREAMING=0
    (the model's legacy prefill: no banner). Reaped at session end."""
    from harness.vllm import server as S

    started: dict[tuple[str, str], S.Server] = {}

    def get(model: str, arm: str = "treatment") -> S.Server:
        key = (model, arm)
        if key not in started:
            env = {"TTSIM_SEED": str(GATE_SEED), "QWEN36_SDPA_STREAMING": "0" if arm == "legacy" else "1",
                   **(CONTROL_ENV if arm == "control" else {}), **_user_generator_env(pytestconfig)}
            log = tmp_path_factory.mktemp(f"server-{model}-{arm}") / "vllm-serve.log"
            try:
                started[key] = S.start(model_dirs(model), log, env=env)
            except S.ServerError as exc:
                pytest.fail(f"sim server ({model}, {arm}) did not start: {exc}", pytrace=False)
        return started[key]

    yield get
    for s in started.values():
        s.stop()


def _user_generator_env(config) -> dict[str, str]:
    """--generator: the served worker runs the session's generator too."""
    from fixtures.state import GENERATOR
    from harness.base.settings import generator_env

    spec = config.stash.get(GENERATOR, None)
    return generator_env(spec.text, spec.tt_metal) if spec is not None else {}


def _target(request, endpoint, sim_servers, model: str, arm: str = "treatment") -> gates.GateTarget:
    if endpoint is not None:
        path = request.config.getoption("--server-log")
        return gates.GateTarget("endpoint", endpoint, (lambda: Path(path).read_text(errors="replace")) if path else None)
    s = sim_servers(model, arm)
    return gates.GateTarget("sim", s.url, s.log_text, s)


@pytest.fixture(scope="session")
def target(endpoint, sim_servers, request) -> gates.GateTarget:
    """Readiness and stage 2: the TINY Qwen3.6-style hybrid (the model logs the streaming banner
    when it is built with QWEN36_SDPA_STREAMING=1), or the endpoint."""
    return _target(request, endpoint, sim_servers, "tiny")


@pytest.fixture(scope="session")
def stage3_target(endpoint, sim_servers, request) -> gates.GateTarget:
    """Stage 3 on the sim: the sweep model (the whole serving path, no transformer math; any
    wrong token or position changes its continuation). Measured over HTTP on this machine,
    stage 3 costs 2.1 s with it against 58 s with TINY (bench/bench_serve.py)."""
    return _target(request, endpoint, sim_servers, "markov")


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
        for name, t in getattr(item, "funcargs", {}).items():
            if isinstance(t, gates.GateTarget) and t.server is not None:
                report.sections.append((f"vllm serve log ({name}, tail)", t.server.log_tail(60)))
                replay = served.replay_commands(t.server.log_text())
                if replay:
                    report.sections.append((f"the served run ({name}): read it, replay it in process", replay))
        for key, value in item.user_properties:
            if key == "gate_report":
                report.sections.append(("gate report", value))
    return report
