"""Reviewable goldens (syrupy): a change to merge decisions or to generated tokens shows up
as a snapshot diff in the pull request. Snapshots are named per backend, so a run on cards
(--hil) never compares against the simulator's bytes. Update with --snapshot-update."""

import pytest

from fixtures import scenario
from fixtures.snapshots.backend import backend_name
from fixtures.workloads import stage3


def _backend(request) -> str:
    return backend_name(request.config)


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
