"""ttsim against the REAL ttnn 0.81.1 package: names, signatures, constants, host numerics.

The dump comes from the session fixture ``real`` (conftest.py, built by real_ttnn.py); if it
cannot be produced the tests FAIL: CI must run them. See conformance/README.md.

What cannot be checked here: anything that needs a device (every op's math, to_device,
traces, events, CCLs). Only the host side of the real package runs without a card.
"""

from __future__ import annotations

import __future__
import ast
import enum
import inspect
import json
import re
import types

import numpy as np
import pytest
import torch

import ttsim

from real_ttnn import CONF


def _reference_model() -> dict:
    """ref_bf16_bits / ref_bfp_bits / ref_tile_blocks from dump_ttnn.py (numpy only; the file imports ttnn)."""
    wanted = {"ref_bf16_bits", "ref_bfp_bits", "ref_tile_blocks"}
    tree = ast.parse((CONF / "dump_ttnn.py").read_text())
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in wanted]
    assert {f.name for f in funcs} == wanted, "dump_ttnn.py no longer defines the reference model"
    ns = {"np": np}
    exec(compile(ast.Module(body=funcs, type_ignores=[]), str(CONF / "dump_ttnn.py"), "exec"), ns)  # noqa: S102
    return ns


# ---------------------------------------------------------------------------- public names

SPACES = {"": ttsim, "transformer": ttsim.transformer, "experimental": ttsim.experimental}


def _owner(obj) -> str:
    if inspect.isclass(obj) or inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return getattr(obj, "__module__", None) or ""
    return type(obj).__module__


def public_names() -> dict[str, object]:
    """Every public name ttsim exports, as a path below ``ttsim`` -> object.

    Public: no leading ``_``, not a module, and defined by ttsim (a class/function whose
    ``__module__`` is ttsim.*, or a value whose type is ttsim's or a builtin: ints, dicts,
    enum members). Imported helpers (``from __future__ import annotations``, typing, torch
    functions) are not part of the API.
    """
    out = {}
    for space, mod in SPACES.items():
        for n in sorted(dir(mod)):
            if n.startswith("_"):
                continue
            obj = getattr(mod, n)
            if isinstance(obj, (types.ModuleType, __future__._Feature)):
                continue
            owner = _owner(obj)
            if not (owner == "ttsim" or owner.startswith("ttsim.") or owner == "builtins"):
                continue
            out[f"{space}.{n}" if space else n] = obj
    return out


def real_path(rel: str) -> str:
    return f"ttnn.{rel}"


def test_every_public_name_exists_in_real_ttnn(real):
    sigs = real["signatures"]
    names = public_names()
    missing = [rel for rel in names if real_path(rel) not in sigs and rel not in ttsim.EXTENSIONS]
    assert not missing, (f"ttsim exports names real ttnn 0.81.1 lacks: {missing}. Mirror the real name, or list it "
                         f"in ttsim.EXTENSIONS with the reason it exists")
    dishonest = [rel for rel in ttsim.EXTENSIONS if real_path(rel) in sigs]
    assert not dishonest, f"ttsim.EXTENSIONS lists names real ttnn HAS (drop them from EXTENSIONS): {dishonest}"
    stale = [rel for rel in ttsim.EXTENSIONS if rel not in names]
    assert not stale, f"ttsim.EXTENSIONS lists names ttsim does not export: {stale}"
    assert all(isinstance(v, str) and v.strip() for v in ttsim.EXTENSIONS.values())
    # same sort of object: enum <-> enum, callable <-> callable, value <-> value
    wrong_kind = []
    for rel, obj in names.items():
        entry = sigs.get(real_path(rel))
        if entry is None:
            continue
        kind = entry.get("kind")
        mine = ("enum" if inspect.isclass(obj) and issubclass(obj, enum.Enum)
                else "callable" if callable(obj) else "value")
        theirs = ("enum" if kind == "enum" else "value" if kind == "value" else "callable")
        if mine != theirs:
            wrong_kind.append(f"{rel}: ttsim {mine}, ttnn {kind}")
    assert not wrong_kind, wrong_kind


# ---------------------------------------------------------------------------- signatures

_KIND = {
    inspect.Parameter.POSITIONAL_ONLY: "POSITIONAL_ONLY",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "POSITIONAL_OR_KEYWORD",
    inspect.Parameter.VAR_POSITIONAL: "VAR_POSITIONAL",
    inspect.Parameter.KEYWORD_ONLY: "KEYWORD_ONLY",
    inspect.Parameter.VAR_KEYWORD: "VAR_KEYWORD",
}
_ENUM_REPR = re.compile(r"<([A-Za-z_]\w*\.[A-Za-z_]\w*): [^<>]*>")
_MISSING = ("<required>",)


