"""``ttsim arms compare``: per-arm rates of two reports side by side, Wilson intervals, overlap."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from harness.sweep.arms import wilson
from harness.sweep.compare import overlap
from hil_helpers import ROOT


def _report(path, backend, arms):
    data = {"backend": backend, "arms": {a: {"failed_requests": f, "requests": n} for a, (f, n) in arms.items()}}
    path.write_text(json.dumps(data))
    return path


def _cli(*args, capsys=None):
    """The command line in-process (harness.commands.cli.main), so a test pays no interpreter start."""
    from harness.commands import cli

    rc = cli.main(["arms", "compare", *map(str, args)])
    out = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, out.out, out.err)


def test_overlap_is_symmetric_and_closed():
    assert overlap((0.1, 0.2), (0.2, 0.3)) and overlap((0.2, 0.3), (0.1, 0.2))
    assert not overlap((0.1, 0.2), (0.2001, 0.3)) and not overlap((0.2001, 0.3), (0.1, 0.2))


def test_two_sim_reports_side_by_side(tmp_path, capsys, monkeypatch):
    """A fresh sweep of the simulator against the committed 1000-seed sim report: rates are
    recomputed from the counts, shown with their Wilson intervals, and they overlap."""
    from harness.commands import cli

    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))
    fresh = tmp_path / "sim.json"
    assert cli.main(["arms", "--arms", "control,all", "--seeds", "1", "--workers", "1", "--json", str(fresh)]) == 0
    capsys.readouterr()
    assert json.loads(fresh.read_text())["backend"] == "ttsim"
    paths = [ROOT / "docs" / "arms-1000.json", fresh]
    out = _cli(*paths, capsys=capsys)
    assert out.returncode == 0, out.stdout + out.stderr
    a, b = (json.loads(p.read_text())["arms"] for p in paths)
    for arm in ("control", "all"):
        row = [ln for ln in out.stdout.splitlines() if ln.startswith(f"{arm} ")][0]
        for side in (a, b):
            lo, hi = wilson(side[arm]["failed_requests"], side[arm]["requests"])
            assert f"{side[arm]['failed_requests']}/{side[arm]['requests']}" in row and f"[{lo:.4f}, {hi:.4f}]" in row
        assert row.endswith("yes")
    assert "only in A" in out.stdout  # the 1000-seed report has more arms than the fresh one
    assert "verdict: the intervals overlap for every shared arm (" in out.stdout


def test_rates_that_differ_are_called_out_and_exit_1(tmp_path, capsys):
    sim = _report(tmp_path / "sim.json", "ttsim", {"control": (183, 32000), "all": (46, 32000), "slots": (1, 10)})
    hw = _report(tmp_path / "hw.json", "hil", {"control": (20, 320), "all": (0, 320), "no-merge": (5, 10)})
    out = _cli(sim, hw, capsys=capsys)
    assert out.returncode == 1, out.stdout
    rows = {ln.split()[0]: ln for ln in out.stdout.splitlines()[3:] if ln.strip()}
    assert rows["control"].endswith("NO") and rows["all"].endswith("yes")
    assert "slots        only in A" in out.stdout and "no-merge     only in B" in out.stdout
    assert "B = hil (" in out.stdout
    assert "the intervals do NOT overlap for control" in out.stdout


@pytest.mark.parametrize("content, message", [
    ("{not json", "is not JSON"),
    ('{"arms": {}}', "is not an arms report"),
    ('{"arms": {"control": {"requests": 3}}}', "arm 'control' lacks integer failed_requests/requests"),
    ('{"arms": {"control": {"failed_requests": 4, "requests": 3}}}', "has 4 failed of 3 requests"),
])
def test_bad_reports_exit_2_naming_the_file(tmp_path, capsys, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = _report(tmp_path / "good.json", "ttsim", {"control": (1, 32)})
    out = _cli(good, bad, capsys=capsys)
    assert out.returncode == 2 and message in out.stderr and str(bad) in out.stderr, out.stderr


def test_compare_command_line_exit_codes(tmp_path):
    """The real command (a subprocess): a missing file is bad input, exit 2, one line."""
    good = _report(tmp_path / "good.json", "ttsim", {"control": (1, 32)})
    out = subprocess.run([sys.executable, "-m", "harness.commands.cli", "arms", "compare", str(good), str(tmp_path / "no.json")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.startswith("ttsim: error: cannot read") and "Traceback" not in out.stderr


def test_arms_hil_fails_closed_in_the_project_venv(capsys):
    from harness.commands import cli

    assert cli.main(["arms", "--hil", "--arms", "control,all", "--seeds", "1"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("ttsim: --hil: refusing to run: the real ttnn is not importable on "
                                               "Python 3.11"), err


def test_arms_hil_writes_the_same_json_with_a_backend_field(tmp_path, monkeypatch, capsys):
    """Against tests/hil/fake_ttnn (ttsim posing as the real package), in-process: the --hil path
    probes in a subprocess, selects the cards before ttnn is imported, runs in one process through
    the same scenario code, and labels its JSON."""
    from harness.commands import cli
    from hil_helpers import FAKE_TTNN

    for name in ("TT_VISIBLE_DEVICES", "TT_MESH_GRAPH_DESC_PATH", "TT_METAL_MOCK_CLUSTER_DESC_PATH"):
        monkeypatch.setenv(name, "")  # undone (removed) after the test, whatever the run sets
    monkeypatch.setenv("PYTHONPATH", str(FAKE_TTNN))  # for the probe subprocess
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))
    monkeypatch.setenv("FAKE_TTNN_LOG", str(tmp_path / "log"))
    monkeypatch.syspath_prepend(str(FAKE_TTNN))
    assert "ttnn" not in sys.modules
    path = tmp_path / "hw.json"
    try:
        rc = cli.main(["arms", "--hil", "--hil-devices", "0,1", "--arms", "all", "--seeds", "1", "--workers", "2",
                       "--json", str(path)])
    finally:
        sys.modules.pop("ttnn", None)
    out = capsys.readouterr()
    assert rc == 0, out.err[-3000:]
    report = json.loads(path.read_text())
    assert report["backend"] == "hil" and report["hardware"]["card_ids"] == [0, 1]
    assert report["hardware"]["ttnn_version"] == "0.81.1+fake" and "readback_lag is not applied" in \
        report["hardware"]["knobs"]
    assert set(report["arms"]) == {"all"} and report["arms"]["all"]["requests"] == 32
    assert "1 seeds x 1 arms" in out.out and "on 1 worker(s)" in out.out  # cards are exclusive
    log = [json.loads(ln) for ln in (tmp_path / "log").read_text().splitlines()]
    imports = [e for e in log if e["event"] == "import"]
    assert len(imports) == 2 and all(e["visible"] == "0,1" for e in imports)  # the probe, then this process
    assert any(e["event"] == "open_mesh_device" for e in log)
