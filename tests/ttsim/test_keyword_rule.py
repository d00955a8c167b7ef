"""The keyword rule (ttsim/hints.py): every optional parameter of every public ttsim op is
either a documented hint that cannot change values, or some test (or model code the tests
run) passes it -- to check the value it produces, or to check that ttsim refuses it.
Nothing is accepted and then ignored without a test noticing.

The same holds for the fields of config objects (``*Config`` classes: program configs,
compute-kernel configs, memory configs): every constructor field is a documented hint
(hints.CONFIG_FIELDS) or some test passes it to the constructor. Keywords newer tt-metal tests
pass that 0.81.1 lacks (API drift) are refused by name."""

import ast
import enum
import functools
import inspect
import pathlib

import pytest
import torch

import ttsim
from ttsim import hints

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCANNED = ("tests", "model")


def _public_ops():
    ops = {}
    for prefix, module in (("", ttsim), ("transformer.", ttsim.transformer), ("experimental.", ttsim.experimental)):
        for name in dir(module):
            obj = getattr(module, name)
            if name.startswith("_") or not callable(obj) or inspect.isclass(obj):
                continue
            if getattr(obj, "__module__", "").startswith("ttsim") and path_ok(prefix + name):
                ops[prefix + name] = obj
    return ops


def path_ok(path: str) -> bool:
    return path not in ttsim.EXTENSIONS


@functools.cache
def _trees() -> tuple:
    """(path, parsed module) of every scanned file, parsed once per process: the scan is of the
    source files on disk, which no test changes (the negative controls patch ttsim, not files)."""
    return tuple((f, ast.parse(f.read_text())) for folder in SCANNED for f in sorted((ROOT / folder).rglob("*.py")))


def _calls():
    """(called name, ast.Call) for ``x.name(...)`` calls, and for ``getattr(x, s)(...)`` calls
    every string constant ``s`` of the module (parametrized op names); ``**kwargs`` counts as
    every key the module spells in a dict."""
    return list(_scanned_calls())


