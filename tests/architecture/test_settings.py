"""Configuration is read in one place per package: environment variables are touched only
in settings modules and the CLI, and nothing writes the environment at import time."""

from __future__ import annotations

import ast
import subprocess
import sys

from imports import ROOT, modules

#: the modules allowed to read or write os.environ / os.getenv (settings modules, the CLI)
ALLOWED = {"ttsim.settings", "model.settings", "harness.base.settings", "hil.settings", "harness.commands.cli"}


def _touches_environ(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "putenv", "unsetenv") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "os" and \
                any(a.name in ("environ", "getenv", "putenv") for a in node.names):
            return True
    return False


def readers() -> set[str]:
    return {m for m, path in modules().items() if _touches_environ(ast.parse(path.read_text()))}


def test_only_settings_modules_read_the_environment():
    new = sorted(readers() - ALLOWED)
    assert not new, f"these modules read the environment outside a settings module: {new}"


def test_the_scan_sees_each_spelling():
    for src in ("import os\nos.environ.get('X')", "import os\nos.getenv('X')", "from os import environ",
                "import os\ndef f(env=os.environ): pass"):
        assert _touches_environ(ast.parse(src)), src
    assert not _touches_environ(ast.parse("import os\nos.path.join('a')"))


def test_importing_the_packages_writes_no_environment_variable():
    code = ("import os; before = dict(os.environ); "
            "import ttsim, model.serving, model.generator, harness.system, harness.scenario, harness.commands.cli, "
            "harness.engine.config, hil.discovery; "
            "print(sorted(set(os.environ.items()) ^ set(before.items())))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
