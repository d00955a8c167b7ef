"""The main job's command line: bad input exits 2 with a clear message; output is deterministic."""

import json
import os
import subprocess
import sys

import pytest


def _cli(*args, env=None, check=False, runs_dir=None):
    env = {**os.environ, **(env or {})}
    if runs_dir is not None:  # keep test runs out of the repository's benchmark records
        env["TTSIM_RUNS_DIR"] = str(runs_dir)
    return subprocess.run([sys.executable, "-m", "harness.commands.cli", *args], capture_output=True, text=True,
                          env=env, check=check)


@pytest.mark.parametrize(
    "args, message",
    [
        (["arms", "--arms", "bogus", "--seeds", "2"], "unknown arm(s) bogus"),
        (["arms", "--seeds", "0"], "--seeds must be > 0"),
        (["arms", "--seeds", "-3"], "--seeds must be > 0"),
        (["arms", "--seeds", "2", "--json", "/nonexistent-dir/out.json"], "directory /nonexistent-dir does not exist"),
        (["replay", "--arm", "bogus", "--seed", "1"], "unknown arm 'bogus'"),
        (["replay", "--arm", "all", "--seed", "x"], "seed must be an integer"),
        (["serve", "--port", "99999"], "--port must be in 1..65535, got 99999"),
        (["serve", "--port", "0"], "--port must be in 1..65535, got 0"),
        (["serve", "--port", "-5"], "--port must be in 1..65535, got -5"),
    ],
)
def test_bad_input_exits_2_with_a_clear_message(args, message):
    out = _cli(*args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    if args[0] == "serve":  # one line, and nothing started that could print more (argparse's own errors
        assert out.stderr.count("\n") == 1, out.stderr  # print the usage too)


def test_serve_on_a_port_in_use_exits_2_in_one_line_before_vllm_starts():
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = _cli("serve", "--port", str(port))
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and f"cannot bind 127.0.0.1:{port}" in out.stderr, out.stderr
    assert out.stdout == ""  # `ttsim serve: model ... on ...` is printed just before vLLM starts


@pytest.mark.needs_fault_injection
def test_arms_json_is_identical_across_processes_and_hash_seeds(tmp_path):
    """Two processes, different PYTHONHASHSEED, one and two sweep workers: the same bytes."""
    paths = []
    for i, (hashseed, workers) in enumerate((("1", "1"), ("77", "2"))):
        path = tmp_path / f"arms{i}.json"
        _cli("arms", "--seeds", "3", "--workers", workers, "--json", str(path), env={"PYTHONHASHSEED": hashseed},
             check=True, runs_dir=tmp_path)
        paths.append(path)
    a, b = (p.read_bytes() for p in paths)
    assert a == b
    report = json.loads(a)
    for arm, summary in report["arms"].items():
        assert {"runs", "requests", "failed_requests", "failing_seeds"} <= set(summary), arm
        assert summary["runs"] == 3 and summary["requests"] == 3 * 32


@pytest.mark.needs_fault_injection
def test_replay_prints_the_merge_trace_and_fails_on_a_failing_seed(capsys):
    """In-process (the command's body is under test; bin/ttsim as a process is tested in
    test_cli_install.py): the replay sets torch's threads for itself, put back here."""
    import torch

    from harness.commands.cli import main

    threads = torch.get_num_threads()
    try:
        assert main(["replay", "--arm", "control", "--seed", "29"]) == 1
    finally:
        torch.set_num_threads(threads)
    out = capsys.readouterr().out
    assert "merge bucket" in out and "slot-reuse" in out
    assert "<-- kept a token/position the host disagrees with" in out
