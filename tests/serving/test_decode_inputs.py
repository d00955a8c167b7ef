"""What decode_forward stages into a bucket's persistent input buffers besides tokens and
positions: the page table and the slot map, with neutral rows for gaps."""

import pytest
import torch

import ttsim
from harness.base.spec import RunSpec
from harness.system import System
from harness.workloads import FaultKnobs
from model.flags import ARMS
from model.protocol import GREEDY, read_output

pytestmark = pytest.mark.our_generator  # a test of ttsim's own generator


@pytest.fixture
def system():
    s = System(RunSpec(seed=0), FaultKnobs())
    yield s
    s.close()


def _staged(system, positions, table, **kw):
    gen = system.generator(flags=ARMS["all"])
    tokens = [3] * len(positions)
    gen.prefill_forward(torch.tensor([[1, 2, 3]]), torch.zeros(1, system.max_pages, dtype=torch.int32), empty_slots=[0], sampling_params=GREEDY)
    out = gen.decode_forward(tokens, positions, table, reset_batch=True, read_from_device=False, **kw, sampling_params=GREEDY)
    trace = out.trace
    return (ttsim.to_torch(trace.page_table).tolist(), ttsim.to_torch(trace.slots).tolist())


def _row(system, first):
    return [first + i for i in range(4)] + [0] * (system.max_pages - 4)


def test_a_gap_row_stages_a_zero_page_row_and_slot_minus_one(system):
    table = [_row(system, 1), _row(system, 10), _row(system, 20)]
    pages, slots = _staged(system, [3, -1, 3], table)
    zero = [0] * system.max_pages
    assert pages == [_row(system, 1), zero, _row(system, 20), zero]  # bucket 4: row 3 is past the host's
    assert slots == [0, -1, 2, -1]


def test_the_page_table_is_restaged_when_a_row_changes(system):
    gen = system.generator(flags=ARMS["no-merge"])
    gen.prefill_forward(torch.tensor([[1, 2, 3]]), torch.zeros(1, system.max_pages, dtype=torch.int32), empty_slots=[0], sampling_params=GREEDY)
    for first in (1, 1, 7):
        out = gen.decode_forward([3], [3], [_row(system, first)], reset_batch=True, read_from_device=False, sampling_params=GREEDY)
        read_output(gen, ttsim, out)
        assert ttsim.to_torch(out.trace.page_table).tolist() == [_row(system, first)]


def test_page_table_rows_of_the_wrong_width_are_named(system):
    gen = system.generator(flags=ARMS["all"])
    with pytest.raises(ValueError, match=f"max_pages={system.max_pages}"):
        gen.decode_forward([3], [3], [[1, 2]], reset_batch=True, sampling_params=GREEDY)


def test_a_kept_uint32_token_of_2_31_or_more_is_staged_as_its_bit_pattern(system):
    """A merge may keep a device token read as uint32 (e.g. garbage >= 2**31); staging writes
    its int32 bit pattern back, so the device buffer holds the same 32 bits."""
    gen = system.generator(flags=ARMS["all"])
    gen.warmup_model_decode(enable_trace=True, max_batch_size=8)
    trace = gen._traces[2]
    gen._write_tokens(trace, [2**32 - 5, 2**31], [3, -1])
    staged = [t & 0xFFFFFFFF for t in ttsim.to_torch(trace.tokens).reshape(-1).tolist()]
    assert staged == [2**32 - 5, 2**31]
    assert ttsim.to_torch(trace.positions).tolist() == [3, -1]


def test_a_slot_remap_that_is_not_a_permutation_is_refused_before_anything_moves(system):
    gen = system.generator(flags=ARMS["all"])
    bad = torch.tensor([0, 0, 2, 3, 4, 5, 6, 7], dtype=torch.int32)
    with pytest.raises(ValueError, match="remap is not a permutation of 0..7: old slot 0 is taken by new slots 0 and 1"):
        gen.decode_forward([3], [3], [_row(system, 1)], reset_batch=True, slot_remap=bad, sampling_params=GREEDY)
    assert gen._traces == {}
    with pytest.raises(ValueError, match="one old slot for each of the 8 slots, got 3 entries"):
        gen.decode_forward([3], [3], [_row(system, 1)], reset_batch=True, slot_remap=[2, 1, 0], sampling_params=GREEDY)


def test_on_a_tp2_mesh_the_merge_reads_chip_0s_shard_of_a_bucket():
    """On TP=2 a decode bucket's input buffers are replicated per chip; the merge's reads (and
    the sweep's peek of them) take chip 0's shard: one bucket-long row, not both chips'."""
    from harness.shared_arms import SharedArmsGenerator

    s = System(RunSpec(seed=0, mesh_cols=2), FaultKnobs())
    try:
        gen = s.generator(flags=ARMS["all"])
        gen.prefill_forward(torch.tensor([[1, 2, 3]]), torch.zeros(1, s.max_pages, dtype=torch.int32), empty_slots=[0], sampling_params=GREEDY)
        out = gen.decode_forward([5], [3], [_row(s, 1)], reset_batch=True, read_from_device=False, sampling_params=GREEDY)
        read_output(gen, ttsim, out)
        trace = out.trace
        chip0 = ttsim.get_device_tensors(trace.positions)[0]
        assert gen._host_ints(trace.positions) == ttsim.to_torch(chip0).reshape(-1).tolist()
        assert len(gen._host_ints(trace.positions)) == len(gen._host_ints(trace.tokens)) == 1
        peeked = SharedArmsGenerator._peeked(gen, trace, 1)
        assert peeked is not None and peeked == gen._device_rows(gen._host_ints(trace.tokens),
                                                                  gen._host_ints(trace.positions), 1)
    finally:
        s.close()
