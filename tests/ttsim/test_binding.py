"""Every ttnn call the model and generator make binds to a real ttnn 0.81.1 overload.

The model is handed its ttnn module, so a recording run hands it a proxy of ttsim that
notes each call (name, positional count, keyword names) and passes it on; Tensor and
MeshDevice methods called from model/fixtures code are noted too. The run covers the TINY
model on a 1x2 mesh (fabric, TP=2 collectives): prefill, traced decode through the
generator, and a serving scenario driven by vLLM's scheduler. Each distinct call must bind
to one of the real overloads in the conformance dump (fixture ``real``): positional count
within the positional parameters, every keyword a parameter of that overload, every
required parameter given. What this cannot see: argument TYPES and values (the dump has
annotations, but a card is what rejects a wrong dtype or shape).
"""

from __future__ import annotations

import enum
import inspect
import sys
import types
from collections import Counter

import pytest
import torch

import ttsim
from harness.base.spec import RunSpec
from harness import scenario
from harness.system import SimBackend
from harness.workloads import FaultKnobs, stage3
from model.flags import ARMS
from model.protocol import GREEDY, read_output
from model.qwen36 import Qwen36Model
from model.weights import generate_weights

#: callers whose calls are recorded: the system under test and the fixtures that drive it
CALLERS = ("model.", "fixtures.")


class Recorder:
    def __init__(self):
        self.calls: Counter = Counter()  # (path, n_positional, keyword names) -> count

    def note(self, path: str, args, kwargs) -> None:
        self.calls[(path, len(args), tuple(sorted(kwargs)))] += 1

    def wrap(self, fn, path: str):
        def recorded(*args, **kwargs):
            self.note(path, args, kwargs)
            return fn(*args, **kwargs)

        return recorded


class _ClassProxy:
    """A ttnn class: constructing it is a recorded call; isinstance and attributes pass through."""

    def __init__(self, cls, path: str, rec: Recorder):
        self._cls, self._path, self._rec = cls, path, rec

    def __call__(self, *args, **kwargs):
        self._rec.note(self._path, args, kwargs)
        return self._cls(*args, **kwargs)

    def __instancecheck__(self, obj) -> bool:
        return isinstance(obj, self._cls)

    def __getattr__(self, name):
        return getattr(self._cls, name)


class ModuleProxy:
    """What the model is handed instead of ``ttsim``: the same module, every call noted."""

    def __init__(self, mod, rec: Recorder, path: str = "ttnn"):
        self._mod, self._rec, self._path = mod, rec, path

    def __getattr__(self, name):
        obj = getattr(self._mod, name)
        path = f"{self._path}.{name}"
        if isinstance(obj, types.ModuleType):
            return ModuleProxy(obj, self._rec, path)
        if inspect.isclass(obj):
            return obj if issubclass(obj, enum.Enum) else _ClassProxy(obj, path, self._rec)
        if callable(obj):
            return self._rec.wrap(obj, path)
        return obj


def _record_methods(monkeypatch, rec: Recorder, real: dict) -> None:
    """Note Tensor / MeshDevice method calls made from model or fixtures code (not ttsim's own)."""
    for cls, path in ((ttsim.Tensor, "ttnn.Tensor"), (ttsim.MeshDevice, "ttnn.MeshDevice")):
        members = real["signatures"][path]["members"]
        for name, raw in list(vars(cls).items()):
            if name.startswith("_") or not inspect.isfunction(raw) or members.get(name, {}).get("kind") != "method":
                continue

            def method(self, *args, __fn=raw, __path=f"{path}.{name}", **kwargs):
                if sys._getframe(1).f_globals.get("__name__", "").startswith(CALLERS):
                    rec.note(__path, args, kwargs)
                return __fn(self, *args, **kwargs)

            monkeypatch.setattr(cls, name, method)


# ---------------------------------------------------------------------------- binding

_POSITIONAL = ("POSITIONAL_ONLY", "POSITIONAL_OR_KEYWORD")
_KEYWORD = ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")
_VARIADIC = ("VAR_POSITIONAL", "VAR_KEYWORD")


