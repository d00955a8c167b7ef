"""docs/fidelity.md is checked, not just written: every flag it names switches its mechanism,
and the host-staleness reasoning it gives fails where it says it would."""

import dataclasses
import re
from pathlib import Path

import pytest

from fixtures import scenario
from fixtures.workloads import stage3
from merge_cases import merge_once
from model.flags import GeneratorFlags
from model.serving import TTRunner

LEDGER = Path(__file__).resolve().parents[2] / "docs" / "fidelity.md"
JUNK = 1206993233

# flag -> (a crafted merge, "is the mechanism on?" read off the merge event)
PROBES = {
    "QWEN36_ASYNC_MERGE": (dict(dev=[(77, 40)], host=[(5, 40)]), lambda e: e is not None),
    "QWEN36_PREFILLED_SLOTS_FIX": (dict(dev=[(77, 40), (9, 12)], host=[(5, 40), (6, 12)], prefilled=(1,)),
                                   lambda e: e.rows[1].source == "host"),
    "QWEN36_MERGE_BATCH_GUARD": (dict(dev=[(77, 40), (9, 29)], host=[(5, 40), (0, -1)]),
                                 lambda e: e.guard_rejected),
    "QWEN36_POSITION_CLAMP": (dict(dev=[(77, 40), (9, JUNK)], host=[(5, 40), (0, -1)]),
                              lambda e: e.rows[1].dev_pos == -1 and not e.guard_rejected),
    "QWEN36_MERGE_FROM_LAST_RUN": (dict(dev=[(77, 40), (0, -1)], host=[(5, 40), (0, -1)], last_run=[(88, 40)]),
                                   lambda e: e.rows[0].dev_token == 88),
    "QWEN36_SYNCED_MERGE_READS": (dict(dev=[(77, 40)], host=[(5, 40)], lag=1.0),
                                  lambda e: e.rows[0].dev_token == 77),
}


def ledger_rows() -> dict[str, dict[str, str]]:
    rows = {}
    lines = [ln for ln in LEDGER.read_text().splitlines() if ln.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def ledger_flags() -> dict[str, str]:
    """flag -> mechanism, from the ledger's flag column."""
    out = {}
    for mechanism, row in ledger_rows().items():
        for flag in re.findall(r"QWEN36_[A-Z_]+", row["flag"]):
            out[flag] = mechanism
    return out


def test_the_ledger_lists_every_mechanism_and_every_generator_flag():
    mechanisms = set(ledger_rows())
    assert {"slots and their placement", "async-ahead scheduling", "host staleness at batch changes",
            "per-bucket traces", "device sampling", "`plus_one`", "the merge rule", "the prefilled-slot fix",
            "the guard", "the clamp", "readback synchronisation"} <= mechanisms
    assert set(ledger_flags()) == set(GeneratorFlags.ENV.values()) == set(PROBES)


@pytest.mark.parametrize("flag", sorted(PROBES))
def test_each_ledger_flag_switches_its_mechanism(flag):
    case, mechanism_on = PROBES[flag]
    seen = {}
    for value in ("0", "1"):
        flags = GeneratorFlags.from_env({flag: value})  # every other flag at its production default
        seen[value] = mechanism_on(merge_once(flags, **case))
    assert seen == {"0": False, "1": True}, f"{flag} ({ledger_flags()[flag]}): mechanism on per value {seen}"


def test_flags_from_env_refuse_a_bad_value_naming_the_variable():
    with pytest.raises(ValueError, match="QWEN36_MERGE_BATCH_GUARD must be 0 or 1"):
        GeneratorFlags.from_env({"QWEN36_MERGE_BATCH_GUARD": "yes"})


@pytest.mark.needs_fault_injection
def test_a_stale_host_at_resets_would_fail_production(monkeypatch):
    """The ledger's host-staleness reasoning, where it breaks: without the runner's read of
    outstanding outputs before a reset, production's guard restages one-step-stale host
    tokens at every composition change and most requests fail. With it, none does."""
    seed = 0
    workload = stage3(seed)
    calm = dataclasses.replace(workload, knobs=dataclasses.replace(workload.knobs, readback_lag=0.0))
    expected = scenario.serial_answers(calm, seed)
    fresh = scenario.run_scenario(calm, "slots+guard", seed, expected=expected)
    assert fresh.failed == [] and fresh.guard_rejects > 0

    resolve = TTRunner.resolve_pending
    monkeypatch.setattr(TTRunner, "resolve_pending",
                        lambda self, until=None: None if until is None else resolve(self, until))
    stale = scenario.run_scenario(calm, "slots+guard", seed, expected=expected)
    assert len(stale.failed) > len(stale.verdicts) // 2, f"{len(stale.failed)} of {len(stale.verdicts)} failed"
