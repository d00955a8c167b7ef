"""The numeric snapshot extension: values stored with their tolerance, compared within it."""

import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.snapshots.numeric import Close, Pcc, check, dumps, loads, numeric, table

ROOT = Path(__file__).resolve().parents[1]


def _pair(old, new):
    return loads(dumps(numeric(old))), loads(dumps(numeric(new)))


@pytest.mark.parametrize("old, new, ok", [
    (Close(1.0, abs=0.25), Close(1.25, abs=0.25), True),       # at the boundary (exact in binary)
    (Close(1.0, abs=0.25), Close(1.2500001, abs=0.25), False),
    (Close(10.0, rel=0.01), Close(9.9, rel=0.01), True),       # rel scales with the stored value
    (Close(10.0, rel=0.01), Close(9.89, rel=0.01), False),
    (Close(1.0, abs=0.1, rel=0.1), Close(1.2, abs=0.1, rel=0.1), True),
    (Pcc(0.9999, floor=0.999), Pcc(0.999, floor=0.999), True),  # the floor itself passes
    (Pcc(0.9999, floor=0.999), Pcc(0.9989, floor=0.999), False),
    (Pcc(0.99, floor=0.999), Pcc(0.9995, floor=0.999), True),    # an improvement passes
    (Close(1.0), Close(float("nan")), False),
    (Close(1.0, abs=0.1), Close(1.0, abs=0.2), False),          # a loosened tolerance is a reviewed change
])
def test_within_tolerance(old, new, ok):
    o, n = _pair({"k": old}, {"k": new})
    assert (check(o, n) == {}) is ok, check(o, n)


def test_missing_and_new_keys_fail():
    o, n = _pair({"a": 1.0, "b": 2.0}, {"a": 1.0, "c": 2.0})
    assert check(o, n) == {"b": "missing", "c": "new key"}


def test_stored_file_is_readable_and_round_trips():
    values = numeric({"matmul": {"32x32": {"pcc": Pcc(0.99991, floor=0.999), "max_abs": Close(0.0012, abs=1e-3)}}})
    text = dumps(values)
    assert text.splitlines()[1] == '  "matmul / 32x32 / max_abs": {"value": 0.0012, "abs": 0.001, "rel": 0.0},'
    assert loads(text)["matmul / 32x32 / pcc"] == {"value": 0.99991, "floor": 0.999}
    assert not math.isnan(loads(text)["matmul / 32x32 / pcc"]["value"])


def test_failure_table_shows_old_new_and_tolerance_side_by_side():
    o, n = _pair({"x": Close(1.0, abs=0.01), "p": Pcc(0.9999, floor=0.999)},
                 {"x": Close(1.5, abs=0.01), "p": Pcc(0.99, floor=0.999)})
    lines = table(o, n, check(o, n))
    assert lines[0].split() == ["key", "old", "new", "tolerance", "problem"]
    assert lines[1].split()[:5] == ["p", "0.9999", "0.99", "pcc", ">="]
    assert "below the floor by 0.009" in lines[1]
    assert lines[2].split()[:4] == ["x", "1", "1.5", "abs"] and "|diff| 0.5 > allowed 0.01" in lines[2]


def test_through_syrupy_passes_within_and_fails_outside_tolerance(tmp_path):
    """A real pytest run: record, drift within tolerance (passes, file untouched), drift
    beyond it (fails with the side-by-side table), missing snapshot (fails)."""
    test = tmp_path / "test_num.py"
    body = textwrap.dedent("""
        from harness.snapshots.numeric import Close, NumericSnapshotExtension, Pcc

        def test_values(snapshot):
            snap = snapshot.use_extension(NumericSnapshotExtension)
            assert {"op": {"pcc": Pcc(PCC, floor=0.999), "err": Close(ERR, abs=0.01)}} == snap
    """)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}

    def run(pcc, err, *extra):
        test.write_text(body.replace("PCC", repr(pcc)).replace("ERR", repr(err)))
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                               "-p", "no:ttsim", "-p", "no:faker", str(test), *extra], cwd=tmp_path, env=env,
                              capture_output=True, text=True)

    missing = run(0.9999, 0.5)
    assert missing.returncode == 1 and "does not exist" in missing.stdout
    assert run(0.9999, 0.5, "--snapshot-update").returncode == 0
    stored = tmp_path / "__snapshots__" / "test_num" / "test_values.tol.json"
    before = stored.read_text()
    assert '"op / pcc": {"value": 0.9999, "floor": 0.999}' in before
    assert run(0.9991, 0.505).returncode == 0
    assert stored.read_text() == before
    out = run(0.998, 0.6)
    assert out.returncode == 1
    rows = [" ".join(line.split()) for line in out.stdout.splitlines()]
    assert any(r.endswith("op / err 0.5 0.6 abs 0.01 + rel 0 |diff| 0.1 > allowed 0.01") for r in rows), out.stdout
    assert any(r.endswith("op / pcc 0.9999 0.998 pcc >= 0.999 below the floor by 0.001") for r in rows), out.stdout
