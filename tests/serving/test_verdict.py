"""`ttsim arms --expect`: a sweep that CI can gate on, and the arm `as-is` for a generator that
switches none of our flags."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from harness.commands import cli
from harness.base.errors import UsageError
from harness.sweep import verdict

ROOT = Path(__file__).resolve().parents[2]


def _report(**failed):
    return {"arms": {arm: {"failed_requests": n, "requests": 64} for arm, n in failed.items()}}


@pytest.mark.parametrize("expect, failed, broken", [
    ("control=fail", {"control": 1}, []),
    ("control=fail", {"control": 0}, ["ttsim arms: control: expected control=fail: no request failed"]),
    ("all=0", {"all": 0}, []),
    ("all=pass", {"all": 1}, ["ttsim arms: all: expected all=pass: 1 of 64 requests failed"]),
    ("all<=2", {"all": 2}, []),  # the bound itself holds
    ("all<=2", {"all": 3}, ["ttsim arms: all: expected all<=2: 3 of 64 requests failed"]),
    ("all<=3.125%", {"all": 2}, []),  # 2/64 = 3.125% exactly
    ("all<=3%", {"all": 2}, ["ttsim arms: all: expected all<=3%: 2 of 64 requests failed (3.12%)"]),
    ("control=fail,all=0", {"control": 0, "all": 1}, ["ttsim arms: control: expected control=fail: no request "
                                                      "failed", "ttsim arms: all: expected all=0: 1 of 64 requests "
                                                      "failed"]),
])
def test_each_broken_expectation_is_one_line(expect, failed, broken):
    lines = verdict.check(_report(**failed), verdict.parse(expect, list(failed)))
    assert [line.split(" (a negative")[0] for line in lines] == broken


@pytest.mark.parametrize("expect, message", [
    ("control", "write ARM=fail, ARM=pass"),
    ("control=maybe", "write ARM=fail, ARM=pass"),
    ("bogus=0", "arm 'bogus' is not in this sweep"),
    ("all=0,all=fail", "arm 'all' expected twice"),
    ("all<=-1", "write ARM=fail"),
])
def test_a_bad_expectation_is_refused_by_name(expect, message):
    with pytest.raises(UsageError, match=message):
        verdict.parse(expect, ["control", "all"])


def _main(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


@pytest.mark.needs_fault_injection
def test_the_verdict_gates_the_exit_code(tmp_path, monkeypatch):
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path))
    common = ("arms", "--seeds", "2", "--seed-start", "27", "--arms", "control,all", "--workers", "1")
    rc, out, err = _main(*common, "--expect", "control=fail,all=0")
    assert rc == 0 and "ttsim arms:" not in err, err
    rc, out, err = _main(*common, "--expect", "control=0,all=fail")
    verdicts = [line for line in err.splitlines() if line.startswith("ttsim arms:")]
    assert rc == 1 and len(verdicts) == 2, err
    assert verdicts[0].startswith("ttsim arms: control: expected control=0: ") and "of 64 requests failed" in verdicts[0]
    assert verdicts[1] == ("ttsim arms: all: expected all=fail: no request failed (a negative control that "
                           "caught nothing)")


@pytest.fixture
def no_flags_generator(tmp_path, monkeypatch):
    """A generator that switches none of our flags (ttsim_flags = ()): ours, behind a factory."""
    monkeypatch.delitem(sys.modules, "ttnn", raising=False)
    path = tmp_path / "asis.py"
    path.write_text("from model.generator import Generator\n\n\ndef make(model, tt, mesh, **kw):\n"
                    "    return Generator(model, tt, mesh, **kw)\n\n\nmake.ttsim_flags = ()\n")
    yield f"{path}:make"
    sys.modules.pop("ttnn", None)


@pytest.mark.needs_fault_injection
def test_a_generator_without_flags_runs_as_is_and_is_refused_other_arms(no_flags_generator, tmp_path, monkeypatch):
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path))
    rc, _, err = _main("arms", "--seeds", "1", "--arms", "control", "--generator", no_flags_generator)
    assert rc == 2 and err.count("\n") == 1
    assert "arm 'control' needs prefilled_slots_fix, merge_batch_guard, position_clamp, which" in err
    assert "run --arms as-is" in err
    report = tmp_path / "r.json"
    rc, out, err = _main("arms", "--seeds", "2", "--seed-start", "27", "--workers", "1", "--json", str(report),
                         "--generator", no_flags_generator)
    assert rc == 0, err
    assert list(json.loads(report.read_text())["arms"]) == ["as-is"]  # the default for such a generator


def test_an_undeclared_or_bad_ttsim_flags_is_named(tmp_path, monkeypatch):
    from harness import loader
    from harness.base.spec import GeneratorSpecError, parse_generator
    from model.flags import USER_FLAGS

    spec = parse_generator(f"{tmp_path / 'g.py'}:make")
    assert loader.honoured_flags(spec, object()) == USER_FLAGS
    bad = type("F", (), {"ttsim_flags": ("prefilled_slots_fix", "bogus")})
    with pytest.raises(GeneratorSpecError, match="names unknown flag"):
        loader.honoured_flags(spec, bad)
    with pytest.raises(GeneratorSpecError, match="must be a tuple of flag names"):
        loader.honoured_flags(spec, type("F", (), {"ttsim_flags": "merge"}))
