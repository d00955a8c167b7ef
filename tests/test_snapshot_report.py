"""`ttsim snapshots report`: the working tree's snapshots against a git ref, for review."""

import subprocess
from pathlib import Path

import pytest

from harness.commands import cli
from harness.snapshots.numeric import Close, Pcc, dumps, numeric
from harness.snapshots.report import ReportError, ambr_value, build, markdown

SUMMARY = """# serializer version: 1
# name: test_arms_summary[ttsim]
  dict({
    'all': dict({
      'defects': dict({
      }),
      'failed_requests': FAILED,
      'requests': 128,
    }),
    'control': dict({
      'defects': dict({
        'slot-reuse': 3,
      }),
      'failed_requests': 3,
      'requests': 128,
    }),
  })
# ---
# name: test_merge_decisions_of_pinned_seeds[x][ttsim]
  dict({
    'control': dict({
      'failed': dict({
      }),
      'merges': list([
        'step 3 bucket 4->8: s0 req-1 host 5@40 dev 5@41 -> device | s1 req-2 host 6@12 dev 9@12 -> DEC',
        'step 9 bucket 8->8: s0 req-1 host 7@44 dev 7@44 -> device',
      ]),
    }),
  })
# ---
"""


def _git(root, *args):
    subprocess.run(["git", *args], cwd=root, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path):
    snaps = tmp_path / "tests" / "__snapshots__"
    snaps.mkdir(parents=True)
    (snaps / "test_r.ambr").write_text(SUMMARY.replace("FAILED", "0").replace("DEC", "device"))
    (snaps / "test_n[ttsim].tol.json").write_text(dumps(numeric({"matmul": {"pcc": Pcc(0.9999, floor=0.999),
                                                                           "err": Close(0.1, abs=0.01)}})))
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "x", "--allow-empty")
    _git(tmp_path, "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "snapshots")
    return tmp_path


def test_ambr_bodies_parse_back_to_values():
    body = SUMMARY.replace("FAILED", "0").split("# name: test_arms_summary[ttsim]\n")[1].split("# ---")[0]
    v = ambr_value(body)
    assert v["control"] == {"defects": {"slot-reuse": 3}, "failed_requests": 3, "requests": 128}


def test_report_shows_rates_numerics_and_decisions_that_changed(repo):
    snaps = repo / "tests" / "__snapshots__"
    assert build(repo, "HEAD").rates == [] and "No snapshot changed." in markdown(build(repo, "HEAD"), {})
    (snaps / "test_r.ambr").write_text(SUMMARY.replace("FAILED", "2").replace("DEC", "host"))
    (snaps / "test_n[ttsim].tol.json").write_text(dumps(numeric({"matmul": {"pcc": Pcc(0.9995, floor=0.999),
                                                                           "err": Close(0.1, abs=0.01)}})))
    rep = build(repo, "HEAD")
    [changed] = [r for r in rep.rates if r["changed"]]
    assert changed["arm"] == "all" and changed["old"][:2] == (0, 128) and changed["new"][:2] == (2, 128)
    [num] = rep.numerics
    assert num["key"] == "matmul / pcc" and num["used"] == pytest.approx(0.4 / 0.9)  # 0.0004 of 0.0009 room
    [dec] = rep.decisions
    assert dec["head"].startswith("old step 3 bucket 4->8")
    assert dec["rows"] == [("s1 req-2 host 6@12 dev 9@12 -> device", "s1 req-2 host 6@12 dev 9@12 -> host")]
    md = markdown(rep, {"rates": "rates.png"})
    assert "| all | 0/128 = 0.00% [0.00%, 2.91%] | 2/128 = 1.56% [0.43%, 5.52%] | **changed** |" in md
    assert "| matmul / pcc | 0.9999 | 0.9995 | pcc >= 0.999 | 44% |" in md
    assert "![rates](rates.png)" in md


def test_bad_input_is_a_clear_error_with_exit_2(repo, tmp_path, capsys):
    with pytest.raises(ReportError, match="unknown git ref 'nope'"):
        build(repo, "nope")
    empty = tmp_path / "empty"
    empty.mkdir()
    _git(empty, "init", "-q")
    _git(empty, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x", "--allow-empty")
    with pytest.raises(ReportError, match="no snapshots under"):
        build(empty, "HEAD")
    assert cli.main(["snapshots", "report", "--root", str(repo), "--ref", "nope", "--out", str(tmp_path / "o")]) == 2
    assert "unknown git ref 'nope'" in capsys.readouterr().err
    assert cli.main(["snapshots", "report", "--root", str(repo), "--out", str(tmp_path / "o")]) == 0
    assert (tmp_path / "o" / "report.md").read_text().startswith("# Snapshot review against `HEAD`")
