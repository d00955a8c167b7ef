"""The merge rule, the guard and the clamp on crafted device buffers, for every arm.

Each case writes chosen bytes into a decode trace's persistent token/position buffers (as
an older batch or never-written memory would leave them), then asks the generator for a
batch change and reads the merge decision it reports. No seed or knob is involved: these
pin the rules themselves at their boundaries.
"""

import pytest

from merge_cases import MAX_CTX, merge_once, sources
from model.flags import ARMS
from model.merge_rule import decide_merge

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
MERGING = [a for a, f in ARMS.items() if f.merge]
GUARDED = [a for a in MERGING if ARMS[a].merge_batch_guard]
CLAMPED = [a for a in MERGING if ARMS[a].position_clamp]


# -- the per-row rule: keep the device token where dev_pos == host_pos or host_pos + 1 ---------

@pytest.mark.parametrize("arm", MERGING)
@pytest.mark.parametrize("offset, kept", [(-1, False), (0, True), (1, True), (2, False)])
def test_device_token_kept_only_at_offsets_0_and_1(arm, offset, kept):
    e = merge_once(arm, dev=[(77, 40 + offset), (0, -1)], host=[(5, 40), (0, -1)])
    assert not e.guard_rejected
    assert sources(e)[0] == ("device" if kept else "host"), f"offset {offset}: {e.rows[0]}"
    assert e.rows[0].dev_token == 77 and e.rows[0].dev_pos == 40 + offset


def test_no_merge_never_reads_the_device():
    assert merge_once("no-merge", dev=[(77, 40), (0, -1)], host=[(5, 40), (0, -1)]) is None


# -- the prefilled-slot fix ---------------------------------------------------------------------

@pytest.mark.parametrize("arm", MERGING)
def test_a_prefilled_slot_takes_the_host_token_with_the_fix(arm):
    """The previous occupant's final position equals the new request's first decode position."""
    e = merge_once(arm, dev=[(77, 40), (9, 12)], host=[(5, 40), (6, 12)], prefilled=(1,))
    assert sources(e) == ["device", "host" if ARMS[arm].prefilled_slots_fix else "device"]


# -- production's guard: torch.equal(dev_pos != -1, host_pos != -1) over the whole bucket --------

@pytest.mark.parametrize("arm", MERGING)
def test_guard_rejects_a_prefilled_slot_whose_buffer_shows_minus_one(arm):
    e = merge_once(arm, dev=[(77, 40), (9, -1)], host=[(5, 40), (6, 12)], prefilled=(1,))
    guarded = ARMS[arm].merge_batch_guard
    assert e.guard_rejected == guarded
    assert sources(e) == (["host", "host"] if guarded else ["device", "host"])


@pytest.mark.parametrize("arm", MERGING)
def test_guard_rejects_a_finished_row_still_active_on_the_device(arm):
    """dev_pos=[29,...,28]-style: the device still advances a row the host has let go."""
    e = merge_once(arm, dev=[(77, 40), (0, -1), (0, -1), (3, 29)], host=[(5, 40), (0, -1), (0, -1), (0, -1)])
    guarded = ARMS[arm].merge_batch_guard
    assert e.guard_rejected == guarded
    assert sources(e)[0] == ("host" if guarded else "device")


@pytest.mark.parametrize("arm", MERGING)
def test_guard_falls_back_for_the_whole_batch_tokens_and_positions(arm):
    """A mismatch in one row sends every row to the host, the one the device had right too."""
    e = merge_once(arm, dev=[(77, 41), (78, 20), (0, -1), (0, -1)], host=[(5, 40), (6, 20), (7, 30), (0, -1)])
    guarded = ARMS[arm].merge_batch_guard
    assert e.guard_rejected == guarded
    assert sources(e)[:2] == (["host", "host"] if guarded else ["device", "device"])


@pytest.mark.parametrize("arm", MERGING)
def test_guard_accepts_an_equal_pattern_and_leaves_the_row_rule_to_decide(arm):
    e = merge_once(arm, dev=[(77, 41), (78, 3)], host=[(5, 40), (6, 20)])
    assert not e.guard_rejected
    assert sources(e) == ["device", "host"]


