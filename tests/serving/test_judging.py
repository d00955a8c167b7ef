"""The suite's verdict on a generator that is not ours is right both ways (inner pytest sessions
with --generator, as a user runs them): a correct generator is green; one that lost a fix while
its flags still claim it is red, and the session's summary names that fix.

The generators: tests/generators/independent.py, written from the docs alone by an author who
never read model/generator.py or tests/generators/ (its variants each lose one thing), the
shape of tt-metal's shared Generator, public qwen36's shape with its marks deleted, and ours
with one fix forced off (tests/generators/regressed.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENERATORS = ROOT / "tests" / "generators"
INCIDENTS = "tests/serving/test_incidents.py"
RATES = "tests/serving/test_fix_rates.py"
MARKS = "the prefilled-slot fix (QWEN36_PREFILLED_SLOTS_FIX)"
GUARD = "the merge batch guard (QWEN36_MERGE_BATCH_GUARD)"

pytestmark = pytest.mark.needs_fault_injection

#: generator -> the fixes the verdict must name (none: green)
CASES = {
    "independent.py:IndependentGenerator": (),
    "independent.py:IndependentNoMarks": (MARKS,),
    "independent.py:IndependentNoGuard": (GUARD,),
    "independent.py:IndependentNoClamp": (),
    "tt_transformers_style.py:TtTransformersStyleGenerator": (),
    "tt_transformers_style.py:RegressedTtTransformersStyleGenerator": (MARKS,),
    "qwen36_style.py:RegressedQwen36StyleGenerator": (MARKS,),
    "regressed.py:without_marks": (MARKS,),
    "regressed.py:without_guard": (GUARD,),
    "regressed.py:without_clamp": (),
}


def _session(inner_pytest, generator: str, *files: str):
    return inner_pytest(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "-rfs", *files,
                         "--generator", f"{GENERATORS / generator}"], cwd=ROOT)


@pytest.mark.parametrize("generator, broken", list(CASES.items()), ids=list(CASES))
def test_the_incidents_verdict(inner_pytest, generator, broken):
    p = _session(inner_pytest, generator, INCIDENTS)
    named = [line.split("ttsim --generator: ", 1)[1].split(" did not hold")[0]
             for line in p.stdout.splitlines() if line.startswith("ttsim --generator: ") and "did not hold" in line]
    assert p.returncode == (1 if broken else 0), p.stdout[-3000:]
    assert sorted(named) == sorted(broken), p.stdout[-3000:]
    assert " tests drove " in p.stdout and "the position clamp is not regression-tested" in p.stdout


def test_the_independent_generator_is_green_on_every_judging_test(inner_pytest):
    p = _session(inner_pytest, "independent.py:IndependentGenerator", INCIDENTS, RATES)
    assert p.returncode == 0, p.stdout[-3000:]
    assert "0 failed" in next(line for line in p.stdout.splitlines() if " tests drove " in line)