def binds(params: list[dict], n_positional: int, keywords) -> bool:
    """Would a call with ``n_positional`` arguments and these keyword names bind to ``params``?"""
    kinds = {p["kind"] for p in params}
    positional = [p["name"] for p in params if p["kind"] in _POSITIONAL]
    if n_positional > len(positional) and "VAR_POSITIONAL" not in kinds:
        return False
    given = set(positional[:n_positional])
    by_keyword = {p["name"] for p in params if p["kind"] in _KEYWORD}
    for k in keywords:
        if k in given or (k not in by_keyword and "VAR_KEYWORD" not in kinds):
            return False
        given.add(k)
    return all(p["name"] in given for p in params if "default" not in p and p["kind"] not in _VARIADIC)


def _overloads(real: dict, path: str) -> list[list[dict]] | None:
    sigs = real["signatures"]
    owner, _, name = path.rpartition(".")
    if owner in ("ttnn.Tensor", "ttnn.MeshDevice"):
        entry = sigs[owner]["members"].get(name)
    else:
        entry = sigs.get(path)
    if entry is None:
        return None
    return [o["params"] for o in (entry.get("init") if entry.get("kind") == "class" else entry.get("overloads")) or []]


def unbound(real: dict, calls) -> list[str]:
    """The recorded calls no real overload accepts, described."""
    bad = []
    for path, n_pos, kws in sorted(calls):
        overloads = _overloads(real, path)
        if overloads is None:
            bad.append(f"{path}: no such name in real ttnn 0.81.1")
        elif not any(binds(ps, n_pos, kws) for ps in overloads):
            bad.append(f"{path}({n_pos} positional, keywords {list(kws)}) binds to none of: "
                       + " | ".join("(" + ", ".join(p["name"] for p in ps) + ")" for ps in overloads))
    return bad


# ---------------------------------------------------------------------------- the recording run

@pytest.fixture(scope="module")
def recording(real):
    """One recording run of the model, generator and serving path on a 1x2 TINY mesh."""
    rec = Recorder()
    proxy = ModuleProxy(ttsim, rec)
    mp = pytest.MonkeyPatch()
    try:
        _record_methods(mp, rec, real)
        system = scenario.System(RunSpec(seed=7, model="tiny", mesh_cols=2, backend=SimBackend(proxy)), FaultKnobs())
        try:
            gen = system.generator(flags=ARMS["all"])
            rows = torch.zeros(2, system.max_pages, dtype=torch.int32)
            rows[0, :2], rows[1, :2] = torch.tensor([1, 2]), torch.tensor([3, 4])
            gen.warmup_model_prefill(enable_trace=True)  # the hybrid's chunk trace (trace mode all)
            rows[1, :6] = torch.arange(3, 9, dtype=torch.int32)
            prompts = [list(b"binding proof"), list(b"on a 1x2 mesh, traced, " * 6)]  # 138: a full chunk replays
            first = gen.prefill_forward(prompts, list(rows), empty_slots=[0, 1], sampling_params=GREEDY,
                                        enable_trace=True)
            tokens, pos = first.tolist(), [len(p) for p in prompts]
            for step in range(3):  # traced decode, on-device sampling, async reads (as the vLLM plugin)
                out = gen.decode_forward(tokens, pos, rows, reset_batch=step == 0, read_from_device=False, sampling_params=GREEDY)
                tokens = read_output(gen, proxy, out)
                pos = [p + 1 for p in pos]
            gen.release()
            # both prefill paths of the model on the same mesh (the system's model took the
            # environment's choice): chunks at an offset, and a continuation from the pages
            weights = generate_weights(system.config, 0)
            for streaming in (True, False):
                model = Qwen36Model(proxy, system.mesh, system.config, weights, max_slots=2,
                                    num_blocks=2 * system.max_pages, sdpa_streaming=streaming)
                row = torch.arange(system.max_pages, dtype=torch.int32)
                toks = list(b"both prefill paths, " * 10)  # 200 tokens: two chunks
                model.prefill(toks, slot=0, page_table_row=row)
                model.prefill(toks[:128], slot=1, page_table_row=row + system.max_pages)
                model.prefill(toks[128:], slot=1, page_table_row=row + system.max_pages, start_pos=128)
        finally:
            system.close()
        # the serving path: vLLM's scheduler, stable slots, bucketed traces, the merge (answers are
        # checked by tests/serving; here only that every request ran to its length)
        workload = stage3(9, n_requests=3, concurrency=3, knobs=FaultKnobs(), max_prompt=24, min_tokens=3,
                          max_tokens=4)
        # and the what-if arm: its mechanisms beyond upstream must bind too (uninitialized inputs,
        # non-blocking merge reads); the what-if on the sweep model, whose async path merges (the
        # hybrid declares no async decode)
        for model, arm in (("tiny", "all"), ("markov", "what-if")):
            result = scenario.run_scenario(workload, arm, RunSpec(seed=9, model=model, mesh_cols=2, backend=SimBackend(proxy)), expected={r.request_id: [] for r in workload.requests})
            assert [len(v.got) for v in result.verdicts] == [r.max_tokens for r in workload.requests]
    finally:
        mp.undo()
    return rec


