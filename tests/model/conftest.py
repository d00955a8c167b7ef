import os

import pytest
import torch


@pytest.fixture(autouse=True)
def _torch_single_thread():
    """ttsim's per-op math is small: torch's intra-op threads only add contention (on a loaded
    2-core runner a 2-thread matmul was measured ~30x slower than a 1-thread one)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def reference_cache_dir(tmp_path_factory):
    """Where model_helpers.cached_reference_last_logits keeps float64 references: this session's
    temporary directory, shared by its xdist workers (each worker's basetemp is a child of it)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    path = root / "reference-cache"
    path.mkdir(exist_ok=True)
    return path
