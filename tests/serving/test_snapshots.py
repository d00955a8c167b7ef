"""Reviewable goldens (syrupy): a change to merge decisions or to generated tokens shows up
as a snapshot diff in the pull request. Snapshots are named per backend, so a run on cards
(--hil) never compares against the simulator's bytes. Update with --snapshot-update."""

import pytest

from fixtures import scenario
from fixtures.workloads import stage3


def _backend(request) -> str:
    return "hil" if request.config.getoption("--hil") else "ttsim"


@pytest.mark.needs_fault_injection
def test_merge_decisions_of_the_slot_reuse_seed(snapshot, request):
    workload = stage3(29)
    result = scenario.run_scenario(workload, "control", 29, expected=scenario.serial_answers(workload, 29),
                                   record_merges=True)
    decisions = [
        {"step": e.step, "bucket": [e.previous_bucket, e.bucket], "guard": e.guard_rejected,
         "rows": [f"slot {r.slot}: host {r.host_token}@{r.host_pos} dev {r.dev_token}@{r.dev_pos} -> {r.source}"
                  for r in e.rows if r.host_pos >= 0]}
        for e in result.merges
    ]
    verdicts = {v.request_id: ("ok" if v.ok else v.defect) for v in result.verdicts}
    assert {"merges": decisions, "verdicts": verdicts} == snapshot(name=_backend(request))


def test_golden_tokens_of_the_tiny_model(snapshot, request, ttnn, device):
    import torch

    from model import config as mc
    from model.generator import Generator
    from model.flags import ARMS
    from model.qwen36 import Qwen36Model
    from model.tokenizer import encode
    from model.weights import generate_weights

    model = Qwen36Model(ttnn, device, mc.TINY, generate_weights(mc.TINY, 0), max_slots=8, num_blocks=16)
    gen = Generator(model, ttnn, device, flags=ARMS["all"], max_context=mc.TINY.max_context,
                    max_pages=mc.TINY.max_pages, enable_trace=False)
    answers = {}
    for i, text in enumerate(["The user asked about", "get_weather(city=", "391"]):
        prompt = encode(text)
        row = torch.zeros(mc.TINY.max_pages, dtype=torch.int32)
        row[:2] = torch.tensor([2 * i + 1, 2 * i + 2])
        out = gen.prefill_forward([prompt], [row], empty_slots=[0])
        for pos in range(len(prompt), len(prompt) + 7):
            step = gen.decode_forward([out[-1]], [pos], row.unsqueeze(0), reset_batch=True)
            out.append(gen.process_decode_output_host(step)[0])
        answers[text] = out
    assert answers == snapshot(name=_backend(request))
