"""The README stays a true front door: at most 10 KB, its layout names every top-level
folder of the checkout (bin/ and .ci/ included), and every file of ours it names exists."""

from __future__ import annotations

import re
import subprocess

from imports import ROOT

README = (ROOT / "README.md").read_text()


def _tracked_top_level() -> set[str]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return {path.split("/")[0] for path in out.splitlines() if "/" in path}


def test_it_is_a_front_door_not_a_manual():
    assert len(README.encode()) <= 10 * 1024


def test_the_layout_names_every_top_level_folder():
    layout = README[README.index("## Layout"):README.index("## Seeds and replay")]
    named = set(re.findall(r"^([.\w-]+)/", layout, flags=re.M))
    named |= {".ci"} if re.search(r"^\.ci/run", layout, flags=re.M) else set()
    assert _tracked_top_level() <= named, f"not in the README's layout: {sorted(_tracked_top_level() - named)}"


def test_every_guide_and_file_it_names_exists():
    named = set(re.findall(r"`((?:docs|bin|fixtures|model|ttsim|hil|tests|bench)/[\w./-]+\.\w+)`", README))
    named |= set(re.findall(r"\]\((docs/[\w./-]+)\)", README))
    assert {"docs/arms.md", "docs/generators.md", "docs/serving.md", "docs/hardware.md", "docs/ttsim.md"} <= named
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert not missing, f"the README names files that do not exist: {missing}"
