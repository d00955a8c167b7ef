"""The layering holds: no import cycle between packages or between modules, and the packages
import one way: fixtures (the pytest plugin) -> harness (the composition root and what drives
it) -> model, hil and ttsim; model and hil import no other package of ours (model is handed
its ttnn-like module).

Inside harness, one floor per folder: ``harness.base`` (the shared vocabulary: settings, the
run specification, errors, seeds, records) at the bottom, ``harness.engine`` (vLLM's engine
parts) on it, the composition root's own modules (harness/*.py) above them, ``harness.sweep``,
``harness.vllm`` and ``harness.snapshots`` on the root, and ``harness.commands`` (the `ttsim`
command and its bodies) on top. No folder imports one above it, so with the root counted as
one node the folders form no circle."""

from __future__ import annotations

import pytest

from imports import cycles, edges, modules, package_of

#: what each package may import of ours (tests may import anything)
ALLOWED = {
    "ttsim": set(),
    "model": set(),  # it is handed its ttnn-like module; it never names ttsim or ttnn
    "hil": set(),  # the hardware target imports neither torch-side packages nor harness
    "harness": {"ttsim", "model", "hil"},  # the composition root chooses the backend
    "fixtures": {"harness", "ttsim", "model", "hil"},  # the pytest plugin builds on the harness
}

#: harness's folders, bottom up, and what each may import of harness ("root": harness/*.py)
FLOORS = {
    "base": {"base"},
    "engine": {"base", "engine"},
    "root": {"base", "engine", "root"},
    "sweep": {"base", "engine", "root", "sweep"},
    "vllm": {"base", "engine", "root", "vllm"},
    "snapshots": {"base", "snapshots"},
    "commands": {"base", "engine", "root", "sweep", "vllm", "snapshots", "commands"},
}


def floor_of(module: str) -> str:
    """The harness folder a harness module stands in ("root": the package's own modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in FLOORS and parts[1] != "root") else "root"


def _harness_edges() -> dict[str, set[str]]:
    return {m: {t for t in ts if t.startswith("harness")} for m, ts in edges().items() if m.startswith("harness")}


def test_no_module_import_cycle():
    found = cycles(edges())
    assert not found, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_packages_import_one_way():
    bad = sorted(f"{m} imports {t}" for m, ts in edges().items() for t in ts
                 if package_of(t) != package_of(m) and package_of(t) not in ALLOWED[package_of(m)])
    assert not bad, "\n".join(bad)


def test_every_harness_module_stands_on_a_known_floor():
    assert {floor_of(m) for m in modules() if m.startswith("harness.")} <= set(FLOORS)


def test_harness_folders_import_only_downwards():
    bad = sorted(f"{m} ({floor_of(m)}) imports {t} ({floor_of(t)})" for m, ts in _harness_edges().items()
                 for t in ts if t != "harness" and floor_of(t) not in FLOORS[floor_of(m)])
    assert not bad, "\n".join(bad)


def test_the_root_and_its_folders_form_no_cycle():
    """Each folder one node, the root's own modules together one node: no circle."""
    graph: dict[str, set[str]] = {}
    for m, ts in _harness_edges().items():
        graph.setdefault(floor_of(m), set()).update(floor_of(t) for t in ts if t != "harness")
    for node, targets in graph.items():
        targets.discard(node)
    found = cycles(graph)
    assert not found, "cycles between harness's folders:\n" + "\n".join(" <-> ".join(c) for c in found)


@pytest.mark.parametrize("module, floor", [("harness.system", "root"), ("harness.base.spec", "base"),
                                           ("harness.commands.cli", "commands"), ("harness.vllm", "vllm"),
                                           ("harness.engine.config", "engine")])
def test_floor_of(module, floor):
    assert floor_of(module) == floor


def test_the_vllm_plugin_is_part_of_harness():
    mods = modules()
    assert "harness.vllm.worker" in mods and not any(m.startswith("ttsim_vllm") for m in mods)


@pytest.mark.parametrize("graph, want", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
    ({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"c"}}, [["a", "b"], ["c", "d"]]),
])
def test_the_cycle_finder_finds_cycles(graph, want):
    assert sorted(cycles(graph)) == want


def test_a_lazy_import_is_an_edge(tmp_path, monkeypatch):
    """The old fabric -> api circle went through an import inside a function."""
    import imports

    pkg = tmp_path / "ttsim"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "api.py").write_text("from . import fabric\n")
    (pkg / "fabric.py").write_text("def f():\n    from .api import open_devices\n")
    monkeypatch.setattr(imports, "ROOT", tmp_path)
    monkeypatch.setattr(imports, "PACKAGES", ("ttsim",))
    assert cycles(edges()) == [["ttsim.api", "ttsim.fabric"]]
