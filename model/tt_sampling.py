"""Greedy on-device sampling in the shape of tt-metal's ``SamplingGenerator``
(``models/common/sampling/generator.py``), as tt-metal's shared ``Generator`` @ 50868c00 drives a
model's ``sampling`` attribute: ``precompile`` before the decode trace is captured,
``capture_trace`` right after it (its own trace, writing the argmax into the decode trace's token
input, upstream's ``tt_out_tok``), ``sample`` on every step (replaying that trace), and the
per-step state calls ``apply_decode_state`` and ``seed_manager``'s.

Only greedy: the runner serves temperature-0 requests (production's stage 3), and an argmax
draws no random numbers, so there are no parameters to upload, no penalties and no seeds (the
seed manager's calls change nothing). Warm-up hands non-greedy parameters too (upstream's
decode warm-up sweeps them); they are sampled greedily like everything else, and its outputs
are discarded. Log-probs are never produced (``None``), as upstream without ``enable_log_probs``.

The model samples with ``model.sample_on_device(logits, out_tokens)``; this module never imports
ttsim or ttnn (it is handed the ttnn-like module).
"""

from __future__ import annotations

from types import SimpleNamespace

import torch


class _GreedySeeds:
    """tt-metal's ``SeedManager`` calls, for a sampler that draws no random numbers."""

    def __init__(self, max_batch_size: int):
        self.max_batch_size = max_batch_size

    def apply_slot_remap(self, remap) -> None:
        pass

    def deactivate_slots_except(self, slots) -> None:
        pass

    def reset_seed(self, seeds, slots) -> None:
        pass

    def reset_seed_from_slots(self, seeds, slots) -> None:
        pass

    def reset_seed_from_slots_if_needed(self, seeds, slots) -> list:
        return []  # no slot needed a new seed

    def align_seed_counters_to_positions(self, seeds, slots, positions) -> None:
        pass

    def get_new_values(self, slots=None, replicate_seeds=True) -> None:
        pass


class GreedySampling:
    """``model``: one of our models (its ``sample_on_device``); ``max_batch_size``: decode rows."""

    def __init__(self, model, ttnn, mesh_device, max_batch_size: int):
        self.model = model
        self.ttnn = ttnn
        self.mesh_device = mesh_device
        self.tt_sampling = SimpleNamespace(max_batch_size=max_batch_size)
        self.seed_manager = _GreedySeeds(max_batch_size)
        self._traces: dict[int, tuple] = {}  # id(logits) -> (trace id, logits, token output)

    def apply_decode_state(self, sampling_params_chunks, *, reset_batch=False, prompt_tokens=None,
                           output_tokens=None, **kwargs) -> None:
        """Nothing to upload: greedy has no parameters on the device and no penalty history."""

    def _tokens_for(self, logits):
        """A fresh token output [1, B] uint32 for ``logits`` [1, 1, B, vocab] (upstream's sampling
        allocates its own output when handed no ``tt_out_tok``)."""
        ttnn = self.ttnn
        b = logits.shape[2]
        return ttnn.from_torch(torch.zeros(1, b, dtype=torch.int32), dtype=ttnn.uint32,
                               layout=ttnn.ROW_MAJOR_LAYOUT, device=self.mesh_device,
                               mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device))

    def precompile(self, logits, *, tt_out_tok=None) -> None:
        """One eager pass before any capture (upstream compiles the sampler here)."""
        self.model.sample_on_device(logits, tt_out_tok if tt_out_tok is not None else self._tokens_for(logits))

    def capture_trace(self, logits, *, tt_out_tok=None, skip_precompile=False) -> None:
        """Capture the argmax of ``logits`` into ``tt_out_tok`` as a trace of its own."""
        ttnn = self.ttnn
        if not skip_precompile:
            self.precompile(logits, tt_out_tok=tt_out_tok)
        out = tt_out_tok if tt_out_tok is not None else self._tokens_for(logits)
        trace_id = ttnn.begin_trace_capture(self.mesh_device, cq_id=0)
        self.model.sample_on_device(logits, out)
        ttnn.end_trace_capture(self.mesh_device, trace_id, cq_id=0)
        self._traces[id(logits)] = (trace_id, logits, out)

    def sample(self, logits, *, tt_out_tok=None, enable_trace=True, skip_precompile=False, count_tokens=True):
        """The greedy tokens of ``logits``: the captured trace replayed when there is one for these
        logits (``tt_out_tok`` must then be its output, as upstream checks), else one eager argmax
        into ``tt_out_tok`` (or a fresh output). Returns ``(tokens, None)``."""
        trace = self._traces.get(id(logits)) if enable_trace else None
        if trace is not None and trace[1] is logits:
            trace_id, _, out = trace
            if tt_out_tok is not None and tt_out_tok is not out:
                raise ValueError("GreedySampling.sample: tt_out_tok is not the tensor the sampling trace was "
                                 "captured with")
            self.ttnn.execute_trace(self.mesh_device, trace_id, cq_id=0, blocking=False)
            return out, None
        out = tt_out_tok if tt_out_tok is not None else self._tokens_for(logits)
        self.model.sample_on_device(logits, out)
        return out, None

    def reset_trace(self) -> None:
        for trace_id, _, _ in self._traces.values():
            self.ttnn.release_trace(self.mesh_device, trace_id)
        self._traces.clear()
