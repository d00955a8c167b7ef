"""The vLLM plugin's pieces that need no server: activation, the start-up environment, the
generated model directory and its byte-level tokenizer, and a refused start."""

from __future__ import annotations

import json

import pytest

from harness.engine import modeldir
from harness.vllm import register_platform
from harness.base.settings import read_start_env


def test_platform_activates_only_when_asked(monkeypatch):
    monkeypatch.delenv("TTSIM_VLLM_PLATFORM", raising=False)
    assert register_platform() is None  # the in-process sweeps keep vLLM's unspecified platform
    monkeypatch.setenv("TTSIM_VLLM_PLATFORM", "1")
    assert register_platform() == "harness.vllm.platform.TtsimPlatform"


@pytest.mark.parametrize("var,value", [("QWEN36_PREFILLED_SLOTS_FIX", "yes"), ("QWEN36_MERGE_BATCH_GUARD", "2"),
                                       ("QWEN36_POSITION_CLAMP", ""), ("QWEN36_SDPA_STREAMING", "on"),
                                       ("TTSIM_SEED", "-1"), ("TTSIM_SEED", "abc")])
def test_a_bad_start_variable_is_refused_by_name(var, value):
    with pytest.raises(ValueError, match=var):
        read_start_env({var: value})


def test_start_env_defaults_are_production():
    flags, streaming, seed = read_start_env({"TTSIM_SEED": "29"})
    assert (flags.prefilled_slots_fix, flags.merge_batch_guard, flags.position_clamp) == (True, True, True)
    assert not streaming and seed == 29
    flags, streaming, _ = read_start_env({"QWEN36_PREFILLED_SLOTS_FIX": "0", "QWEN36_SDPA_STREAMING": "1"})
    assert not flags.prefilled_slots_fix and streaming


def test_model_dir_tokenizer_is_byte_level_and_template_renders_tools(tmp_path):
    from transformers import AutoTokenizer

    path = modeldir.write(str(tmp_path / "m"), "tiny")
    assert json.loads((tmp_path / "m" / "config.json").read_text())["ttsim_model"] == "tiny"
    tok = AutoTokenizer.from_pretrained(path)
    text = "naïve <tool_call>{\"a\": 1}</tool_call> \x00\xff"
    assert tok.encode(text) == list(text.encode("utf-8"))  # token id = UTF-8 byte, no BOS
    assert tok.decode(list(text.encode("utf-8"))) == text
    rendered = tok.apply_chat_template([{"role": "user", "content": "weather?"}], tokenize=False,
                                       add_generation_prompt=True,
                                       tools=[{"type": "function", "function": {"name": "get_weather"}}])
    assert "get_weather" in rendered and "<tool_call>" in rendered
    assert rendered.endswith("user: weather?\nassistant:")


def test_unknown_model_dir_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="not a ttsim model directory"):
        modeldir.read_model(str(tmp_path))
    (tmp_path / "config.json").write_text(json.dumps({"ttsim_model": "llama-70b"}))
    with pytest.raises(ValueError, match="ttsim_model must be one of"):
        modeldir.read_model(str(tmp_path))
    with pytest.raises(ValueError, match="unknown ttsim model"):
        modeldir.write(str(tmp_path / "x"), "huge")


def test_cli_serve_refuses_bad_input_in_one_line(tmp_path, monkeypatch, capsys):
    from harness.commands.cli import main

    assert main(["serve", "--model-dir", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["serve", "--model-dir", str(tmp_path)]) == 2
    assert "not a ttsim model directory" in capsys.readouterr().err
    monkeypatch.setenv("QWEN36_MERGE_BATCH_GUARD", "maybe")
    assert main(["serve"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "QWEN36_MERGE_BATCH_GUARD must be 0 or 1" in err


def test_the_worker_refuses_to_start_on_a_bad_flag_naming_it(monkeypatch):
    """The worker itself (what `vllm serve` runs at engine start), not the CLI's pre-check:
    it reads the flags before opening the device and refuses, naming the variable. (A full
    `vllm serve` refusing costs a server start-up, ~25 s here; this is the same call.)"""
    from harness.vllm.worker import TtsimWorker

    worker = object.__new__(TtsimWorker)  # init_device reads the env before any vLLM config
    monkeypatch.setenv("QWEN36_MERGE_BATCH_GUARD", "maybe")
    with pytest.raises(ValueError, match="QWEN36_MERGE_BATCH_GUARD must be 0 or 1, got 'maybe'"):
        worker.init_device()
    assert not hasattr(worker, "system")  # no device was opened


def test_requests_the_device_cannot_serve_are_client_errors_naming_the_parameter():
    from vllm.exceptions import VLLMValidationError
    from vllm.sampling_params import SamplingParams

    from harness.vllm.platform import TtsimPlatform

    TtsimPlatform.validate_request(None, SamplingParams(temperature=0.0, max_tokens=4))
    with pytest.raises(VLLMValidationError) as exc:
        TtsimPlatform.validate_request(None, SamplingParams(temperature=0.7, max_tokens=4))
    assert exc.value.parameter == "temperature" and "greedily" in str(exc.value)
    with pytest.raises(VLLMValidationError) as exc:
        TtsimPlatform.validate_request(None, SamplingParams(temperature=0.0, logprobs=2))
    assert exc.value.parameter == "logprobs"


@pytest.fixture
def no_vllm(monkeypatch):
    """Fails the test if `bin/ttsim serve` gets as far as starting vLLM."""
    from hil import lifeline

    def refuse(cmd, **kwargs):
        raise AssertionError(f"vLLM was started: {cmd}")

    monkeypatch.setattr(lifeline, "spawn", refuse)


def _one_line_exit_2(capsys, argv: list[str]) -> str:
    from harness.commands.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ttsim: error: "), err
    return err


@pytest.mark.parametrize("port", [99999, 65536, 0, -1])
def test_cli_serve_refuses_an_out_of_range_port_before_vllm_starts(port, no_vllm, capsys):
    assert f"--port must be in 1..65535, got {port}" in _one_line_exit_2(capsys, ["serve", "--port", str(port)])


def test_cli_serve_refuses_a_port_in_use_before_vllm_starts(no_vllm, capsys):
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        err = _one_line_exit_2(capsys, ["serve", "--port", str(port)])
    assert f"--port {port}: cannot bind 127.0.0.1:{port}" in err and "in use" in err


def test_cli_serve_refuses_an_unwritable_model_directory_before_vllm_starts(tmp_path, monkeypatch, no_vllm, capsys):
    """The generated model directory goes under the temp dir; one that cannot be written (here
    under a regular file: as root, permission bits would not stop the write) is refused."""
    import tempfile

    (tmp_path / "a-file").write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "a-file" / "tmp"))
    from harness.vllm.server import free_port

    err = _one_line_exit_2(capsys, ["serve", "--port", str(free_port())])
    assert f"cannot write the model directory under {tmp_path / 'a-file' / 'tmp'}" in err
