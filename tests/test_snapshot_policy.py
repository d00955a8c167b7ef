"""`--snapshot-update` must never delete the snapshots of tests it did not run."""

import os
import subprocess
import sys
import textwrap


def _own_rootdir(tmp_path) -> None:
    """Make tmp_path the inner pytest's rootdir (node ids, hints): without an ini file of its own,
    pytest would take any pytest.ini/pyproject.toml/setup.cfg in an ancestor such as /tmp."""
    (tmp_path / "pytest.ini").write_text("[pytest]\n")


def test_updating_one_test_keeps_the_snapshots_of_the_others(tmp_path):
    (tmp_path / "test_goldens.py").write_text(textwrap.dedent("""
        def test_a(snapshot):
            assert [1, 2, 3] == snapshot

        def test_b(snapshot):
            assert {"tokens": [4, 5]} == snapshot
    """))
    _own_rootdir(tmp_path)
    run = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:faker", "--snapshot-update"]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    subprocess.run([*run, "test_goldens.py"], cwd=tmp_path, env=env, check=True, capture_output=True)
    ambr = tmp_path / "__snapshots__" / "test_goldens.ambr"
    assert "test_b" in ambr.read_text()
    for subset in (["test_goldens.py::test_a"], ["test_goldens.py", "-k", "test_a"]):
        out = subprocess.run([*run, *subset], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "test_b" in ambr.read_text(), f"updating {subset} deleted test_b's snapshot"


# -- one snapshot set per backend ---------------------------------------------------------------

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PER_BACKEND = textwrap.dedent("""
    VALUE = {"a": [1, 2, 3], "b": {"tokens": [4, 5]}}

    # device tests (they take ttnn): a --hil session runs only those
    def test_a(ttnn, snapshot, snapshot_backend):
        assert VALUE["a"] == snapshot(name=snapshot_backend)

    def test_b(ttnn, snapshot, snapshot_backend):
        assert VALUE["b"] == snapshot(name=snapshot_backend)
""")


FAKE_TTNN = os.path.join(ROOT, "tests", "hil", "fake_ttnn")  # ttsim posing as the real package


def _pytest(tmp_path, *args):
    """An inner pytest; a --hil run goes to the stand-in cards (a real --hil run without a card
    refuses before any test, so it could not show the snapshot behaviour)."""
    _own_rootdir(tmp_path)
    path = os.pathsep.join([FAKE_TTNN, ROOT]) if "--hil" in args else ROOT
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": path,
           "TTSIM_RUNS_DIR": str(tmp_path / "runs")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:faker", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True)


def _entries(ambr) -> dict[str, str]:
    """name -> body of each snapshot in an .ambr file."""
    out, name = {}, None
    for line in ambr.read_text().splitlines():
        if line.startswith("# name: "):
            name = line[len("# name: "):]
            out[name] = ""
        elif name is not None:
            out[name] += line + "\n"
    return out


def test_a_card_run_without_its_snapshot_fails_with_the_record_hint(tmp_path):
    (tmp_path / "test_goldens.py").write_text(PER_BACKEND)
    assert _pytest(tmp_path, "--snapshot-update", "test_goldens.py").returncode == 0
    assert set(_entries(tmp_path / "__snapshots__" / "test_goldens.ambr")) == {"test_a[ttsim]", "test_b[ttsim]"}
    card = _pytest(tmp_path, "--hil", "test_goldens.py::test_a")
    assert card.returncode == 1, card.stdout  # never passes against the simulator's snapshot
    assert "Snapshot 'test_a[hil-p150a]' does not exist" in card.stdout
    assert "pytest --hil test_goldens.py::test_a --snapshot-update" in card.stdout, card.stdout
    assert _pytest(tmp_path, "test_goldens.py").returncode == 0  # the sim's own snapshots still pass


def test_parallel_update_keeps_other_tests_and_the_other_backend(tmp_path):
    """--snapshot-update under -n 2 rewrites only the snapshots of the tests it ran, on the
    backend it ran on: the other tests' and the card's entries stay byte for byte."""
    test = tmp_path / "test_goldens.py"
    test.write_text(PER_BACKEND)
    ambr = tmp_path / "__snapshots__" / "test_goldens.ambr"
    assert _pytest(tmp_path, "--snapshot-update", "test_goldens.py").returncode == 0
    assert _pytest(tmp_path, "--hil", "--snapshot-update", "test_goldens.py").returncode == 0
    before = _entries(ambr)
    assert set(before) == {"test_a[ttsim]", "test_b[ttsim]", "test_a[hil-p150a]", "test_b[hil-p150a]"}

    test.write_text(PER_BACKEND.replace("[1, 2, 3]", "[1, 2, 3, 99]").replace("[4, 5]", "[4, 5, 99]"))
    out = _pytest(tmp_path, "-n", "2", "--snapshot-update", "-k", "test_a", "test_goldens.py")
    assert out.returncode == 0, out.stdout + out.stderr
    after = _entries(ambr)
    assert "99" in after["test_a[ttsim]"]
    assert {k: v for k, v in after.items() if k != "test_a[ttsim]"} == \
        {k: v for k, v in before.items() if k != "test_a[ttsim]"}, "an update touched snapshots it did not run"

    out = _pytest(tmp_path, "-n", "2", "--snapshot-update", "test_goldens.py")  # the whole file, sim only
    assert out.returncode == 0, out.stdout + out.stderr
    final = _entries(ambr)
    assert "99" in final["test_b[ttsim]"]
    assert final["test_a[hil-p150a]"] == before["test_a[hil-p150a]"]
    assert final["test_b[hil-p150a]"] == before["test_b[hil-p150a]"], "a sim update deleted the card's snapshots"


def test_update_keeps_the_snapshots_of_tests_that_failed(tmp_path):
    """A test whose own check fails before its snapshot assertion did not use its snapshot;
    syrupy alone would call it unused and --snapshot-update would delete it."""
    test = tmp_path / "test_goldens.py"
    test.write_text(PER_BACKEND)
    ambr = tmp_path / "__snapshots__" / "test_goldens.ambr"
    assert _pytest(tmp_path, "--snapshot-update", "test_goldens.py").returncode == 0
    before = _entries(ambr)
    test.write_text(PER_BACKEND.replace("def test_b(ttnn, snapshot, snapshot_backend):\n",
                                        "def test_b(ttnn, snapshot, snapshot_backend):\n    assert False, 'its check'\n"))
    out = _pytest(tmp_path, "-n", "2", "--snapshot-update", "test_goldens.py")
    assert out.returncode == 1 and "its check" in out.stdout
    assert _entries(ambr) == before, "--snapshot-update deleted the snapshot of a failed test"
