"""`--snapshot-update` must never delete the snapshots of tests it did not run."""

import os
import subprocess
import sys
import textwrap


def test_updating_one_test_keeps_the_snapshots_of_the_others(tmp_path):
    (tmp_path / "test_goldens.py").write_text(textwrap.dedent("""
        def test_a(snapshot):
            assert [1, 2, 3] == snapshot

        def test_b(snapshot):
            assert {"tokens": [4, 5]} == snapshot
    """))
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--snapshot-update"]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([*run, "test_goldens.py"], cwd=tmp_path, env=env, check=True, capture_output=True)
    ambr = tmp_path / "__snapshots__" / "test_goldens.ambr"
    assert "test_b" in ambr.read_text()
    for subset in (["test_goldens.py::test_a"], ["test_goldens.py", "-k", "test_a"]):
        out = subprocess.run([*run, *subset], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "test_b" in ambr.read_text(), f"updating {subset} deleted test_b's snapshot"
