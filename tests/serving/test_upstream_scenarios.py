"""Public upstream bugs as named scenarios (harness/upstream_bugs.py): each fails without its
fix the way its issue reports and passes with it; the mechanisms they rest on are pinned on
their own (the keep's gate on one crafted merge, sync scheduling's fresh host). A scenario runs
OUR generator configured as upstream's code before and after its fix: under --generator these
tests are skipped."""

from __future__ import annotations

import pytest

from harness import upstream_bugs
from harness.commands.cli import main
from harness.defects import first_difference
from merge_cases import merge_once
from model.markov import MARKOV, _successors

pytestmark = pytest.mark.our_generator


@pytest.fixture(scope="module")
def r54565():
    return upstream_bugs.check("upstream-54565")


def test_54565_truncates_at_the_second_token_without_the_gate_and_passes_with_it(r54565):
    broken, fixed = r54565.broken, r54565.fixed
    # the issue: requests truncated at the second token; here the first decode's token (output 1)
    # is the previous occupant's, and only there: the output before it is the prefill's, right
    assert len(broken.failed) == 3
    for v in broken.failed:
        assert v.defect == "slot-reuse"
        assert first_difference(v.expected, v.got) == 1
        assert v.got[0] == v.expected[0]
    assert not fixed.failed
    assert r54565.ok and r54565.lines()[-1] == "  REPRODUCED"


def test_a_scenario_that_does_not_fail_as_reported_or_fails_with_the_fix_is_not_reproduced(r54565):
    import dataclasses

    bug, seed, broken, fixed = r54565.bug, r54565.seed, r54565.broken, r54565.fixed
    verdicts = {
        "no request fails without the fix": upstream_bugs.Reproduction(bug, seed, fixed, fixed),
        "3 requests fail with the fix": upstream_bugs.Reproduction(bug, seed, broken, broken),
        "no failure as the issue reports (slot-reuse at output 2)":
            upstream_bugs.Reproduction(dataclasses.replace(bug, first_wrong=2), seed, broken, fixed),
        "no failure as the issue reports (garbage-token at output 1)":
            upstream_bugs.Reproduction(dataclasses.replace(bug, defect="garbage-token"), seed, broken, fixed),
    }
    for why, r in verdicts.items():
        assert not r.ok
        assert r.lines()[-1].startswith(f"  NOT REPRODUCED: {why}"), r.lines()[-1]


def test_54565_survives_production_s_three_fixes_and_the_public_gate_closes_it():
    # production's fixes do not close it (the plugin's condense moves the prefilled request off its
    # slot's row, where F1's mark forces the host); the PR's gate does, as the candidate fix
    # marks_follow_remap does
    assert {v.defect for v in upstream_bugs.run_named("upstream-54565", False, arm="all").failed} == {"slot-reuse"}
    assert not upstream_bugs.run_named("upstream-54565", True, arm="all").failed
    assert not upstream_bugs.run_named("upstream-54565", False, arm="all+remap-marks").failed


def test_sync_scheduling_leaves_the_host_fresh_so_restaging_it_always_is_right():
    # no-merge (the host's inputs at every step) fails most requests under async scheduling (the
    # host one step stale); for a model without async decode the plugin schedules in sync, and it
    # passes: the scenario's runs really have no lag to recover
    assert not upstream_bugs.run_named("upstream-54565", False, arm="no-merge").failed


@pytest.mark.parametrize("declares, gate, kept", [
    (False, False, True),   # before #54565: the keep runs for every model
    (False, True, False),   # #54565: not for a model without async decode
    (True, True, True),     # a model with async decode keeps, gate or not
    (True, False, True),
])
def test_the_keep_runs_only_where_the_model_declares_async_decode(declares, gate, kept):
    # the device's row (77 at 40) continues the host's position; the host's token is 5
    sampled = []
    event = merge_once("control", dev=[(77, 40)], host=[(5, 40)], out=sampled,
                       supports_async_decode=declares, async_keep_gate=gate)
    assert (event is not None) == kept
    if kept:
        assert event.rows[0].source == "device"
    # what the decode consumed: the token its sample follows from
    assert sampled == [_successors(40, MARKOV)[77 if kept else 5]]


def test_scenario_cli_lists_reproduces_and_refuses_an_unknown_name_in_one_line(capsys):
    assert main(["scenario", "--list"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert listed[:len(upstream_bugs.CATALOGUE)] == [f"{b.name}: {b.repo}#{b.number} {b.title} ({b.url})"
                                                      for b in upstream_bugs.CATALOGUE.values()]
    assert [ln.split(":")[0] for ln in listed[len(upstream_bugs.CATALOGUE):]] == list(upstream_bugs.NOT_REPRODUCED)
    assert main(["scenario", "upstream-1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"ttsim: error: unknown scenario 'upstream-1'; choose from {', '.join(upstream_bugs.names())}"]


@pytest.mark.parametrize("name", list(upstream_bugs.NOT_REPRODUCED))
def test_a_bug_not_reproduced_is_refused_in_one_line_saying_why(name, capsys):
    assert main(["scenario", name]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    url, why = upstream_bugs.NOT_REPRODUCED[name]
    assert err == [f"ttsim: error: {name} ({url}) is not reproduced on ttsim: {why} (docs/fidelity.md)"]


def test_every_scenario_cites_its_issue_and_has_a_ledger_row():
    from pathlib import Path

    ledger = (Path(__file__).resolve().parents[2] / "docs" / "fidelity.md").read_text()
    for bug in upstream_bugs.CATALOGUE.values():
        assert bug.url.endswith(f"/{bug.number}") and bug.repo.startswith("tenstorrent/")
        assert f"| `{bug.name}` |" in ledger, f"docs/fidelity.md has no row for {bug.name}"
    for name, (url, _) in upstream_bugs.NOT_REPRODUCED.items():
        assert f"| `{name}` |" in ledger and url.rsplit("/", 1)[1] in ledger, f"docs/fidelity.md has no row for {name}"