@functools.cache
def _scanned_calls() -> tuple:
    out = []
    for _, tree in _trees():
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        spread = _spread_keys(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            if any(k.arg is None for k in node.keywords):  # f(**kwargs): the module's dict keys
                node = ast.Call(node.func, node.args, node.keywords + [ast.keyword(arg=k) for k in spread])
            fn = node.func
            if isinstance(fn, ast.Attribute):
                out.append((fn.attr, node))
            elif isinstance(fn, ast.Call) and isinstance(fn.func, ast.Name) and fn.func.id == "getattr":
                out.extend((s, node) for s in strings)
    return tuple(out)


def _spread_keys(tree) -> set[str]:
    """Keys of ``dict(k=...)`` calls and ``{"k": ...}`` literals: what ``**kwargs`` may pass."""
    keys = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict":
            keys |= {k.arg for k in n.keywords if k.arg}
        elif isinstance(n, ast.Dict):
            keys |= {k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return keys


def _passes(call: ast.Call, index: int, param: inspect.Parameter) -> bool:
    if any(k.arg == param.name for k in call.keywords):
        return True
    positional = param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD)
    return positional and len(call.args) > index and not any(isinstance(a, ast.Starred) for a in call.args)


def _unaccounted():
    by_name = {}
    for name, call in _calls():
        by_name.setdefault(name, []).append(call)
    missing = []
    for path, fn in sorted(_public_ops().items()):
        calls = by_name.get(path.rsplit(".", 1)[-1], [])
        for i, p in enumerate(inspect.signature(fn).parameters.values()):
            if p.default is inspect.Parameter.empty or hints.hint(path, p.name):
                continue
            if not any(_passes(c, i, p) for c in calls):
                missing.append(f"{path}({p.name}=)")
    return missing


def test_every_optional_keyword_is_exercised_refused_or_a_documented_hint():
    missing = _unaccounted()
    assert not missing, (
        f"{len(missing)} keyword(s) accepted with no test passing them and no hint entry in ttsim/hints.py:\n  "
        + "\n  ".join(missing))


def test_hint_entries_name_real_parameters():
    """A hint for a parameter no op has is stale (it would hide nothing, but misleads)."""
    ops = _public_ops()
    params = {p for fn in ops.values() for p in inspect.signature(fn).parameters}
    assert not set(hints.ANY_OP) - params, set(hints.ANY_OP) - params
    for op, entries in hints.PER_OP.items():
        assert op in ops, op
        assert set(entries) <= set(inspect.signature(ops[op]).parameters), (op, set(entries))


def test_the_rule_catches_an_unexercised_keyword(monkeypatch):
    """Negative control: a new op with an optional keyword nobody passes is reported."""
    def brand_new_op(input_tensor, *, secret_knob=3):
        return input_tensor

    brand_new_op.__module__ = "ttsim.ops.fake"
    monkeypatch.setattr(ttsim, "brand_new_op", brand_new_op, raising=False)
    assert "brand_new_op(secret_knob=)" in _unaccounted()


# -- config objects' fields ------------------------------------------------------------

def _config_classes():
    return {name: obj for name in dir(ttsim) if "Config" in name and not name.startswith("_")
            for obj in [getattr(ttsim, name)]
            if inspect.isclass(obj) and not issubclass(obj, enum.Enum) and obj.__module__.startswith("ttsim")}


def _constructor_calls():
    """(class name, ast.Call) for ``x.Name(...)`` and ``Name(...)`` calls in the scanned code."""
    return list(_scanned_constructor_calls())


@functools.cache
def _scanned_constructor_calls() -> tuple:
    out = []
    for name, call in _calls():
        out.append((name, call))
    for _, tree in _trees():
        spread = _spread_keys(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if any(k.arg is None for k in node.keywords):
                    node = ast.Call(node.func, node.args, node.keywords + [ast.keyword(arg=k) for k in spread])
                out.append((node.func.id, node))
    return tuple(out)


def _unaccounted_fields():
    by_name = {}
    for name, call in _constructor_calls():
        by_name.setdefault(name, []).append(call)
    missing = []
    for name, cls in sorted(_config_classes().items()):
        calls = by_name.get(name, [])
        for i, p in enumerate(inspect.signature(cls).parameters.values()):
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or hints.config_hint(name, p.name):
                continue
            if not any(_passes(c, i, p) for c in calls):
                missing.append(f"{name}.{p.name}")
    return missing


def test_every_config_field_is_exercised_refused_or_a_documented_hint():
    """A field a config object accepts but ttsim ignores (say a matmul program config's
    fused_activation) would be a silent wrong answer: it must be modelled or refused, and a
    test must pass it; or it is a documented hint."""
    classes = _config_classes()
    assert {"MatmulMultiCoreReuseMultiCast1DProgramConfig", "SDPAProgramConfig", "WormholeComputeKernelConfig"} \
        <= set(classes), sorted(classes)
    missing = _unaccounted_fields()
    assert not missing, (
        f"{len(missing)} config field(s) with no test passing them and no entry in hints.CONFIG_FIELDS:\n  "
        + "\n  ".join(missing))


def test_config_hint_entries_name_real_fields():
    classes = _config_classes()
    for name, entries in hints.CONFIG_FIELDS.items():
        assert name in classes, name
        assert set(entries) <= set(inspect.signature(classes[name]).parameters), (name, set(entries))


def test_value_changing_config_fields_are_not_hints():
    """The fields that change a card's result must never be waved through as hints."""
    for name in ("MatmulMultiCoreReuseMultiCastProgramConfig", "MatmulMultiCoreReuseMultiCast1DProgramConfig",
                 "MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig"):
        assert hints.config_hint(name, "fused_activation") is None, name
    assert hints.config_hint("MatmulMultiCoreReuseMultiCast1DProgramConfig", "untilize_out") is None
    assert hints.config_hint("SDPAProgramConfig", "q_chunk_size") is None
    assert hints.config_hint("SDPAProgramConfig", "k_chunk_size") is None


def test_the_rule_catches_an_unexercised_config_field(monkeypatch):
    """Negative control: a new config class with a field nobody passes is reported."""
    class BrandNewProgramConfig:
        def __init__(self, *, grid=None, secret_fused_scale=1.0):
            pass

    BrandNewProgramConfig.__module__ = "ttsim.ops.fake"
    monkeypatch.setattr(ttsim, "BrandNewProgramConfig", BrandNewProgramConfig, raising=False)
    missing = _unaccounted_fields()
    assert "BrandNewProgramConfig.secret_fused_scale" in missing and "BrandNewProgramConfig.grid" in missing


# -- API drift: keywords newer tt-metal tests pass that 0.81.1 lacks ---------------------------

def test_keywords_0_81_1_lacks_are_refused_by_name(real):
    """API drift: newer tt-metal tests pass these; 0.81.1's signatures have none of them."""
    sigs = real["signatures"]
    for op, kw in (("argmax", "use_multicore"), ("embedding", "queue_id"), ("untilize", "use_pack_untilize"),
                   ("untilize_with_unpadding", "use_pack_untilize")):
        real_params = {p["name"] for ov in sigs[f"ttnn.{op}"]["overloads"] for p in ov["params"]}
        assert kw not in real_params, (op, kw)
        assert kw not in inspect.signature(getattr(ttsim, op)).parameters
    assert "ttnn.device.ClearKernelCache" in sigs and "ttnn.device.DisablePersistentKernelCache" not in sigs
    assert not hasattr(ttsim.device, "DisablePersistentKernelCache")


def test_keywords_0_81_1_lacks_raise_a_type_error_naming_them(device):
    t = ttsim.from_torch(torch.randn(1, 1, 32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    with pytest.raises(TypeError, match=r"use_pack_untilize"):
        ttsim.untilize(t, use_pack_untilize=True)
    with pytest.raises(TypeError, match=r"use_multicore"):
        ttsim.argmax(ttsim.untilize(t), dim=-1, use_multicore=True)
    ids = ttsim.from_torch(torch.zeros(1, 32, dtype=torch.int32), dtype=ttsim.uint32, device=device)
    with pytest.raises(TypeError, match=r"queue_id"):
        ttsim.embedding(ids, t, queue_id=0)
