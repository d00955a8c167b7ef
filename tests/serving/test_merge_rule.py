"""The merge rule, the guard and the clamp on crafted device buffers, for every arm.

Each case writes chosen bytes into a decode trace's persistent token/position buffers (as
an older batch or never-written memory would leave them), then asks the generator for a
batch change and reads the merge decision it reports. No seed or knob is involved: these
pin the rules themselves at their boundaries.
"""

import pytest

from merge_cases import MAX_CTX, merge_once, sources
from model.flags import ARMS

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
    clamp it is kept and reaches the kernel, which refuses a position past the table."""
    errors: list[str] = []
    e = merge_once(arm, dev=[(77, host_pos + 1)], host=[(5, host_pos)], errors=errors)
    flags = ARMS[arm]
    past_end = host_pos + 1 >= MAX_CTX
    clamped = past_end and flags.position_clamp
    assert e.guard_rejected == (clamped and flags.merge_batch_guard)
    assert sources(e) == ["host" if clamped else "device"]
    assert bool(errors) == (past_end and not flags.position_clamp), errors


def test_every_arm_is_covered():
    assert set(GUARDED) >= {"slots+guard", "all", "all+reads"}
    assert set(CLAMPED) >= {"all", "all+reads"}
    assert set(MERGING) | {"no-merge"} == set(ARMS)