def _canon(v):
    if isinstance(v, bool):
        return ("bool", v)
    if isinstance(v, int):
        return ("int", v)
    if isinstance(v, float):
        # nanobind prints a C++ float default widened to double (1e-5f -> 9.999999747378752e-06)
        return ("float", float(np.float32(v)))
    if isinstance(v, (list, tuple)):  # [] and () are the same default to a caller
        return ("seq", tuple(_canon(x) for x in v))
    if v is None:
        return ("None",)
    return ("literal", repr(v))


def canon_default(text: str | None):
    """A default's repr, normalised only for trivially equivalent spellings.

    ``<Layout.TILE: 1>`` -> ``Layout.TILE`` (Python enum repr vs nanobind's); literals are
    compared by value ([] == (), floats at float32 precision, bool != int); anything else by
    its exact repr.
    """
    if text is None:
        return _MISSING
    text = _ENUM_REPR.sub(r"\1", text)
    try:
        return _canon(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return ("repr", text)


def ttsim_params(obj, drop_self: bool = False) -> list[dict]:
    sig = inspect.signature(obj)
    params = []
    for p in sig.parameters.values():
        e = {"name": p.name, "kind": _KIND[p.kind]}
        if p.default is not inspect.Parameter.empty:
            e["default"] = repr(p.default)
        params.append(e)
    if drop_self and params and params[0]["name"] == "self":
        params = params[1:]
    return params


def _key(params: list[dict]) -> list[tuple]:
    # a positional-only parameter's name is not part of the API (nanobind calls unnamed ones argN)
    return [("<positional>" if p["kind"] == "POSITIONAL_ONLY" else p["name"], p["kind"],
             canon_default(p.get("default"))) for p in params]


def _fmt(params: list[dict]) -> str:
    out, star = [], False
    for p in params:
        k = p["kind"]
        if k == "KEYWORD_ONLY" and not star:
            out.append("*")
            star = True
        pre = {"VAR_POSITIONAL": "*", "VAR_KEYWORD": "**"}.get(k, "")
        star = star or k == "VAR_POSITIONAL"
        out.append(pre + p["name"] + (f"={p['default']}" if "default" in p else "")
                   + (" /" if k == "POSITIONAL_ONLY" else ""))
    return "(" + ", ".join(out) + ")"


def _set_default(overloads, **defaults):
    out = []
    for o in overloads:
        ps = []
        for p in o["params"]:
            p = dict(p)
            if p["name"] in defaults:
                if defaults[p["name"]] is _MISSING:
                    p.pop("default", None)
                else:
                    p["default"] = defaults[p["name"]]
            ps.append(p)
        out.append({**o, "params": ps})
    return out


def _open_device_real(overloads, dump):
    """Fill in the defaults the nb::sig text leaves out, from ttnn.device.DEFAULT_* and the docstring."""
    forms = dump["device"]["open_device_call_forms"]
    assert forms["open_device(device_id=0, num_command_queues=1)"].startswith("accepted"), forms
    assert forms["open_device(device_id=0, bogus=1)"] == "rejected: TypeError", forms
    consts = dump["constants"]["device_module_constants"]
    ov = _set_default(overloads,
                      l1_small_size=repr(consts["ttnn.device.DEFAULT_L1_SMALL_SIZE"]),
                      trace_region_size=repr(consts["ttnn.device.DEFAULT_TRACE_REGION_SIZE"]),
                      dispatch_core_config="None",
                      worker_l1_size=repr(consts["ttnn._ttnn.device.DEFAULT_WORKER_L1_SIZE"]))
    for o in ov:
        o["params"].append({"name": "num_command_queues", "kind": "KEYWORD_ONLY", "default": "1"})
    return ov


def _internal_constructor(overloads, dump):
    return None  # not compared; see the reason


def _merged_overload(overloads, base_names, extra_keywords):
    """One Python signature for several real overloads: the overload whose leading parameter
    names are ``base_names``, its parameters after the tensor made optional (default None) where
    another overload renames or drops them, plus ``extra_keywords`` (other overloads' names,
    keyword-only, default None) appended. Each extra name must exist in some real overload."""
    base = next(o for o in overloads if [p["name"] for p in o["params"]][:len(base_names)] == base_names)
    real_names = {p["name"] for o in overloads for p in o["params"]}
    assert set(extra_keywords) <= real_names, set(extra_keywords) - real_names
    params = [dict(p) for p in base["params"]]
    return params, [{"name": n, "kind": "KEYWORD_ONLY", "default": "None"} for n in extra_keywords]


def _slice_real(overloads, dump):
    params, extra = _merged_overload(overloads, ["input_tensor", "slice_start", "slice_end"],
                                     ["starts", "ends", "steps", "slice_dim", "num_devices"])
    for p in params[1:3]:
        p["default"] = "None"
    return [{"params": params + extra}]


def _reshape_real(overloads, dump):
    params, _ = _merged_overload(overloads, ["input_tensor", "shape"], [])
    assert any([p["name"] for p in o["params"]][:3] == ["input_tensor", "logical_shape", "padded_shape"]
               for o in overloads)
    params.insert(2, {"name": "padded_shape", "kind": "POSITIONAL_OR_KEYWORD", "default": "None"})
    return [{"params": params}]


def _unary_with_param_real(overloads, dump):
    """(op /) | (op /, p /) | (op /, p0 /, p1 /) | ((op, p) /): ttsim's ``(arg, /, *params)`` covers the first
    three, a tuple first argument the rest; the real overloads must still be exactly those arities."""
    arities = sorted({len(o["params"]) for o in overloads})
    assert arities == [1, 2, 3], arities
    assert all(p["kind"] == "POSITIONAL_ONLY" for o in overloads for p in o["params"])
    return [{"params": [{"name": "arg", "kind": "POSITIONAL_ONLY"}, {"name": "params", "kind": "VAR_POSITIONAL"}]}]


def _after_optional_buffer(buffer_name):
    """The overload ``(input_tensor, <buffer>=None, dim, multi_device_global_semaphore, *, ...)``: Python
    cannot put required parameters after a default, so ttsim defaults dim and the semaphores to None and
    refuses the call without them (TypeError, as the binding does)."""
    def adjust(overloads, dump):
        base = [o for o in overloads if [p["name"] for p in o["params"]][:2] == ["input_tensor", buffer_name]]
        assert len(base) == 1, [o["params"] for o in overloads]
        return _set_default(base, dim="None", multi_device_global_semaphore="None")
    return adjust


def _pad_real(overloads):
    names = [[p["name"] for p in o["params"]] for o in overloads]
    assert names[1][:4] == ["input_tensor", "output_padded_shape", "input_tensor_start", "value"], names
    first = overloads[0]["params"]
    assert [p["name"] for p in first[:3]] == ["input_tensor", "padding", "value"], names
    return [{"params": [dict(p) for p in first[:3]] + [{"name": "args", "kind": "VAR_POSITIONAL"}]
             + [dict(p) for p in first[3:]]}]


#: Where real ttnn's signature cannot be mirrored in Python: name -> (what differs, why, adjust).
#: ``adjust(real_overloads, dump)`` returns the overloads to compare against, or None for
#: "constructor not compared" (only for classes user code never constructs in either package).
SIGNATURE_EXCEPTIONS = {
    "wait_for_event": (
        "real (cq_id=None, mesh_event); ttsim (cq_id, mesh_event): cq_id has no default",
        "nanobind declares a default before a required parameter, which a Python def cannot spell; "
        "ttsim treats cq_id=None as 0 like ttnn",
        lambda ov, d: _set_default(ov, cq_id=_MISSING)),
    "open_device": (
        "real nb::sig text lists device_id, l1_small_size, trace_region_size, dispatch_core_config, "
        "worker_l1_size as keyword-only WITHOUT defaults, and omits num_command_queues",
        "the binding's custom signature text hides its defaults (its docstring gives them as "
        "ttnn.device.DEFAULT_*) and it accepts num_command_queues (dump: device.open_device_call_forms) "
        "while rejecting unknown keywords; compared against those documented defaults plus "
        "num_command_queues=1",
        _open_device_real),
    "CoreCoord": (
        "real __init__(arg0, arg1, /) | (arg, /) | (arg, /); ttsim CoreCoord(x, y)",
        "nanobind's unnamed, positional-only parameters; ttsim names them after the x/y attributes, so "
        "it also accepts CoreCoord(x=..., y=...) (a superset). Compared: two parameters named x, y",
        lambda ov, d: [{**o, "params": [dict(p, name=n, kind="POSITIONAL_OR_KEYWORD")
                                        for p, n in zip(o["params"], ("x", "y"))]}
                       for o in ov if [p["name"] for p in o["params"]] == ["arg0", "arg1"]]),
    "MeshShape": (
        "real overloads (s0, s1) | (s0, s1, s2) | (shape); ttsim MeshShape(*dims) taking (s0, s1) or (shape)",
        "three overloads cannot be one Python signature; behaviour is compared instead by "
        "test_expressions_evaluate_like_real_ttnn (repr, ==, [], dims(), mesh_size(), no len())",
        _internal_constructor),
    "MeshCoordinate": (
        "real overloads (c0, c1) | (c0, c1, c2) | (coords); ttsim MeshCoordinate(*coords) taking any of them",
        "three overloads cannot be one Python signature; behaviour is compared by "
        "tests/ttsim/test_devices.py (repr, dims(), [], iteration, ==) against the real package's",
        _internal_constructor),
    "slice": (
        "real overloads (input_tensor, starts: Tensor, ends: Tensor, slice_step=None, *, ..., slice_dim, "
        "num_devices) | (input_tensor, starts, ends, steps) | (input_tensor, slice_start, slice_end, "
        "slice_step=None); ttsim takes the third with slice_start/slice_end defaulting to None and the "
        "others' names as keyword-only",
        "one Python signature: positional calls bind as the list overloads do, starts=/ends=/steps= as the "
        "second; tensor starts/ends and slice_dim/num_devices are refused by name",
        _slice_real),
    "reshape": (
        "real overloads (input_tensor, shape, *, ...) | (input_tensor, logical_shape, padded_shape, *, ...); "
        "ttsim (input_tensor, shape, padded_shape=None, *, ...)",
        "one Python signature for both; a positional third argument is the padded shape",
        _reshape_real),
    "UnaryWithParam": (
        "real overloads (op /) | (op /, param /) | (op /, param0 /, param1 /) | ((op, param) /); ttsim "
        "(arg, /, *params)",
        "several positional-only overloads of different arity are one Python signature with *params; more "
        "than two params, or a tuple with extra params, are refused",
        _unary_with_param_real),
    "experimental.all_gather_async": (
        "real overloads (input_tensor, dim, sem, *, ...) | (input_tensor, persistent_output_buffer=None, dim, sem, "
        "*, ...) | (input_tensor, dim, cluster_axis, mesh_device, topology, sem, *, ...); ttsim takes the second "
        "with dim and multi_device_global_semaphore defaulting to None",
        "a default before required parameters (nanobind) cannot be spelled in Python; the positional first overload "
        "(input_tensor, dim, sem) binds too (an int in the buffer slot is the dim); missing dim/semaphore is refused",
        _after_optional_buffer("persistent_output_buffer")),
    "experimental.reduce_scatter_minimal_async": (
        "real (input_tensor, persistent_output_buffers=None, dim, multi_device_global_semaphore, *, ...); ttsim "
        "defaults dim and multi_device_global_semaphore to None",
        "a default before required parameters (nanobind) cannot be spelled in Python; missing ones are refused",
        _after_optional_buffer("persistent_output_buffers")),
    "pad": (
        "real overloads (input_tensor, padding, value, *, ...) | (input_tensor, output_padded_shape, "
        "input_tensor_start, value, *, ...); ttsim (input_tensor, padding, value, *args, ...)",
        "one Python signature: a fourth positional argument selects the second overload (its value); the "
        "second overload's keyword names are not accepted",
        lambda ov, d: _pad_real(ov)),
    "MeshDevice": (
        "real __init__ is (*args, **kwargs) (no bound constructor); ttsim's takes chips and queue counts",
        "both are created by open_mesh_device / open_device only",
        _internal_constructor),
    "Device": (
        "as MeshDevice (ttsim's Device is an alias of MeshDevice)",
        "created by open_device only",
        _internal_constructor),
    "MeshEvent": (
        "real __init__ is (*args, **kwargs) (no bound constructor); ttsim's takes (device, cq_id)",
        "events are created by record_event only",
        _internal_constructor),
}


def _real_overloads(entry: dict) -> list[dict]:
    return entry.get("init", []) if entry.get("kind") == "class" else entry.get("overloads", [])


def test_signatures_match_a_real_overload(real):
    sigs = real["signatures"]
    problems, compared, n_params = [], 0, 0
    used_exceptions = set()
    for rel, obj in public_names().items():
        entry = sigs.get(real_path(rel))
        if entry is None or not callable(obj) or entry.get("kind") == "enum":
            continue
        if inspect.isclass(obj) and issubclass(obj, enum.Enum):
            continue
        overloads = _real_overloads(entry)
        if rel in SIGNATURE_EXCEPTIONS:
            used_exceptions.add(rel)
            overloads = SIGNATURE_EXCEPTIONS[rel][2](overloads, real)
            if overloads is None:
                continue
        mine = ttsim_params(obj)
        compared += 1
        n_params += len(mine)
        if not any(_key(mine) == _key(o["params"]) for o in overloads):
            problems.append(f"{rel}{_fmt(mine)}\n    real: " + "\n    real: ".join(_fmt(o["params"]) for o in overloads))
    assert compared >= 80, f"only {compared} callables compared: is the public-name rule broken?"
    assert not problems, f"{len(problems)} of {compared} signatures differ from every real overload:\n" + "\n".join(problems)
    unused = set(SIGNATURE_EXCEPTIONS) - used_exceptions
    assert not unused, f"SIGNATURE_EXCEPTIONS entries match no exported name: {unused}"
    print(f"compared {compared} callables, {n_params} parameters")


#: functions real ttnn keeps only in its ``ttnn.device`` module (tt-metal generators call
#: ``ttnn.device.is_blackhole(device)``). ttsim.device is ttsim's device module, so the
#: public-name walk above does not cover it: these are checked one by one.
DEVICE_MODULE_FUNCTIONS = ("is_blackhole", "is_wormhole_b0")


def test_ttnn_device_module_functions_match_real(real):
    sigs = real["signatures"]
    for n in DEVICE_MODULE_FUNCTIONS:
        entry = sigs.get(f"ttnn.device.{n}")
        assert entry is not None, f"ttnn.device.{n} is not in real ttnn 0.81.1"
        mine = ttsim_params(getattr(ttsim.device, n))
        assert any(_key(mine) == _key(o["params"]) for o in entry["overloads"]), (
            f"device.{n}{_fmt(mine)}\n    real: " + "\n    real: ".join(_fmt(o["params"]) for o in entry["overloads"]))
    assert sigs["ttnn.device.Arch"]["kind"] == "enum" and ttsim.device.Arch is ttsim.Arch


def test_signature_exceptions_are_still_needed(real):
    """An exception whose raw real signature now matches ttsim must be removed."""
    sigs = real["signatures"]
    names = public_names()
    for rel in SIGNATURE_EXCEPTIONS:
        overloads = _real_overloads(sigs[real_path(rel)])
        mine = ttsim_params(names[rel])
        assert not any(_key(mine) == _key(o["params"]) for o in overloads), f"{rel}: exception no longer needed"


def _members(cls) -> dict[str, object]:
    out = {}
    for n in dir(cls):
        if n.startswith("_"):
            continue
        for k in cls.__mro__:
            if n in k.__dict__:
                out[n] = k.__dict__[n]
                break
    return out


def test_class_members_match_real(real):
    """Methods/properties of ttsim classes that real ttnn also has: same kind and a matching signature.

    Extra ttsim members (ttsim's internals on MeshDevice, ...) are not checked.
    """
    sigs = real["signatures"]
    problems, compared = [], 0
    for rel, obj in public_names().items():
        entry = sigs.get(real_path(rel))
        if not (inspect.isclass(obj) and entry and isinstance(entry.get("members"), dict)):
            continue
        for n, raw in _members(obj).items():
            rm = entry["members"].get(n)
            if not isinstance(rm, dict) or "kind" not in rm:
                continue
            compared += 1
            mine_data = isinstance(raw, property) or not callable(raw)  # property or dataclass field
            if rm["kind"] == "property":
                if not mine_data:
                    problems.append(f"{rel}.{n}: real is a property, ttsim a {type(raw).__name__}")
                continue
            if mine_data:
                problems.append(f"{rel}.{n}: real is a {rm['kind']}, ttsim a {type(raw).__name__}")
                continue
            mine = ttsim_params(raw, drop_self=True)
            if not any(_key(mine) == _key(o["params"]) for o in rm.get("overloads", [])):
                problems.append(f"{rel}.{n}{_fmt(mine)}\n    real: "
                                + "\n    real: ".join(_fmt(o["params"]) for o in rm.get("overloads", [])))
    assert compared >= 20, compared
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------- constants

#: enums whose members must be exactly the real ones (others: ttsim's members must be a subset)
COMPLETE_ENUMS = ("DataType", "Layout", "BufferType", "TensorMemoryLayout", "MathFidelity")


def test_enum_members_and_values(real):
    enums = real["constants"]["enums"]
    checked = []
    for rel, obj in public_names().items():
        if not (inspect.isclass(obj) and issubclass(obj, enum.Enum)):
            continue
        name = rel.rsplit(".", 1)[-1]
        assert "." not in rel and name in enums, f"{rel}: no such enum in real ttnn"
        mine = {m.name: int(m.value) for m in obj}
        theirs = enums[name]
        if name in COMPLETE_ENUMS:
            assert mine == theirs, f"{name}: ttsim {mine} != ttnn {theirs}"
        else:
            wrong = {k: v for k, v in mine.items() if theirs.get(k) != v}
            assert not wrong, f"{name}: ttsim members {wrong} are not ttnn's ({theirs})"
        python_enum = real["signatures"][real_path(name)].get("module") == "ttnn.types"  # a plain enum.Enum
        for m in obj:
            want = f"<{name}.{m.name}: {int(m.value)}>" if python_enum else f"{name}.{m.name}"
            assert repr(m) == want and str(m) == f"{name}.{m.name}", f"{name}.{m.name} prints as {m!r}"
        checked.append(name)
    assert set(COMPLETE_ENUMS) <= set(checked)


def test_simple_constants_and_aliases(real):
    c = real["constants"]
    assert ttsim.TILE_SIZE == c["simple"]["TILE_SIZE"] == 32
    for rel, obj in public_names().items():
        if isinstance(obj, enum.Enum):  # bfloat16, TILE_LAYOUT, ...
            alias = c["enum_aliases"][rel]
            assert (f"{type(obj).__name__}.{obj.name}", obj.value) == (alias["member"], alias["value"]), rel
            assert (repr(obj), str(obj)) == (alias["repr"], alias["str"]), rel
    for name in ("DRAM_MEMORY_CONFIG", "L1_MEMORY_CONFIG", "L1_HEIGHT_SHARDED_MEMORY_CONFIG",
                 "L1_WIDTH_SHARDED_MEMORY_CONFIG", "L1_BLOCK_SHARDED_MEMORY_CONFIG"):
        mine, theirs = getattr(ttsim, name), c["memory_configs"][name]
        assert repr(mine.buffer_type) == theirs["buffer_type"], name
        assert repr(mine.memory_layout) == theirs["memory_layout"], name
        assert mine.is_sharded() == theirs["is_sharded"], name
        assert repr(mine) == theirs["repr"], name
    assert repr(ttsim.MemoryConfig()) == c["MemoryConfig_default_repr"]
    assert (ttsim.MemoryConfig() == ttsim.DRAM_MEMORY_CONFIG) == c["DRAM_eq_default_MemoryConfig"]
    dev = c["device_module_constants"]
    assert ttsim.device.DEFAULT_L1_SMALL_SIZE == dev["ttnn.device.DEFAULT_L1_SMALL_SIZE"]
    assert ttsim.device.DEFAULT_TRACE_REGION_SIZE == dev["ttnn.device.DEFAULT_TRACE_REGION_SIZE"]
    assert ttsim.device.DEFAULT_WORKER_L1_SIZE == dev["ttnn._ttnn.device.DEFAULT_WORKER_L1_SIZE"]
    assert real["device"]["GetNumAvailableDevices"] >= 0


def _eval_like_dump(expr: str) -> str:
    try:
        v = eval(expr, {"ttnn": ttsim})  # noqa: S307 - the dump's fixed expressions
    except Exception as e:
        return f"ERR {type(e).__name__}"
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))


