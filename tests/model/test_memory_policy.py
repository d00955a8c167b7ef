"""The test session's allocation policy (conftest._reuse_freed_memory): large tensors come from
glibc's heap and freed memory is kept for reuse instead of being unmapped and faulted in again."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from model_helpers import glibc

REPO = Path(__file__).resolve().parents[2]
BIG = 64 << 20  # bytes: twice glibc's largest mmap threshold

pytestmark = pytest.mark.skipif(glibc() is None, reason="the policy is glibc's mallopt")

_FAULTS = textwrap.dedent(
    """
    import resource, torch
    def touched(n):
        t = torch.empty(n // 4, dtype=torch.float32)
        t.fill_(1.0)
        return t
    first = touched(%d)
    del first
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    second = touched(%d)
    result = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(result)
    """
)
SECOND = 48 << 20  # smaller than the first: it fits in the memory the first one left


def test_a_tensor_allocated_after_a_larger_one_was_freed_faults_no_page_in():
    """Under the policy, 48 MiB allocated after freeing 64 MiB reuse its resident pages (almost no
    page fault); a fresh interpreter with glibc's default policy faults in every page again."""
    pages = SECOND // resource.getpagesize()
    ns: dict = {}
    exec(compile(_FAULTS % (BIG, SECOND), "<faults>", "exec"), ns)
    assert ns["result"] < pages // 10
    res = subprocess.run([sys.executable, "-c", _FAULTS % (BIG, SECOND)], capture_output=True, text=True,
                         timeout=120, env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert res.returncode == 0, res.stderr
    assert int(res.stdout.split()[-1]) > pages // 2  # negative control: the default unmaps and refaults


_KERNELS = textwrap.dedent(
    """
    import sys, torch
    from ttsim.kernels.attention import sdpa_legacy, sdpa_streaming
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 4, 300, 32, generator=g).to(torch.bfloat16)
    k = torch.randn(1, 2, 9000, 32, generator=g).to(torch.bfloat16)
    v = torch.randn(1, 2, 9000, 32, generator=g).to(torch.bfloat16)
    kw = dict(scale=None, is_causal=True, q_offset=8700, q_chunk_size=256, k_chunk_size=256)
    torch.save([sdpa_legacy(q, k, v, **kw), sdpa_streaming(q, k, v, **kw)], sys.argv[1])
    """
)


def test_kernel_bytes_under_the_policy_are_the_default_policys(tmp_path):
    """Where memory comes from changes no value: the kernels (score rows of 36 MiB, above every
    mmap threshold) give here, under the policy, the bytes a default-policy interpreter gives."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    res = subprocess.run([sys.executable, "-c", _KERNELS, str(tmp_path / "default.pt")], capture_output=True,
                         text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr
    ns: dict = {"__name__": "kernels"}
    sys_argv = sys.argv
    sys.argv = ["-", str(tmp_path / "policy.pt")]
    try:
        exec(compile(_KERNELS, "<kernels>", "exec"), ns)
    finally:
        sys.argv = sys_argv
    for here, there in zip(torch.load(tmp_path / "policy.pt"), torch.load(tmp_path / "default.pt")):
        assert torch.equal(here.view(torch.int32), there.view(torch.int32))
