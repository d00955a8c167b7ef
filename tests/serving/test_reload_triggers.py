"""When the generator reloads and merges, and how long a prefilled mark lives, as tt-metal's
generator.py @ 50868c00 has it: a reload at ``reset_batch`` or at the first decode after a
prefill (the mode switch), merging only into a width that already has a trace; the set of
prefilled slots cleared after EVERY decode, merge or not."""

import pytest
import torch

from harness.base.spec import RunSpec
from harness.system import System
from harness.workloads import FaultKnobs
from model.flags import ARMS
from model.protocol import GREEDY, read_output

pytestmark = pytest.mark.our_generator  # a test of ttsim's own generator


def _gen(system, events):
    gen = system.generator(flags=ARMS["control"])
    gen.on_merge = events.append
    return gen


def _prefill(system, gen, slot):
    gen.prefill_forward(torch.tensor([[1, 2, 3]]), torch.zeros(1, system.max_pages, dtype=torch.int32),
                        empty_slots=[slot], sampling_params=GREEDY)


def _decode(system, gen, positions, reset):
    table = torch.zeros(len(positions), system.max_pages, dtype=torch.int32)
    out = gen.decode_forward([3] * len(positions), positions, table, reset_batch=reset, read_from_device=False, sampling_params=GREEDY)
    read_output(gen, system.ttnn, out)


def test_the_first_decode_after_a_prefill_merges_without_reset_batch():
    system, events = System(RunSpec(seed=0), FaultKnobs()), []
    try:
        gen = _gen(system, events)
        _prefill(system, gen, 0)
        _decode(system, gen, [3, -1], reset=True)  # the width's first decode: host inputs, no merge
        assert events == []
        _decode(system, gen, [4, -1], reset=True)
        assert len(events) == 1
        _decode(system, gen, [5, -1], reset=False)  # steady: no reload
        assert len(events) == 1
        _prefill(system, gen, 1)  # the batch did not change, but the mode did
        _decode(system, gen, [6, -1], reset=False)
        assert len(events) == 2
    finally:
        system.close()


def test_a_mark_is_cleared_by_any_decode_even_one_its_slot_is_not_in():
    system, events = System(RunSpec(seed=0), FaultKnobs()), []
    try:
        gen = _gen(system, events)
        for slot in (0, 2):
            _prefill(system, gen, slot)
        _decode(system, gen, [3, -1, 3], reset=True)
        _prefill(system, gen, 1)
        _decode(system, gen, [4, -1, 4], reset=True)  # slot 1 is not decoding: its mark goes anyway
        assert events[-1].rows[1].prefilled
        _decode(system, gen, [5, 3, 5], reset=True)
        assert not events[-1].rows[1].prefilled
    finally:
        system.close()


def test_a_kept_wrong_row_is_classed_from_the_hosts_view_and_the_bytes_read():
    from harness.scenario import classify
    from model.merge_events import MergeEvent, MergeInputs, MergeRow

    def event(dev_positions, fresh=False):
        row = MergeRow(0, 5, 40, 77, 41, "device", "device ahead/equal")
        return MergeEvent(3, 2, 2, fresh, False, [row], MergeInputs(2, [77, 0], dev_positions, 1024, {})), row

    e, row = event([41, -1])
    assert classify(e, row) == "stale-position-buffer"
    for junk in ([41, 1206993233], [41, -2], [41, 1024]):  # bytes no position can have, beside the row
        assert classify(*event(junk)) == "garbage-position"
    assert classify(*event([41, 1023])) == "stale-position-buffer"
    assert classify(*event([41, -1], fresh=True)) == "garbage-position"  # the what-if: a never-run width
    e, row = event([41, 1206993233])
    row.host_prefilled = True
    assert classify(e, row) == "slot-reuse"


def test_a_pad_row_kept_at_minus_one_is_not_wrong_but_one_brought_alive_is():
    from model.merge_events import kept_wrong

    assert not kept_wrong("device", 77, -1, 0, -1)  # a pad row's token is never used
    assert kept_wrong("device", 77, 0, 0, -1)  # upstream's rule brought the pad row alive at 0
    assert kept_wrong("device", 77, 40, 5, 40) and not kept_wrong("device", 5, 40, 5, 40)
    assert not kept_wrong("host", 77, 41, 5, 40)