# -- the clamp: positions outside [0, max_ctx) are invalid before any comparison ----------------

@pytest.mark.parametrize("arm", MERGING)
@pytest.mark.parametrize("junk", [MAX_CTX - 1, MAX_CTX, -2, INT32_MIN, INT32_MAX])
def test_clamp_boundaries_on_a_row_the_host_has_inactive(arm, junk):
    """Row 1 is inactive on the host; the device buffer holds ``junk`` there. The guard sees a
    valid device row (a mismatch) unless the clamp has made it -1 first."""
    e = merge_once(arm, dev=[(77, 40), (9, junk)], host=[(5, 40), (0, -1)])
    flags = ARMS[arm]
    valid = 0 <= junk < MAX_CTX if flags.position_clamp else junk != -1
    assert e.rows[1].dev_pos == (junk if valid else -1 if flags.position_clamp else junk)
    assert e.guard_rejected == (flags.merge_batch_guard and valid)
    assert sources(e)[0] == ("host" if flags.merge_batch_guard and valid else "device")


@pytest.mark.parametrize("arm", MERGING)
@pytest.mark.parametrize("host_pos", [MAX_CTX - 2, MAX_CTX - 1])
def test_clamp_at_the_end_of_the_context_on_an_active_row(arm, host_pos):
    """The device one ahead of the host: at max_ctx - 1 that is a real position; at max_ctx
    it is past the end: the clamp makes it invalid (and so the guard falls back); without the
    clamp it is kept and reaches the kernel, which (as on a card, that cannot check a
    device-resident index) reads past the table instead of refusing."""
    errors: list[str] = []
    e = merge_once(arm, dev=[(77, host_pos + 1)], host=[(5, host_pos)], errors=errors)
    flags = ARMS[arm]
    past_end = host_pos + 1 >= MAX_CTX
    clamped = past_end and flags.position_clamp
    assert e.guard_rejected == (clamped and flags.merge_batch_guard)
    assert sources(e) == ["host" if clamped else "device"]
    assert errors == []
    assert e.rows[0].dev_pos == (-1 if clamped else host_pos + 1)


# -- inactive host rows (host position -1) -------------------------------------------------------
# TODAY's rule: a row the host has inactive takes the host's token and position -1 whatever the
# device shows, in every arm, guard or not. Upstream's rule (DESIGN.md §8) has no activity
# mask: there a pad row keeps the device's token and position when the device shows -1 or 0.
# Which is production's is the upstream-mechanics issue's to settle; if it picks upstream's,
# these expectations change with it.

GARBAGE = 1206993233  # 0x47F14151, read in production from never-written memory (DESIGN.md §1)
INACTIVE_DEV_POS = [-1, 0, 12, 40, 41, MAX_CTX - 1, GARBAGE]  # 40/41: the active row's host position and +1
PAD_TOKEN, DEV_TOKEN = 0, 9


def _inactive_case_expectation(arm: str, dev_pos: int) -> bool:
    """Whether the guard rejects the batch: it compares the valid patterns after the clamp,
    and the inactive row is valid on the device unless it shows -1 (or, with the clamp,
    anything outside [0, max_ctx))."""
    flags = ARMS[arm]
    valid = 0 <= dev_pos < MAX_CTX if flags.position_clamp else dev_pos != -1
    return flags.merge_batch_guard and valid


def _pad_row_outcome(arm: str, dev_pos: int) -> tuple[bool, int]:
    """Upstream's rule has no activity mask (tt-metal generator.py @ 50868c00): a pad row (host
    -1) keeps the device's token and position where the device shows -1 or 0 (after the
    clamp), unless the guard falls back. Returns (kept, the position the rule compared)."""
    flags = ARMS[arm]
    seen = -1 if flags.position_clamp and not 0 <= dev_pos < MAX_CTX else dev_pos
    kept = flags.merge and seen in (-1, 0) and not _inactive_case_expectation(arm, dev_pos)
    return kept, seen