def test_expressions_evaluate_like_real_ttnn(real):
    """The dump's probe expressions (reprs, ==, MeshShape/Shape behaviour) give the same results in ttsim.

    Expressions naming a ttnn class ttsim does not mirror (CoreGrid, WormholeComputeKernelConfig)
    are skipped; any other difference fails.
    """
    exported = {rel for rel in public_names() if "." not in rel}
    problems, compared = [], 0
    for expr, want in real["constants"]["expressions"].items():
        used = set(re.findall(r"ttnn\.([A-Za-z_]\w*)", expr)) - {"transformer", "experimental"}
        if used - exported:
            continue
        compared += 1
        got = _eval_like_dump(expr)
        if want.startswith("ERR "):
            want = want.split(":")[0]
        if got != want:
            problems.append(f"{expr}: ttsim {got}, ttnn {want}")
    assert compared >= 30, compared
    assert not problems, "\n".join(problems)


# ---------------------------------------------------------------------------- host numerics

ROUTES = {  # dump label -> (dtype, layout)
    "bfloat16_row_major": (ttsim.bfloat16, ttsim.ROW_MAJOR_LAYOUT),
    "bfloat16_tile": (ttsim.bfloat16, ttsim.TILE_LAYOUT),
    "bfloat8_b_tile": (ttsim.bfloat8_b, ttsim.TILE_LAYOUT),
    "bfloat4_b_tile": (ttsim.bfloat4_b, ttsim.TILE_LAYOUT),
}


