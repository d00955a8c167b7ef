"""The layering holds: no import cycle between packages or between modules, and the
packages import one way: fixtures (the composition root) -> model, hil and ttsim; model and
hil import no other package of ours (model is handed its ttnn-like module). Inside fixtures,
the entry points (cli, vllm, plugin) sit above the root and its engine, and the subpackages
import one way."""

from __future__ import annotations

import pytest

from imports import cycles, edges, modules, package_of

#: what each package may import of ours (tests may import anything)
ALLOWED = {
    "ttsim": set(),
    "model": set(),  # it is handed its ttnn-like module; it never names ttsim or ttnn
    "hil": set(),  # the hardware target imports neither torch-side packages nor fixtures
    "fixtures": {"ttsim", "model", "hil"},  # the composition root chooses the backend
}


def test_no_module_import_cycle():
    found = cycles(edges())
    assert not found, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_packages_import_one_way():
    bad = sorted(f"{m} imports {t}" for m, ts in edges().items() for t in ts
                 if package_of(t) != package_of(m) and package_of(t) not in ALLOWED[package_of(m)])
    assert not bad, "\n".join(bad)


#: the entry points into fixtures: the CLI, the `vllm serve` plugin and the pytest plugin
ENTRY_POINTS = ("fixtures.cli", "fixtures.vllm", "fixtures.plugin")
#: the subpackages of fixtures, each one node of the package graph
SUBPACKAGES = ("fixtures.engine", "fixtures.sweep", "fixtures.vllm", "fixtures.plugin")


def _under(module: str, prefixes) -> str | None:
    return next((p for p in prefixes if module == p or module.startswith(p + ".")), None)


def test_nothing_below_the_entry_points_imports_them():
    """The composition root (fixtures.system and what it builds on, fixtures.engine included)
    is imported by the entry points, never the reverse."""
    bad = sorted(f"{m} imports {t}" for m, ts in edges().items() if m.startswith("fixtures")
                 for t in ts if _under(t, ENTRY_POINTS) and _under(t, ENTRY_POINTS) != _under(m, ENTRY_POINTS))
    assert not bad, "\n".join(bad)


def test_the_subpackages_of_fixtures_form_no_cycle():
    """Each subpackage is one node (its modules' imports together); fixtures' own modules stay nodes."""
    graph: dict[str, set[str]] = {}
    for m, ts in edges().items():
        if m.startswith("fixtures"):
            node = _under(m, SUBPACKAGES) or m
            graph.setdefault(node, set()).update(
                _under(t, SUBPACKAGES) or t for t in ts if t.startswith("fixtures") and (_under(t, SUBPACKAGES) or t) != node)
    found = cycles(graph)
    assert not found, "cycles between fixtures' subpackages:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_vllm_plugin_is_part_of_fixtures():
    mods = modules()
    assert "fixtures.vllm.worker" in mods and not any(m.startswith("ttsim_vllm") for m in mods)


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
