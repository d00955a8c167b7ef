"""`ttsim arms --executor ray`: an arms sweep's per-seed jobs as Ray tasks.

By default each sweep starts a private one-node Ray and always shuts it down: every server
bound to 127.0.0.1, usage stats off, token auth with a token that lives in this process's
environment only (nothing written to ~/.ray). ``address`` joins an existing cluster instead
(`--ray-address`); an exported RAY_ADDRESS is ignored, so a shell variable never sends a
sweep to a cluster nobody asked for.
"""

from __future__ import annotations

import contextlib
import importlib.util
import ipaddress
import logging
import secrets
from collections.abc import Callable, Iterable, Iterator

from harness.base.settings import environ

INSTALL_HINT = "pip install 'ttsim[ray]' (in a checkout: pip install -e '.[ray]'; bin/setup installs it)"

# Read by Ray when it is imported, so set before `import ray`:
_LOCAL_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",  # no usage report leaves the machine
    # Ray's single-node mode: keep 127.0.0.1 as the node address (on Linux Ray otherwise swaps in
    # the routable address and its servers listen on every interface)
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    # explicit, so Ray neither warns nor writes a token file to ~/.ray
    "RAY_AUTH_MODE": "token",
}
_token: str | None = None  # one per process: Ray's token loader caches the first it reads


class RayUnavailable(RuntimeError):
    """Ray is not installed (or does not import); the message says how to install it."""


def check_installed() -> None:
    """Refuse before the sweep, without importing Ray (importing it early would fix its address mode)."""
    if importlib.util.find_spec("ray") is None:
        raise RayUnavailable(f"--executor ray needs Ray: {INSTALL_HINT}")


class RayExecutor:
    """One Ray task per job (harness.sweep.executor.Executor)."""

    def __init__(self, num_cpus: int, address: str | None = None):
        self.num_cpus = num_cpus
        self.address = address

    def imap_unordered(self, fn: Callable, jobs: Iterable) -> Iterator:
        return imap_unordered(fn, jobs, self.num_cpus, self.address)


def imap_unordered(fn: Callable, jobs: Iterable, num_cpus: int, address: str | None = None) -> Iterator:
    """``fn(job)`` for every job, each yielded as soon as its Ray task finishes (completion order:
    the caller orders the results). Ray runs for the duration of the iteration only."""
    with _session(num_cpus, address) as ray:
        # a seed's job is deterministic, so a retry would fail the same way; a re-run would also
        # append its merges to a --record-merges trace twice
        task = ray.remote(max_retries=0)(fn)
        pending = [task.remote(job) for job in jobs]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])


@contextlib.contextmanager
def _session(num_cpus: int, address: str | None):
    local = address is None
    env = {**_LOCAL_ENV, "RAY_AUTH_TOKEN": _process_token()} if local else {"RAY_USAGE_STATS_ENABLED": "0"}
    with environ(env):
        ray = _import_ray()
        if local:
            _check_loopback(ray)
        try:
            if local:
                # address="local": a new private Ray even when RAY_ADDRESS is set; its raylet and
                # workers inherit this environment (PYTHONPATH, TTSIM_*)
                ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                         _node_ip_address="127.0.0.1", log_to_driver=False, logging_level=logging.WARNING)
            else:
                ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
            # task errors come back through ray.get with the worker's traceback; worker output
            # stays in the session's log folder instead of breaking the progress line
            yield ray
        finally:
            ray.shutdown()  # a private Ray's processes end here; a joined cluster is only left


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise RayUnavailable(f"--executor ray needs Ray: {INSTALL_HINT} (import ray: {exc})") from None
    return ray


def _check_loopback(ray) -> None:
    """Ray reads its address mode once, on import: if something imported it before this sweep,
    its local node would listen on the machine's routable address. Refuse rather than expose it."""
    ip = ray.util.get_node_ip_address()
    if not ipaddress.ip_address(ip).is_loopback:
        raise RuntimeError(f"Ray was imported before the sweep could confine it to 127.0.0.1 (node address "
                           f"{ip}); run the sweep in a fresh process or set RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 "
                           f"before importing ray")


def _process_token() -> str:
    global _token
    if _token is None:
        _token = secrets.token_hex(32)
    return _token