def _bits_of(t: torch.Tensor) -> np.ndarray:
    return t.to(torch.float32).contiguous().numpy().view(np.uint32)


def ttsim_roundtrip(x: np.ndarray | torch.Tensor, dtype, layout) -> np.ndarray:
    """float32 (or torch bf16) -> ttsim.from_torch -> ttsim.to_torch -> float32 bit patterns."""
    t = torch.from_numpy(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
    return _bits_of(ttsim.to_torch(ttsim.from_torch(t, dtype=dtype, layout=layout)))


def _mismatch_report(inp: np.ndarray, want: np.ndarray, got: np.ndarray, limit: int = 8) -> str:
    bad = np.nonzero(want.ravel() != got.ravel())[0]
    rows = [f"  [{i}] in 0x{int(inp.ravel()[i]):08X} ttnn 0x{int(want.ravel()[i]):08X} ttsim 0x{int(got.ravel()[i]):08X}"
            for i in bad[:limit]]
    return f"{bad.size} of {want.size} differ:\n" + "\n".join(rows)


def _case_input(case: dict) -> np.ndarray:
    inp = np.array(case["input_bits"], dtype=np.uint32)
    if case["layout"] == "isolated":
        full = np.zeros(case["tensor_shape"], dtype=np.uint32)
        full[:, 0] = inp
        return full
    return inp.reshape(case["tensor_shape"])


def _case_expected(case: dict, label: str) -> np.ndarray:
    out = np.array(case["outputs"][label]["output_bits"], dtype=np.uint32)
    if case["layout"] == "isolated":
        assert case["outputs"][label]["nonzero_outside_col0"] == 0
        full = np.zeros(case["tensor_shape"], dtype=np.uint32)
        full[:, 0] = out
        return full
    return out.reshape(case["tensor_shape"])


def _numerics_cases(dump: dict) -> dict:
    cases = dump["numerics"]["cases"]
    assert len(cases) >= 8
    return cases


def test_host_conversions_bit_exact_on_dump_cases(real):
    """from_torch(float32, dtype, layout) -> to_torch: the real package's float32 bits, NaN payloads included."""
    problems, n = [], 0
    for cname, case in _numerics_cases(real).items():
        inp = _case_input(case)
        for label, (dtype, layout) in ROUTES.items():
            assert "output_bits" in case["outputs"][label], (cname, label, case["outputs"][label])
            want = _case_expected(case, label)
            got = ttsim_roundtrip(inp.view(np.float32), dtype, layout)
            n += want.size
            if not np.array_equal(want, got):
                problems.append(f"{cname}/{label}: " + _mismatch_report(inp, want, got))
    assert not problems, "\n".join(problems)
    assert n > 25_000, n


def test_bf16_torch_input_to_block_float_is_double_rounding(real):
    """from_torch(torch bf16, dtype=bfloat8_b/4_b) equals the real to_dtype(bf16 tensor, bfp) route."""
    problems = []
    for cname, case in _numerics_cases(real).items():
        inp = _case_input(case)
        bf16 = _case_expected(case, "bfloat16_row_major")  # ttnn's own bf16 rounding of the input
        src = torch.from_numpy((bf16 >> 16).astype(np.uint16).view(np.int16)).view(torch.bfloat16)
        for label in ("bfloat8_b_tile", "bfloat4_b_tile"):
            alt = case["alternative_routes"][f"{label}__bf16_then_to_dtype"]
            assert "error" not in alt, alt
            want = _case_expected(case, label).ravel().copy()
            want[alt.get("diff_flat_index", [])] = alt.get("diff_output_bits", [])
            got = ttsim_roundtrip(src, *ROUTES[label])
            if not np.array_equal(want.reshape(got.shape), got):
                problems.append(f"{cname}/{label} via bf16: " + _mismatch_report(inp, want, got.ravel()))
    assert not problems, "\n".join(problems)


def test_reference_model_is_exact_in_the_dump(real):
    """The numpy model the fuzz test trusts matched the real package on every recorded input."""
    ref = real["numerics"]["reference_model"]
    for cname, counts in ref["mismatches"].items():
        assert counts and all(v == 0 for v in counts.values()), (cname, counts)
    for gname, res in ref["fuzz"]["results"].items():
        assert res["mismatches"] and all(v == 0 for v in res["mismatches"].values()), (gname, res)


FUZZ_SEED = 20251129
FUZZ_TENSORS_PER_GENERATOR = 6


def _fuzz_inputs():
    rng = np.random.default_rng(FUZZ_SEED)
    gens = {
        "random_bits": lambda: rng.integers(0, 2**32, (64, 64), dtype=np.uint64).astype(np.uint32),
        "normal_blockscaled": lambda: (rng.standard_normal((64, 64))
                                       * np.repeat(np.exp2(rng.integers(-60, 60, (64, 4))), 16, axis=1)),
        "wide_range": lambda: rng.standard_normal((64, 64)) * np.exp2(rng.uniform(-149, 128, (64, 64))),
        "bf16_grid_ties": lambda: ((rng.integers(-(2**15), 2**15, (64, 64)).astype(np.int64) << 16 | 0x8000)
                                   .astype(np.uint32)),
        "bfp_ties": lambda: (rng.integers(-64, 64, (64, 64)) * 2.0 ** rng.integers(-9, -4, (64, 64))),
        "small_ints_unaligned": lambda: rng.integers(-300, 300, (3, 40, 72)).astype(np.float64),
        "subnormals_and_specials": lambda: np.where(
            rng.random((48, 80)) < 0.05,
            rng.choice(np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 3.4e38]), (48, 80)),
            rng.standard_normal((48, 80)) * np.exp2(rng.integers(-140, -120, (48, 80)))),
    }
    for gname, gen in gens.items():
        for i in range(FUZZ_TENSORS_PER_GENERATOR):
            with np.errstate(over="ignore", invalid="ignore"):
                x = gen()
                u = x if x.dtype == np.uint32 else x.astype(np.float32).view(np.uint32)
            yield f"{gname}#{i}", np.ascontiguousarray(u)


