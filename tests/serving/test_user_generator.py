"""The user's generator under the suite: the loader, the protocol check, and the proof that a
regression in a user's generator fails the pinned seeds (tests/generators/qwen36_style.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ttsim
from harness import loader, scenario
from harness.base.spec import GeneratorSpecError, RunSpec, parse_generator
from harness.system import System
from harness.workloads import FaultKnobs, stage3
from model.generator import Generator
from model.protocol import REQUIRED, GeneratorProtocolError, missing_methods

ROOT = Path(__file__).resolve().parents[2]
STYLE = ROOT / "tests" / "generators" / "qwen36_style.py"


def test_our_generator_speaks_the_protocol():
    assert missing_methods(Generator) == []
    assert REQUIRED == ("warmup_model_prefill", "warmup_model_decode", "prefill_forward", "decode_forward")
    system = System(RunSpec(seed=0), FaultKnobs())
    try:
        gen = system.generator(flags=scenario.ARMS["all"])
        assert missing_methods(gen) == [] and callable(gen.read_decode_output)
    finally:
        system.close()


@pytest.mark.parametrize("text, message", [
    ("no.such.module:X", "no module named 'no.such.module'"),
    ("nocolon", "must look like MODULE:ATTR"),
    (":X", "must look like MODULE:ATTR"),
    (f"{STYLE}:Nope", "has no attribute 'Nope'"),
    (f"{STYLE}:NotAGenerator", "no method warmup_model_decode(enable_trace, kv_cache, max_batch_size, num_blocks, "
                               "can_sample_on_device); no method decode_forward(tokens, page_table, kv_cache"),
    ("/no/such/file.py:G", "no file /no/such/file.py"),
])
def test_a_bad_generator_is_refused_in_one_line(text, message):
    with pytest.raises(GeneratorSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        loader.load(parse_generator(text), ttsim)


def test_a_factory_whose_product_lacks_a_method_is_named_when_built(tmp_path):
    (tmp_path / "half.py").write_text("def make(model, tt, mesh, **kw):\n    return object()\n")
    system = System(RunSpec(seed=0, generator=parse_generator(f"{tmp_path / 'half.py'}:make")), FaultKnobs())
    try:
        with pytest.raises(GeneratorProtocolError, match="no method prefill_forward"):
            system.generator(flags=scenario.ARMS["all"])
    finally:
        system.close()


def test_import_ttnn_in_the_users_module_is_the_backend_in_use():
    with loader.loaded(parse_generator(f"{STYLE}:Qwen36StyleGenerator"), ttsim):
        assert sys.modules["ttnn"] is ttsim
        gen_module = sys.modules["ttsim_user_generator_qwen36_style"]
        assert gen_module.ttnn is ttsim


def test_the_loaded_block_takes_its_ttnn_alias_with_it():
    """loader.loaded leaves sys.modules["ttnn"] as it found it: absent stays absent (a later
    test or --hil run that must import ttnn first finds none), present stays the same module;
    inside the block a lazy `import ttnn` (at call time, as tt-metal's code does) finds the backend."""
    spec = parse_generator(f"{STYLE}:Qwen36StyleGenerator")
    assert "ttnn" not in sys.modules
    with loader.loaded(spec, ttsim) as user:
        assert sys.modules["ttnn"] is ttsim and user.spec == spec
        import ttnn  # noqa: F401 - what a generator's method may do at call time
    assert "ttnn" not in sys.modules
    sys.modules["ttnn"] = ttsim
    try:
        with loader.loaded(spec, ttsim):
            pass
        assert sys.modules["ttnn"] is ttsim
    finally:
        del sys.modules["ttnn"]


def test_loading_alone_leaves_no_ttnn_alias_behind():
    """load (what a System does for its spec's generator) aliases ttnn for the import only."""
    user = loader.load(parse_generator(f"{STYLE}:Qwen36StyleGenerator"), ttsim)
    assert user.factory.__name__ == "Qwen36StyleGenerator" and "ttnn" not in sys.modules


def test_another_ttnn_already_imported_is_refused_in_one_line():
    import types

    sys.modules["ttnn"] = types.ModuleType("ttnn")
    try:
        with pytest.raises(GeneratorSpecError, match="`ttnn` is already imported as"):
            with loader.loaded(parse_generator(f"{STYLE}:Qwen36StyleGenerator"), ttsim):
                pass
    finally:
        del sys.modules["ttnn"]


def test_tt_metal_puts_a_checkout_models_package_first(tmp_path, monkeypatch):
    pkg = tmp_path / "models" / "demos"
    pkg.mkdir(parents=True)
    (tmp_path / "models" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "my_gen.py").write_text("import ttnn\nfrom model.generator import Generator as MyGenerator\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "models", raising=False)
    user = loader.load(parse_generator("models.demos.my_gen:MyGenerator", str(tmp_path)), ttsim)
    assert user.factory is Generator and sys.path[0] == str(tmp_path)
    with pytest.raises(GeneratorSpecError, match="no models/ package there"):
        parse_generator("models.demos.my_gen:MyGenerator", str(tmp_path / "nowhere"))
    for name in [m for m in sys.modules if m == "models" or m.startswith("models.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.needs_fault_injection
def test_a_generator_that_raises_in_decode_names_the_seed_and_leaves_no_device():
    spec = RunSpec(seed=0, generator=parse_generator(f"{STYLE}:exploding_generator"))
    workload = stage3(0)
    with pytest.raises(Exception, match=r"raised RuntimeError: device hung in decode .*replay: bin/ttsim replay "
                                        r"--arm control --seed 0 --generator "):
        scenario.run_scenario(workload, "control", spec, expected=scenario.serial_answers(workload, RunSpec(seed=0)))
    assert not ttsim.api.open_devices()


@pytest.mark.needs_fault_injection
@pytest.mark.parametrize("policy, flag", [("mixed", " --step-policy mixed"), ("phased", "")])
def test_a_generators_failure_prints_the_replay_of_the_runs_own_step_policy(policy, flag):
    """The replay line comes from the run's spec (RunSpec.replay_command): under mixed steps it
    says so, where a hand-built line once dropped the policy and replayed phased steps."""
    from harness.base.spec import step_policy

    spec = RunSpec(seed=0, step_policy=step_policy(policy), generator=parse_generator(f"{STYLE}:exploding_generator"))
    workload = stage3(0)
    with pytest.raises(Exception) as err:
        scenario.run_scenario(workload, "control", spec, expected=scenario.serial_answers(workload, RunSpec(seed=0)))
    replay = str(err.value).split("replay: ", 1)[1]
    assert replay == f"bin/ttsim replay --arm control --seed 0{flag} --generator {STYLE}:exploding_generator"


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.commands.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_bin_ttsim_arms_refuses_a_missing_generator_module_in_one_line():
    p = _cli("arms", "--seeds", "1", "--generator", "no.such.module:X")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == ["ttsim: error: --generator: no module named 'no.such.module'"]


def _inner(inner_pytest, generator: str, *select: str) -> subprocess.CompletedProcess:
    return inner_pytest(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-rf", *select, "--generator", generator],
                        cwd=ROOT)


def test_tt_metal_without_generator_is_refused():
    with pytest.raises(GeneratorSpecError, match="--tt-metal needs --generator"):
        parse_generator(None, "/somewhere")
    assert parse_generator(None, None) is None


def test_read_from_device_returns_the_tokens_the_deferred_read_gives():
    """Protocol: decode_forward(read_from_device=True) hands back host tokens [B, 1]; the same
    decode read as the plugin reads it (deferred) gives the same tokens."""
    import torch

    from model.protocol import GREEDY, read_output

    got = {}
    for deferred in (False, True):
        system = System(RunSpec(seed=3), FaultKnobs())
        try:
            gen = system.generator(flags=scenario.ARMS["all"])
            row = torch.zeros(1, system.max_pages, dtype=torch.int32)
            first = gen.prefill_forward(torch.tensor([[5, 6, 7]]), row, empty_slots=[0], sampling_params=GREEDY)
            out = gen.decode_forward(first.reshape(1, 1), torch.tensor([3]), row, reset_batch=True,
                                     read_from_device=not deferred, sampling_params=GREEDY)
            got[deferred] = read_output(gen, system.ttnn, out) if deferred else out.reshape(-1).tolist()
            if not deferred:
                assert tuple(out.shape) == (1, 1)
        finally:
            system.close()
    assert got[False] == got[True]
