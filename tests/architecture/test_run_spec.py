"""The run specification travels explicitly (harness/base/spec.py): no process-wide generator,
one place that aliases ``ttnn`` for the user's code, one builder of replay lines."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("ttsim", "model", "harness", "fixtures", "hil")


def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text()


def test_only_the_loader_touches_sys_modules_ttnn():
    touch = re.compile(r"""(sys\.modules\[\s*["']ttnn["']\s*\]\s*=|del\s+sys\.modules\[\s*["']ttnn["']\s*\]|"""
                       r"""sys\.modules\.(pop|setdefault)\(\s*["']ttnn["'])""")
    found = sorted({path for path, text in _sources() if touch.search(text)})
    assert found == ["harness/loader.py"], found


def test_no_module_keeps_a_generator_in_a_global():
    """A module-level ``global`` statement for a generator, or a module-level name holding one,
    is the process global that used to carry the user's generator."""
    bad = []
    for path, text in _sources():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Global) and any("gen" in n or "user" in n for n in node.names):
                bad.append(f"{path}:{node.lineno}: global {', '.join(node.names)}")
    assert not bad, "\n".join(bad)


def test_one_replay_command_builder():
    found = sorted({path for path, text in _sources() if "bin/ttsim replay --arm" in text})
    assert found == ["harness/base/spec.py"], found