def _reference_bits(ref: dict, u: np.ndarray) -> dict[str, np.ndarray]:
    c = u.shape[-1]
    padc = (-c) % 32  # TILE pads the last dim with zeros; rows padding never shares a block
    up = np.pad(u, [(0, 0)] * (u.ndim - 1) + [(0, padc)])
    blocks = ref["ref_tile_blocks"](up)
    return {
        "bfloat16_row_major": ref["ref_bf16_bits"](u),
        "bfloat16_tile": ref["ref_bf16_bits"](u),
        "bfloat8_b_tile": ref["ref_bfp_bits"](blocks, 7).reshape(up.shape)[..., :c],
        "bfloat4_b_tile": ref["ref_bfp_bits"](blocks, 3).reshape(up.shape)[..., :c],
    }


def test_host_conversions_match_reference_model_fuzz():
    """Seeded random float32 data: ttsim vs the dump's numpy reference model (bit-exact with ttnn)."""
    ref = _reference_model()
    problems, n = [], 0
    for name, u in _fuzz_inputs():
        expected = _reference_bits(ref, u)
        for label, (dtype, layout) in ROUTES.items():
            got = ttsim_roundtrip(u.view(np.float32), dtype, layout)
            n += u.size
            if not np.array_equal(expected[label], got):
                problems.append(f"{name}/{label}: " + _mismatch_report(u, expected[label], got))
    assert not problems, "\n".join(problems[:20])
    assert n >= 400_000, n


