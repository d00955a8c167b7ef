"""The architecture named in the generated config.json. vLLM inspects the class (a built-in
name would cost a subprocess and a ~/.cache write); it is never instantiated: the model
runs on ttnn inside the worker."""

from __future__ import annotations

from torch import nn


class TtsimForCausalLM(nn.Module):
    def __init__(self, *, vllm_config=None, prefix: str = ""):
        super().__init__()

    def embed_input_ids(self, input_ids):
        raise NotImplementedError("TtsimForCausalLM runs on ttnn in the ttsim worker")

    def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
        raise NotImplementedError("TtsimForCausalLM runs on ttnn in the ttsim worker")

    def compute_logits(self, hidden_states):
        raise NotImplementedError("TtsimForCausalLM runs on ttnn in the ttsim worker")
