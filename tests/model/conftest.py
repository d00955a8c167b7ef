import os

import pytest
import torch
from model_helpers import DEFAULT_MMAP_MAX, DEFAULT_TRIM_THRESHOLD, M_MMAP_MAX, M_TRIM_THRESHOLD, glibc


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


@pytest.fixture(scope="session", autouse=True)
def _reuse_freed_memory():
    """Large tensors from the heap, kept there when freed (glibc; elsewhere nothing changes).

    glibc maps every allocation above its mmap threshold afresh and unmaps it on free, so each
    large short-lived tensor of a long prefill (the legacy masks, their float32 reads and per-chip
    copies, score rows) is faulted in page by page: the 32k legacy prefill spent ~5 s of its ~19 s
    CPU faulting pages in (~1.5 s with this policy). Served from the heap and not trimmed, freed
    memory is reused as it is. Set for the rest of the session once a test here runs. No value
    changes: torch still aligns every buffer to 64 bytes (test_memory_policy.py compares bytes)."""
    libc = glibc()
    if libc is not None:
        libc.mallopt(M_MMAP_MAX, 0)
        libc.mallopt(M_TRIM_THRESHOLD, 2**31 - 1)
    yield
    if libc is not None:
        libc.mallopt(M_MMAP_MAX, DEFAULT_MMAP_MAX)
        libc.mallopt(M_TRIM_THRESHOLD, DEFAULT_TRIM_THRESHOLD)
        libc.malloc_trim(0)
