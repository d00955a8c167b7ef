"""The user's generator under the suite: the loader, the protocol check, and the proof that a
regression in a user's generator fails the pinned seeds (tests/generators/qwen36_style.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import ttsim
from fixtures import loader, scenario
from fixtures.system import System, use_generator, user_generator
from fixtures.workloads import FaultKnobs, stage3
from model.generator import Generator
from model.protocol import REQUIRED, GeneratorProtocolError, missing_methods

ROOT = Path(__file__).resolve().parents[2]
STYLE = ROOT / "tests" / "generators" / "qwen36_style.py"


@pytest.fixture
def clean_loader(monkeypatch):
    """Loading aliases `ttnn`; put sys.modules and the session's generator back afterwards."""
    monkeypatch.delitem(sys.modules, "ttnn", raising=False)
    before = user_generator()
    yield
    use_generator(None)
    if before is not None:
        use_generator(before.spec)
    sys.modules.pop("ttnn", None)


def test_our_generator_speaks_the_protocol():
    assert missing_methods(Generator) == []
    assert REQUIRED == ("warmup_model_prefill", "warmup_model_decode", "prefill_forward", "decode_forward")
    system = System(0, FaultKnobs())
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
def test_a_bad_generator_is_refused_in_one_line(text, message, clean_loader):
    with pytest.raises(loader.GeneratorSpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        use_generator(loader.parse(text), ttsim)


def test_a_factory_whose_product_lacks_a_method_is_named_when_built(tmp_path, clean_loader):
    (tmp_path / "half.py").write_text("def make(model, tt, mesh, **kw):\n    return object()\n")
    use_generator(loader.parse(f"{tmp_path / 'half.py'}:make"), ttsim)
    system = System(0, FaultKnobs())
    try:
        with pytest.raises(GeneratorProtocolError, match="no method prefill_forward"):
            system.generator(flags=scenario.ARMS["all"])
    finally:
        system.close()


def test_import_ttnn_in_the_users_module_is_the_backend_in_use(clean_loader):
    use_generator(loader.parse(f"{STYLE}:Qwen36StyleGenerator"), ttsim)
    assert sys.modules["ttnn"] is ttsim
    gen_module = sys.modules["ttsim_user_generator_qwen36_style"]
    assert gen_module.ttnn is ttsim


def test_a_generator_in_force_for_a_block_takes_its_ttnn_alias_with_it(clean_loader):
    """generator_in_force leaves sys.modules["ttnn"] as it found it: absent stays absent (a later
    test or --hil run that must import ttnn first finds none), present stays the same module."""
    from fixtures.system import generator_in_force

    spec, before = loader.parse(f"{STYLE}:Qwen36StyleGenerator"), user_generator()
    with generator_in_force(spec, ttsim):
        assert sys.modules["ttnn"] is ttsim and user_generator().spec == spec
    assert "ttnn" not in sys.modules and user_generator() is before
    sys.modules["ttnn"] = ttsim
    with generator_in_force(spec, ttsim):
        pass
    assert sys.modules["ttnn"] is ttsim


def test_tt_metal_puts_a_checkout_models_package_first(tmp_path, clean_loader, monkeypatch):
    pkg = tmp_path / "models" / "demos"
    pkg.mkdir(parents=True)
    (tmp_path / "models" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "my_gen.py").write_text("import ttnn\nfrom model.generator import Generator as MyGenerator\n")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "models", raising=False)
    user = use_generator(loader.parse("models.demos.my_gen:MyGenerator", str(tmp_path)), ttsim)
    assert user.factory is Generator and sys.path[0] == str(tmp_path)
    with pytest.raises(loader.GeneratorSpecError, match="no models/ package there"):
        loader.parse("models.demos.my_gen:MyGenerator", str(tmp_path / "nowhere"))
    for name in [m for m in sys.modules if m == "models" or m.startswith("models.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.needs_fault_injection
def test_a_generator_that_raises_in_decode_names_the_seed_and_leaves_no_device(clean_loader):
    use_generator(loader.parse(f"{STYLE}:exploding_generator"), ttsim)
    workload = stage3(0)
    with pytest.raises(Exception, match=r"raised RuntimeError: device hung in decode .*replay: bin/ttsim replay "
                                        r"--arm control --seed 0 --generator "):
        scenario.run_scenario(workload, "control", 0, expected=scenario.serial_answers(workload, 0))
    assert not ttsim.api.open_devices()


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fixtures.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)


def test_bin_ttsim_arms_refuses_a_missing_generator_module_in_one_line():
    p = _cli("arms", "--seeds", "1", "--generator", "no.such.module:X")
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == ["ttsim: error: --generator: no module named 'no.such.module'"]


def _inner(inner_pytest, generator: str, *select: str) -> subprocess.CompletedProcess:
    return inner_pytest(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-rf", *select, "--generator", generator],
                        cwd=ROOT)


@pytest.mark.needs_fault_injection
def test_the_pinned_seeds_catch_a_regression_in_the_users_generator(inner_pytest):
    """The second generator passes the pinned-seed tests through --generator; with its
    prefilled-slot recording deleted (patch 0019 regressed), the treatment arm's pinned
    slot-reuse seeds fail, naming the request."""
    select = ("tests/serving/test_arms.py::test_defect_emerges_without_its_fix_and_not_with_it",)
    good = _inner(inner_pytest, f"{STYLE}:Qwen36StyleGenerator", *select)
    assert good.returncode == 0, good.stdout[-3000:]
    bad = _inner(inner_pytest, f"{STYLE}:RegressedQwen36StyleGenerator", *select)
    assert bad.returncode == 1, bad.stdout[-3000:]
    failed = sorted(line.split()[1] for line in bad.stdout.splitlines() if line.startswith("FAILED "))
    assert failed == [f"{select[0]}[slot-reuse-seed{s}]" for s in (1, 27, 48)], bad.stdout[-3000:]
    assert "and slots passes it" in bad.stdout and "and all+remap-marks passes it" in bad.stdout
    assert "either the fix does not work in this generator" in bad.stdout and "--generator" in bad.stdout


def test_tt_metal_without_generator_is_refused():
    with pytest.raises(loader.GeneratorSpecError, match="--tt-metal needs --generator"):
        loader.from_options(None, "/somewhere")
    assert loader.from_options(None, None) is None


def test_read_from_device_returns_the_tokens_the_deferred_read_gives():
    """Protocol: decode_forward(read_from_device=True) hands back host tokens [B, 1]; the same
    decode read as the plugin reads it (deferred) gives the same tokens."""
    import torch

    from model.protocol import GREEDY, read_output

    got = {}
    for deferred in (False, True):
        system = System(3, FaultKnobs())
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


@pytest.mark.needs_fault_injection
def test_a_generator_without_our_flags_is_judged_as_is_on_the_pinned_seeds(tmp_path, inner_pytest):
    """ttsim_flags = (): the pinned tests run the arm as-is. Ours behind such a factory passes
    every seed whose defect production's fixes close; with its fixes forced off it fails them."""
    factory = ("from model.flags import ARMS\nfrom model.generator import Generator\n\n\n"
               "def make(model, tt, mesh, *, flags, **kw):\n    return Generator(model, tt, mesh, flags={}, **kw)\n\n\n"
               "make.ttsim_flags = ()\n")
    (tmp_path / "good.py").write_text(factory.format("flags"))
    (tmp_path / "broken.py").write_text(factory.format('ARMS["control"]'))
    select = ("tests/serving/test_arms.py::test_defect_emerges_without_its_fix_and_not_with_it",)
    good = _inner(inner_pytest, f"{tmp_path / 'good.py'}:make", *select)
    assert good.returncode == 0 and "3 passed, 2 skipped" in good.stdout, good.stdout[-3000:]
    bad = _inner(inner_pytest, f"{tmp_path / 'broken.py'}:make", *select)
    failed = sorted(line.split()[1] for line in bad.stdout.splitlines() if line.startswith("FAILED "))
    assert failed == [f"{select[0]}[{d}-seed{s}]" for d, s in (("slot-reuse", 27), ("slot-reuse", 48),
                                                                 ("stale-position-buffer", 32))], bad.stdout[-3000:]
    assert "arm as-is: req-14 (slot-reuse) failed" in bad.stdout
