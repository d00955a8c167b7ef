"""Reviewable goldens (syrupy): a change to merge decisions or to generated tokens shows up
as a snapshot diff in the pull request. Snapshots are named per backend, so a run on cards
(--hil) never compares against the simulator's bytes. Update with --snapshot-update."""

import pytest

from harness import scenario
from fixtures.snapshots import backend_name
from harness.workloads import stage3


def _backend(request) -> str:
    return backend_name(request.config)


@pytest.mark.parametrize("preset", ["TINY", "SMALL"])
def test_golden_tokens_per_model_preset(snapshot, request, ttnn, device, preset):
    import torch

    from model import config as mc
    from model.flags import ARMS
    from model.generator import Generator
    from model.protocol import GREEDY, read_output
    from model.qwen36 import Qwen36Model
    from model.tokenizer import encode
    from model.weights import generate_weights

    config = getattr(mc, preset)
    model = Qwen36Model(ttnn, device, config, generate_weights(config, 0), max_slots=8,
                        num_blocks=max(16, 6 * config.max_pages))
    gen = Generator(model, ttnn, device, flags=ARMS["all"], max_context=config.max_context,
                    max_pages=config.max_pages, enable_trace=False)
    answers = {}
    for i, text in enumerate(["The user asked about", "get_weather(city=", "391"]):
        prompt = encode(text)
        row = torch.zeros(config.max_pages, dtype=torch.int32)
        row[:2] = torch.tensor([2 * i + 1, 2 * i + 2])
        out = gen.prefill_forward([prompt], [row], empty_slots=[0], sampling_params=GREEDY).tolist()
        for pos in range(len(prompt), len(prompt) + 7):
            step = gen.decode_forward([out[-1]], [pos], row.unsqueeze(0), reset_batch=True, read_from_device=False, sampling_params=GREEDY)
            out.append(read_output(gen, ttnn, step)[0])
        assert len(out) == 8 and all(0 <= t < config.vocab_size for t in out)
        answers[text] = out
    assert answers == snapshot(name=_backend(request))
