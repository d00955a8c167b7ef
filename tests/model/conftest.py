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
