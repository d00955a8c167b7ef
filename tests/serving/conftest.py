import warnings

import pytest
import torch

import ttsim


@pytest.fixture(autouse=True)
def _quiet_serving():
    """Serving scenarios allocate while traces are live by design (prefill between decodes);
    ttnn logs that hazard, ttsim warns; here it is expected."""
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ttsim.TraceAllocationWarning)
        yield


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """One fork server for every test of a worker that needs one up, started at first use (it
    takes as long to start as a fresh command): (client environment, server log, socket). Real
    clients (`python -m fixtures.cli` with that environment) find it by its key; the log tells
    commands apart by argv, so a test gives its commands an argv of its own."""
    import fork_servers

    tmp = tmp_path_factory.mktemp("forkserver")
    with fork_servers.client_env(tmp) as env:
        log = tmp / "server.log"
        proc, sock = fork_servers.start(env, log)
        try:
            yield env, log, sock
        finally:
            proc.terminate()
            proc.wait(timeout=30)
