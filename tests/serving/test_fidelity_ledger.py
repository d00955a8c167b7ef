"""docs/fidelity.md is checked, not just written: every flag it names switches its mechanism,
and the host-staleness reasoning it gives fails where it says it would."""

import dataclasses
import re
from pathlib import Path

import pytest

from harness.base.spec import RunSpec
from harness import scenario
from harness.workloads import stage3
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
    "QWEN36_MARKS_FOLLOW_REMAP": (dict(dev=[(77, 40), (9, 12)], host=[(6, 12), (5, 40)], prefilled=(0,),
                                       remap=[1, 0, 2, 3, 4, 5, 6, 7]),
                                  lambda e: e.rows[1].source == "host"),
    # what-if knobs: the mechanism beyond upstream is on
    "TTSIM_WHATIF_ASYNC_MERGE_READ": (dict(dev=[(77, 40)], host=[(5, 40)], lag=1.0),
                                      lambda e: e.rows[0].dev_token != 77),
    "TTSIM_WHATIF_NEVER_RUN_BUCKET": (dict(dev=None, host=[(5, 40), (6, 12)]),
                                      lambda e: e.inputs.dev_positions != [-1, -1]),
}


def _tables(text: str) -> list[list[str]]:
    """The markdown tables of ``text``, each as its lines (header, separator, rows)."""
    tables, current = [], []
    for ln in text.splitlines():
        if ln.startswith("|"):
            current.append(ln)
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def ledger_rows(text: str | None = None) -> dict[str, dict[str, str]]:
    """mechanism -> {column: cell}, from the ledger's first table (the mechanism table)."""
    lines = _tables(LEDGER.read_text() if text is None else text)[0]
    header = _cells(lines[0])
    rows = {}
    for ln in lines[2:]:
        cells = _cells(ln)
        if len(cells) != len(header):
            raise ValueError(f"ledger row has {len(cells)} cells for {len(header)} columns: {ln[:80]}")
        rows[cells[0]] = dict(zip(header, cells))
    return rows


def source_commits(text: str | None = None) -> set[str]:
    """The full commits of the "Upstream sources read" table."""
    text = LEDGER.read_text() if text is None else text
    return {c for table in _tables(text) if _cells(table[0])[0] == "source"
            for ln in table[2:] for c in re.findall(r"\b[0-9a-f]{40}\b", ln)}


COLUMNS = ["mechanism", "where it is modelled", "production fact", "flag", "deviation", "upstream"]
# a public path read at a commit: `path/to/file.ext`@<7+ hex>
SOURCED = re.compile(r"`[\w./-]+\.(?:py|md)`@([0-9a-f]{7,40})\b")
VERDICT = re.compile(r"\b(?:same|differs|not upstream)\b")
PRODUCTION_FACT = "production fact"


def upstream_problems(text: str) -> list[str]:
    """Why a ledger's upstream column is incomplete (empty when it is not)."""
    try:
        rows = ledger_rows(text)
    except (ValueError, IndexError) as e:
        return [str(e)]
    if not rows:
        return ["no rows"]
    if list(next(iter(rows.values()))) != COLUMNS:
        return [f"columns are {list(next(iter(rows.values())))}, not {COLUMNS}"]
    known = source_commits(text)
    problems = []
    for mechanism, row in rows.items():
        cell = row["upstream"]
        commits = SOURCED.findall(cell)
        if not commits and PRODUCTION_FACT not in cell:
            problems.append(f"{mechanism}: names no `path`@commit and no production fact")
        for short in commits:
            if not any(full.startswith(short) for full in known):
                problems.append(f"{mechanism}: commit {short} is not in the sources read")
        if not VERDICT.search(cell):
            problems.append(f"{mechanism}: says neither same, differs nor not upstream")
    return problems


def ledger_flags() -> dict[str, str]:
    """flag -> mechanism, from the ledger's flag column."""
    out = {}
    for mechanism, row in ledger_rows().items():
        for flag in re.findall(r"(?:QWEN36|TTSIM_WHATIF)_[A-Z_]+", row["flag"]):
            out[flag] = mechanism
    return out


def test_the_ledger_lists_every_mechanism_and_every_generator_flag():
    mechanisms = set(ledger_rows())
    assert {"slots and their placement", "async-ahead scheduling", "host staleness at batch changes",
            "per-bucket traces", "device sampling", "`plus_one`", "the merge rule", "the prefilled-slot fix",
            "the guard", "the clamp", "readback synchronisation", "trace input buffers", "prefilled-slot marks",
            "`slot_remap` gather", "inactive host rows", "bucket choice", "when the merge runs",
            "the reload-command protocol"} <= mechanisms
    assert set(ledger_flags()) == set(GeneratorFlags.ENV.values()) == set(PROBES)


def test_every_ledger_row_names_its_upstream_source_and_verdict():
    """Each mechanism says where upstream builds it (a path at a commit that is in
    the sources read) or that it is a production fact, and whether ours is the same."""
    assert upstream_problems(LEDGER.read_text()) == []


def _without_upstream_column(text: str) -> str:
    out = []
    for ln in text.splitlines():
        if ln.startswith("| mechanism |") or ln.startswith("|---|---|---|---|---|---|"):
            ln = ln.rsplit("|", 2)[0] + "|"
        elif ln.startswith("| ") and ln.count("|") == 7:
            ln = ln.rsplit("|", 2)[0] + "|"
        out.append(ln)
    return "\n".join(out)


def test_the_upstream_check_fails_a_ledger_without_the_column_or_a_commit():
    """Negative controls: the check is not vacuous."""
    text = LEDGER.read_text()
    assert any("columns are" in p for p in upstream_problems(_without_upstream_column(text)))
    no_commit = text.replace("`models/tt_transformers/tt/generator.py`@50868c00", "`models/tt_transformers/tt/generator.py`")
    assert no_commit != text
    assert any("names no `path`@commit" in p for p in upstream_problems(no_commit))
    unknown = text.replace("@50868c00", "@deadbee0")
    assert any("commit deadbee0 is not in the sources read" in p for p in upstream_problems(unknown))
    header = "| mechanism | where it is modelled | production fact | flag | deviation | upstream |\n|---|---|---|---|---|---|\n"
    no_verdict = header + "| x | y | z | - | - | tt-metal `a/b.py`@50868c00 read |\n" + text[text.index("## Upstream sources read"):]
    assert upstream_problems(no_verdict) == ["x: says neither same, differs nor not upstream"]
    empty_cell = header + "| x | y | z | - | - |  |\n"
    assert len(upstream_problems(empty_cell)) == 2


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
    expected = scenario.serial_answers(calm, RunSpec(seed=seed))
    fresh = scenario.run_scenario(calm, "slots+guard", RunSpec(seed=seed), expected=expected)
    assert fresh.failed == [] and fresh.guard_rejects > 0

    resolve = TTRunner.resolve_pending
    monkeypatch.setattr(TTRunner, "resolve_pending",
                        lambda self, until=None: None if until is None else resolve(self, until))
    stale = scenario.run_scenario(calm, "slots+guard", RunSpec(seed=seed), expected=expected)
    assert len(stale.failed) > len(stale.verdicts) // 2, f"{len(stale.failed)} of {len(stale.verdicts)} failed"