def test_every_call_of_the_model_generator_and_serving_path_binds_to_real_ttnn(real, recording):
    names = {path for path, _, _ in recording.calls}
    # the run really covered what production exercises on cards
    for want in ("ttnn.set_fabric_config", "ttnn.open_mesh_device", "ttnn.begin_trace_capture",
                 "ttnn.end_trace_capture", "ttnn.execute_trace", "ttnn.all_reduce", "ttnn.record_event",
                 "ttnn.transformer.chunked_scaled_dot_product_attention",
                 "ttnn.transformer.scaled_dot_product_attention", "ttnn.experimental.paged_fill_cache",
                 "ttnn.transformer.paged_scaled_dot_product_attention_decode", "ttnn.get_device_tensors", "ttnn.to_torch",
                 "ttnn.copy_device_to_host_tensor", "ttnn.allocate_tensor_on_device",
                 "ttnn.Shape", "ttnn.ShardTensorToMesh", "ttnn.MeshDevice.get_num_devices"):
        assert want in names, f"the recording run never called {want}"
    assert len(recording.calls) >= 60, len(recording.calls)
    bad = unbound(real, recording.calls)
    assert not bad, f"{len(bad)} of {len(recording.calls)} distinct calls do not bind to real ttnn 0.81.1:\n" + \
        "\n".join(bad)


def test_a_planted_bad_keyword_or_extra_positional_is_caught(real, monkeypatch):
    """ttsim made lenient on purpose (it swallows an unknown keyword / extra positional):
    the sim run passes, the binding check does not."""
    rec = Recorder()
    proxy = ModuleProxy(ttsim, rec)
    add, all_reduce = ttsim.add, ttsim.all_reduce
    monkeypatch.setattr(ttsim, "add", lambda a, b, *, fused_bias=None, **kw: add(a, b, **kw))
    monkeypatch.setattr(ttsim, "all_reduce", lambda x, _axis=None, **kw: all_reduce(x, **kw))
    system = scenario.System(RunSpec(seed=7, model="markov", mesh_cols=2, backend=SimBackend(proxy)), FaultKnobs())
    try:
        x = proxy.from_torch(torch.ones(1, 1, 32, 32), dtype=proxy.bfloat16, layout=proxy.TILE_LAYOUT,
                             device=system.mesh, mesh_mapper=proxy.ReplicateTensorToMesh(system.mesh))
        proxy.add(x, x, fused_bias=None)
        proxy.all_reduce(x, 1)
    finally:
        system.close()
    bad = unbound(real, rec.calls)
    assert len(bad) == 2, bad
    assert bad[0].startswith("ttnn.add(2 positional, keywords ['fused_bias']) binds to none of")
    assert bad[1].startswith("ttnn.all_reduce(2 positional, keywords []) binds to none of")


@pytest.mark.parametrize("n_pos, kws, ok", [
    (2, (), True),
    (2, ("cluster_axis", "num_links"), True),
    (1, ("dim",), True),
    (0, ("input_tensor", "dim"), True),
    (1, ("cluster_axis",), False),  # dim missing
    (2, ("fabric_config",), False),  # no such keyword
    (3, (), False),  # cluster_axis is keyword-only
    (2, ("dim",), False),  # dim given twice
    (0, ("dim",), False),  # input_tensor missing
])
def test_binds_follows_python_call_rules(real, n_pos, kws, ok):
    (params,) = _overloads(real, "ttnn.all_gather")
    assert binds(params, n_pos, kws) is ok
