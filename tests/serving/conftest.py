import warnings

import pytest
import torch

import ttsim

import fork_servers


@pytest.fixture(autouse=True)
def _quiet_serving():
    """Serving scenarios allocate while traces are live by design (prefill between decodes);
    ttnn logs that hazard, ttsim warns; here it is expected."""
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ttsim.TraceAllocationWarning)
        yield


@pytest.fixture(scope="session")
def _fork_server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("forkserver")
    with fork_servers.client_env(tmp) as env:
        log = tmp / "server.log"
        server = fork_servers.Lazy(lambda: fork_servers.start(env, log, idle_s=600.0))
        try:
            yield env, log, server
        finally:
            server.stop()


@pytest.fixture
def served(_fork_server):
    """A fork server up for this test, shared by a worker's tests (started at first use: it takes
    as long to start as a fresh command; again if it idled out): (client environment, server log,
    socket). Real clients (`python -m harness.commands.cli` with that environment) find it by its key; the
    log tells commands apart by argv, so a test gives its commands an argv of its own."""
    env, log, server = _fork_server
    return env, log, server.up()
