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


class _ForkServer:
    """A worker's fork server for real clients, (re)started when a test asks for it: a server
    stops after IDLE_S without a command, and a worker's tests that use it may be far apart."""

    IDLE_S = 600.0

    def __init__(self, env: dict, log):
        self.env, self.log = env, log
        self.proc = self.sock = None

    def up(self) -> tuple:
        import fork_servers

        if self.proc is None or self.proc.poll() is not None:
            self.proc, self.sock = fork_servers.start(self.env, self.log, idle_s=self.IDLE_S)
        return self.env, self.log, self.sock

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="session")
def _fork_server(tmp_path_factory):
    import fork_servers

    tmp = tmp_path_factory.mktemp("forkserver")
    with fork_servers.client_env(tmp) as env:
        server = _ForkServer(env, tmp / "server.log")
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture
def served(_fork_server):
    """A fork server up for this test, shared by a worker's tests (started at first use: it takes
    as long to start as a fresh command): (client environment, server log, socket). Real clients
    (`python -m fixtures.cli` with that environment) find it by its key; the log tells commands
    apart by argv, so a test gives its commands an argv of its own."""
    return _fork_server.up()
