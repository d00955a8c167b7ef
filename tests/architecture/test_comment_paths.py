"""Every path of ours that a docstring or comment names (``harness/system.py``,
``tests/generators/silent.py``, ``docs/fidelity.md``) exists: a moved or renamed file leaves no
stale pointer behind. Upstream paths (tt-metal's ``models/...``, the plugin's ``src/...``) are
not ours and are not checked."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OURS = ("ttsim", "model", "harness", "fixtures", "hil", "tests", "bench", "conformance", "bin", "docs")
#: upstream files whose paths look like ours (the plugin's docs, tt-metal's tests/scripts)
UPSTREAM = {"docs/SCHEDULING.md", "tests/scripts/common.py"}
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./-]*\w\.(?:py|md|json|jsonl|yaml|textproto|sh|png))" % "|".join(OURS))


def _texts(path: Path):
    """(line, text) of every comment and string literal in a Python file."""
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type in (tokenize.COMMENT, tokenize.STRING):
            yield tok.start[0], tok.string


def named_paths():
    for package in ("ttsim", "model", "harness", "fixtures", "hil", "bench", "tests"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # its own examples
            for line, text in _texts(path):
                for named in PATH.findall(text):
                    yield path.relative_to(ROOT), line, named


def test_every_path_a_comment_names_exists():
    missing = [f"{where}:{line}: {named}" for where, line, named in named_paths()
               if named not in UPSTREAM and not (ROOT / named).exists()]
    assert not missing, "comments and docstrings name files that do not exist:\n" + "\n".join(missing)


def test_the_scan_finds_paths_and_would_catch_a_stale_one():
    found = {named for _, _, named in named_paths()}
    assert "docs/fidelity.md" in found and len(found) > 20
    assert PATH.findall("see harness/system.py and models/tt_transformers/tt/generator.py") == ["harness/system.py"]
