"""The harness's seed (harness/base/seeds.py): the streams a workload draws on either backend, the
seed's parsing and its default, read from TTSIM_SEED in one place (harness/base/settings.py)."""

from __future__ import annotations

import pytest

from harness.base import seeds
from harness.base.settings import read_seed

#: draws recorded from ttsim.seed.stream before the workload's streams moved to harness.base.seeds:
#: a seed names the same workload, knobs, bucket churn and scratch allocations as it did
RECORDED = [
    (("workload", "stage3"), 0, [918874763, 2940210208, 907969957, 1874004157]),
    (("knobs",), 7, [3687394099, 1428988737]),
    (("bucket-churn",), 123, [2152687329, 3103771817]),
    (("scratch",), 2**40, [2917009608, 3189722212]),
]


@pytest.mark.parametrize("names, seed, draws", RECORDED)
def test_a_stream_draws_what_it_drew_before(names, seed, draws):
    assert seeds.stream(*names, seed=seed).integers(0, 2**32, size=len(draws)).tolist() == draws


@pytest.mark.parametrize("names", [("workload", "stage3"), ("knobs",), ("device", 3, "queue"), ("a/b", 0)])
@pytest.mark.parametrize("seed", [0, 1, 20260531, 2**63])
def test_the_workload_streams_equal_ttsims_byte_for_byte(names, seed):
    """ttsim keeps its own derivation (it imports nothing of ours); the two must not drift, so
    one seed still names the device's bytes and the workload alike."""
    from ttsim import seed as ttsim_seed

    ours, theirs = seeds.stream(*names, seed=seed), ttsim_seed.stream(*names, seed=seed)
    assert ours.bytes(64) == theirs.bytes(64)


def test_a_stream_depends_on_every_name_and_the_seed():
    first = seeds.stream("workload", "stage3", seed=0).bytes(16)
    assert first == seeds.stream("workload", "stage3", seed=0).bytes(16)
    assert first != seeds.stream("workload", "stage4", seed=0).bytes(16)
    assert first != seeds.stream("workload", seed=0).bytes(16)
    assert first != seeds.stream("workload", "stage3", seed=1).bytes(16)


def test_the_default_seed_is_ttsims():
    import ttsim

    assert seeds.DEFAULT_SEED == ttsim.DEFAULT_SEED


@pytest.mark.parametrize("env, want", [({}, seeds.DEFAULT_SEED), ({"TTSIM_SEED": ""}, seeds.DEFAULT_SEED),
                                       ({"TTSIM_SEED": "29"}, 29), ({"TTSIM_SEED": "0x10"}, 16),
                                       ({"TTSIM_SEED": "0"}, 0)])
def test_ttsim_seed_is_read_once_with_its_default(env, want):
    assert read_seed(env) == want


@pytest.mark.parametrize("value, message", [("-1", "TTSIM_SEED must be >= 0, got -1"),
                                            ("abc", "TTSIM_SEED must be an integer, got 'abc'"),
                                            ("1.5", "TTSIM_SEED must be an integer, got '1.5'")])
def test_a_malformed_ttsim_seed_is_named(value, message):
    with pytest.raises(ValueError) as info:
        read_seed({"TTSIM_SEED": value})
    assert str(info.value) == message


def test_the_process_environment_is_the_default(monkeypatch):
    monkeypatch.setenv("TTSIM_SEED", "77")
    assert read_seed() == 77


def test_a_pytest_session_refuses_a_malformed_ttsim_seed_in_one_line(tmp_path):
    import os
    import subprocess
    import sys

    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    env = {**os.environ, "TTSIM_SEED": "abc"}
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:faker",
                          str(tmp_path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 4 and out.stderr.strip() == "ERROR: TTSIM_SEED must be an integer, got 'abc'", \
        out.stdout[-2000:] + out.stderr[-2000:]
