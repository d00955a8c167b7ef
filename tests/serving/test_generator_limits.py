"""What the suite asks of a generator beyond answering: every call returns within the deadline
(``--call-deadline``; harness/deadline.py), and every output has a shape the plugin unpacks
(model/protocol.py's ``tokens_of``). Either breach ends the command in one line naming the call,
exit 2, with nothing written; ``ttsim serve`` refuses a misshapen generator before vLLM starts."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from harness.commands import cli
from harness.deadline import CallDeadline, CallDeadlineExceeded

HANGS = """
import time
from model.generator import Generator


class Hangs(Generator):
    \"\"\"Ours, but its seventh decode does not return (for a minute: then it says it was not
    interrupted, so a broken deadline fails the test rather than hanging it).\"\"\"

    def decode_forward(self, *args, **kw):
        self._calls = getattr(self, "_calls", 0) + 1
        t0 = time.monotonic()
        while self._calls == 7:
            time.sleep(0.05)
            if time.monotonic() - t0 > 60:
                raise RuntimeError("the deadline did not interrupt me")
        return super().decode_forward(*args, **kw)
"""

SQUASHED = """
import torch
from model.generator import Generator


class Squashed(Generator):
    \"\"\"Ours, but its tokens come back as a [3, 7] tensor whatever the batch: 21 elements, enough
    for 8 rows by count.\"\"\"

    def process_decode_output_host(self, out, is_tokens=True):
        return torch.zeros(3, 7, dtype=torch.int64)
"""


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("TTSIM_FORKSERVER", "0")
    (tmp_path / "hangs.py").write_text(HANGS)
    (tmp_path / "squashed.py").write_text(SQUASHED)
    (tmp_path / "out").mkdir()
    return tmp_path


def _main(argv, capsys) -> tuple[int, str, str]:
    import torch

    threads = torch.get_num_threads()
    try:
        code = cli.main(argv)
    finally:
        torch.set_num_threads(threads)
    out, err = capsys.readouterr()
    return code, out, err


def test_a_deadline_interrupts_a_call_that_never_returns_and_leaves_the_timer_as_it_was():
    before = signal.getsignal(signal.SIGALRM)
    deadline = CallDeadline(0.2, lambda call, step: f"{call} at step {step} hung")
    t0 = time.monotonic()
    with pytest.raises(CallDeadlineExceeded, match="^decode_forward at step 4 hung$"):
        with deadline("decode_forward", 4):
            while time.monotonic() - t0 < 60:  # bounded: a broken deadline fails the test, not hangs it
                time.sleep(0.01)
    assert signal.getsignal(signal.SIGALRM) is before and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    with deadline("prefill_forward", 0):  # a call that returns in time: nothing raised, nothing left armed
        pass
    assert signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)


@pytest.mark.parametrize("seconds", [0, -1, float("nan")])
def test_a_deadline_that_is_not_positive_is_refused(seconds, workspace, capsys):
    with pytest.raises(ValueError, match="--call-deadline must be > 0 seconds"):
        CallDeadline(seconds, lambda c, s: "")
    code, _, err = _main(["arms", "--seeds", "1", "--call-deadline", str(seconds)], capsys)
    assert code == 2 and err.strip().splitlines() == [f"ttsim: error: --call-deadline must be > 0 seconds, got "
                                                      f"{seconds:g}"]


@pytest.mark.needs_fault_injection
@pytest.mark.parametrize("command", [["arms", "--seeds", "1", "--workers", "1", "--arms", "control"],
                                     ["replay", "--arm", "control", "--seed", "0"]], ids=["arms", "replay"])
def test_a_hanging_generator_ends_in_one_line_within_the_deadline(command, workspace, capsys):
    out = workspace / "out"
    argv = [*command, "--generator", f"{workspace / 'hangs.py'}:Hangs", "--call-deadline", "1",
            "--record-merges", str(out / "trace.jsonl")] + (["--json", str(out / "r.json")] if command[0] == "arms" else [])
    code, _, err = _main(argv, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"ttsim: error: the generator {workspace / 'hangs.py'}:Hangs did not return from "
                          f"decode_forward within 1 s (--call-deadline) at engine step "), err
    assert "(seed 0, arm control); replay: bin/ttsim replay --arm control --seed 0 --generator " in err
    assert list(out.iterdir()) == [] and not (workspace / "runs").exists()  # nothing written


@pytest.mark.needs_fault_injection
def test_a_misshapen_output_ends_a_sweep_in_one_line_naming_the_method(workspace, capsys):
    out = workspace / "out"
    code, _, err = _main(["arms", "--seeds", "1", "--workers", "1", "--arms", "control", "--json",
                          str(out / "r.json"), "--generator", f"{workspace / 'squashed.py'}:Squashed"], capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert ("Squashed.process_decode_output_host returned a torch.int64 tensor of shape (3, 7); sampled tokens are "
            "integer ids of shape [B] or [B, 1]") in err
    assert list(out.iterdir()) == []


def test_serve_refuses_a_misshapen_generator_before_vllm_starts(workspace, capsys, monkeypatch):
    from harness.vllm import server

    monkeypatch.setattr(server, "serve_command", lambda *a, **k: pytest.fail("vLLM would have started"))
    code, _, err = _main(["serve", "--model", "markov", "--port", str(server.free_port()), "--generator",
                          f"{workspace / 'squashed.py'}:Squashed"], capsys)
    assert code == 2 and err.strip().splitlines() == [
        "ttsim: error: Squashed.process_decode_output_host returned a torch.int64 tensor of shape (3, 7); sampled "
        "tokens are integer ids of shape [B] or [B, 1]"]


def test_the_served_worker_refuses_a_misshapen_generator_at_start(workspace, monkeypatch):
    """`vllm serve` with TTSIM_GENERATOR set directly (no `ttsim serve` in front): the worker probes
    the generator before its mesh opens, and refuses to start naming the call."""
    from harness.vllm.rerun import served_config
    from harness.vllm.worker import TtsimWorker
    from model.protocol import GeneratorProtocolError

    monkeypatch.setenv("TTSIM_GENERATOR", f"{workspace / 'squashed.py'}:Squashed")
    worker = TtsimWorker(served_config("markov", {}, max_len=256, prefix_caching=False), local_rank=0, rank=0,
                         distributed_init_method="", is_driver_worker=True)
    with pytest.raises(GeneratorProtocolError, match=r"shape \(3, 7\)"):
        worker.init_device()
    worker.shutdown()
    assert not Path(workspace / "runs").exists()