@pytest.mark.parametrize("arm", MERGING)
@pytest.mark.parametrize("dev_pos", INACTIVE_DEV_POS)
def test_an_inactive_host_row_keeps_the_device_only_where_it_shows_minus_one_or_zero(arm, dev_pos):
    """Row 1 is inactive on the host; its device buffer shows ``dev_pos``. Row 0 is active with
    the device one ahead (kept unless the guard falls back)."""
    e = merge_once(arm, dev=[(77, 41), (DEV_TOKEN, dev_pos)], host=[(5, 40), (PAD_TOKEN, -1)])
    rejected = _inactive_case_expectation(arm, dev_pos)
    kept, seen = _pad_row_outcome(arm, dev_pos)
    row = e.rows[1]
    assert row.source == ("device" if kept else "host"), f"device showed {dev_pos}: {row}"
    assert row.reason == ("pad row: device kept" if kept and seen >= 0 else
                          "inactive"), f"device showed {dev_pos}: {row}"
    assert (row.host_token, row.host_pos, row.dev_token) == (PAD_TOKEN, -1, DEV_TOKEN)
    assert e.guard_rejected == rejected, f"device showed {dev_pos} at the inactive row"
    assert sources(e)[0] == ("host" if rejected else "device")


@pytest.mark.parametrize("arm", list(ARMS))
@pytest.mark.parametrize("dev_pos", INACTIVE_DEV_POS)
def test_the_rule_writes_into_a_pad_row_what_upstream_writes(arm, dev_pos):
    """The rule itself (model.merge_rule, what the generator and `ttsim replay --trace` call),
    every arm including no-merge: a pad row takes the device's token and position where it
    is kept (the device shows -1 or 0), else the host's pad at -1; an active row's inputs are
    untouched by it. Two pad rows: one showing ``dev_pos``, one showing the device's own -1."""
    flags = ARMS[arm]
    dev_tok, dev = [77, DEV_TOKEN, DEV_TOKEN], [41, dev_pos, -1]
    host_tok, host = [5, PAD_TOKEN, PAD_TOKEN], [40, -1, -1]
    d = decide_merge(flags, MAX_CTX, dev_tok, dev, host_tok, host, [False] * 3)
    tok, pos = d.merged(dev_tok, host_tok, host)
    kept, seen = _pad_row_outcome(arm, dev_pos)
    rejected = flags.merge and _inactive_case_expectation(arm, dev_pos)
    own = flags.merge and not rejected  # the row showing -1 matches the host's -1
    assert (tok[1], pos[1]) == ((DEV_TOKEN, seen) if kept else (PAD_TOKEN, -1)), f"device showed {dev_pos}: {d}"
    assert (tok[2], pos[2]) == ((DEV_TOKEN, -1) if own else (PAD_TOKEN, -1)), f"device showed {dev_pos}: {d}"
    assert d.keep[1:] == [kept, own]
    assert d.guard_rejected == rejected
    assert (tok[0], pos[0]) == ((5, 40) if rejected or not flags.merge else (77, 41))


def test_every_arm_is_covered():
    assert set(GUARDED) >= {"slots+guard", "all", "all+last-run", "what-if"}
    assert set(CLAMPED) >= {"all", "all+last-run", "what-if"}
    assert set(MERGING) | {"no-merge"} == set(ARMS)


@pytest.mark.parametrize("arm", ["control", "all"])
def test_the_merge_gathers_the_device_rows_by_the_remap_before_the_rule(arm):
    """F1: ``dev_toks[remap]`` / ``dev_pos[remap]`` before the keep rule. The two requests
    swapped rows; their device state (slot-indexed) follows them, so both keep the device's."""
    e = merge_once(arm, dev=[(77, 40), (9, 12)], host=[(6, 12), (5, 40)], remap=[1, 0, 2, 3, 4, 5, 6, 7])
    assert [(r.dev_token, r.dev_pos) for r in e.rows] == [(9, 12), (77, 40)]
    assert sources(e) == ["device", "device"]
    unmoved = merge_once(arm, dev=[(77, 40), (9, 12)], host=[(6, 12), (5, 40)])
    assert sources(unmoved) == ["host", "host"]