# ---------------------------------------------------------------------------- padded shapes

_DTYPES = {"BFLOAT16": ttsim.bfloat16, "BFLOAT8_B": ttsim.bfloat8_b, "BFLOAT4_B": ttsim.bfloat4_b,
           "FLOAT32": ttsim.float32}
_LAYOUTS = {"ROW_MAJOR": ttsim.ROW_MAJOR_LAYOUT, "TILE": ttsim.TILE_LAYOUT}


def test_padded_shapes(real):
    results = real["padded_shapes"]["results"]
    assert len(results) >= 60
    problems = []
    for key, rec in results.items():
        shape_s, dn, ln = key.rsplit("/", 2)
        shape = json.loads(shape_s)
        assert "error" not in rec, (key, rec)
        t = ttsim.from_torch(torch.ones(shape, dtype=torch.float32), dtype=_DTYPES[dn], layout=_LAYOUTS[ln])
        got = {"shape": list(t.shape), "padded_shape": list(t.padded_shape), "shape_repr": repr(t.shape),
               "padded_shape_repr": repr(t.padded_shape), "logical_volume": t.logical_volume(),
               "volume": t.volume(), "dtype": repr(t.dtype), "layout": repr(t.layout),
               "read_back_shape": list(ttsim.to_torch(t).shape)}
        want = {k: rec[k] for k in got}
        if got != want:
            problems.append(f"{key}: ttsim {got}\n    ttnn {want}")
    assert not problems, "\n".join(problems)


def test_block_floats_require_tile_layout(real):
    for dn, rec in real["numerics"]["bfp_row_major_request"].items():
        assert rec["ok"] is False
        with pytest.raises(RuntimeError):
            ttsim.from_torch(torch.ones(2, 3), dtype=_DTYPES[dn], layout=ttsim.ROW_MAJOR_LAYOUT)
