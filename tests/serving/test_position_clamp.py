"""The position clamp's negative control, on the generator with a chosen allocator history.

Production read positions like 1206993233 (two bf16 activations seen as one int32) from
never-written buffers. Alone such a value never equals a host position, but production's
guard (``dev_pos != -1`` against ``host_pos != -1``) counts it as a valid row: where the
garbage sits under rows the host has active, and an older batch's -1 under the row it has
not, the patterns agree, the guard is fooled, and a colliding row's residue token is kept.
The clamp turns out-of-range positions into -1 first, so the guard sees the mismatch and
falls back to the host.

The allocator history is the knob: a buffer of chosen bytes is freed just where the
decode traces' persistent inputs will be allocated (first fit), exactly as freed
activations and prefill temporaries end up under them in a serving run. Upstream creates
its trace inputs from host values, so inputs holding allocator residue are the what-if
``whatif_never_run_bucket`` (on here, as in the ``what-if`` arm); the route upstream permits,
another trace's replay overwriting a reused input, is pinned in test_arms
(``test_garbage_reaches_position_buffers_through_trace_buffer_reuse``).
"""

import dataclasses


import pytest
import torch

import ttsim
from harness.system import VLLM_TRACE_REGION_SIZE
from model.flags import ARMS
from model.generator import Generator
from model.markov import MARKOV, MarkovModel, greedy_reference
from model.protocol import GREEDY, read_output

pytestmark = pytest.mark.needs_fault_injection

JUNK = 1206993233  # 0x47F14151, the value production read
PROMPTS = {0: list(b"the user asked about the weather in"), 1: list(b"get_weather(city="),
           2: list(b"391 is the answer")}


def _run(arm: str, on_merge=None) -> tuple[dict[int, list[int]], int]:
    ttsim.set_seed(7)
    dev = ttsim.open_device(device_id=0, trace_region_size=VLLM_TRACE_REGION_SIZE)  # as the vLLM plugin opens
    dev.lag = 0.0  # every read lands: the only stale bytes are the ones the allocator left
    try:
        model = MarkovModel(ttsim, dev, MARKOV, max_slots=8)
        max_pages = MARKOV.max_context // MARKOV.block_size
        flags = dataclasses.replace(ARMS[arm], whatif_never_run_bucket=True)
        gen = Generator(model, ttsim, dev, flags=flags, max_context=MARKOV.max_context, max_pages=max_pages,
                        on_merge=on_merge)
        # what the host will ask at the first merge into bucket 4 (computed below)
        pos0 = len(PROMPTS[0]) + 1
        pos1 = len(PROMPTS[1]) + 1
        # the trace inputs are allocated bucket by bucket (1, 2, 4, 8): tokens, positions,
        # page table, slots; bucket 4's tokens sit at byte 768 and its positions at 832
        residue = torch.zeros(2048, dtype=torch.int32)
        residue[768 // 4: 768 // 4 + 4] = torch.tensor([5, 7, 5, 5])  # tokens a finished request left
        residue[832 // 4: 832 // 4 + 4] = torch.tensor([JUNK, pos1, JUNK, -1])  # row 3: an older batch's gap
        base = ttsim.from_torch(residue, dtype=ttsim.int32, device=dev)
        hole = base.buffer_address()
        ttsim.deallocate(base)
        gen.warmup_model_decode(enable_trace=True, max_batch_size=8)
        assert gen._traces[4].positions.buffer_address() == hole + 832, "allocation layout changed"
        assert gen._traces[4].tokens.buffer_address() == hole + 768, "allocation layout changed"

        row = torch.zeros(max_pages, dtype=torch.int32)
        outs = {s: gen.prefill_forward([PROMPTS[s]], [row], empty_slots=[s], sampling_params=GREEDY).tolist() for s in (0, 1)}
        step = gen.decode_forward([outs[0][-1], outs[1][-1]], [pos0 - 1, pos1 - 1], row.repeat(2, 1),
                                  reset_batch=True, read_from_device=False, sampling_params=GREEDY)
        for s, tok in zip((0, 1), read_output(gen, ttsim, step)):
            outs[s].append(tok)
        outs[2] = gen.prefill_forward([PROMPTS[2]], [row], empty_slots=[2], sampling_params=GREEDY).tolist()
        # the batch grows to slots 0-2: bucket 4, never run: its buffers hold the residue
        for _ in range(4):
            tokens = [outs[0][-1], outs[1][-1], outs[2][-1]]
            positions = [len(PROMPTS[s]) + len(outs[s]) - 1 for s in (0, 1, 2)]
            step = gen.decode_forward(tokens, positions, row.repeat(3, 1), reset_batch=True, read_from_device=False, sampling_params=GREEDY)
            for s, tok in zip((0, 1, 2), read_output(gen, ttsim, step)):
                outs[s].append(tok)
        return outs, gen.guard_rejects
    finally:
        ttsim.close_device(dev)


def _expected() -> dict[int, list[int]]:
    n = {0: 6, 1: 6, 2: 5}
    return {s: greedy_reference(PROMPTS[s], n[s]) for s in PROMPTS}


def test_without_the_clamp_garbage_fools_the_guard():
    outs, rejects = _run("slots+guard")
    assert rejects == 0
    assert outs[1] != _expected()[1], "slot 1 should have been given the residue token"
    assert outs[0] == _expected()[0] and outs[2] == _expected()[2]


def test_with_the_clamp_the_guard_sees_the_mismatch():
    outs, rejects = _run("all")
    assert rejects == 1
    assert outs == _expected()
