"""A second generator, written to the protocol the way public tt-metal's qwen36 path is built.

``models/demos/blackhole/qwen36/tt/qwen36_vllm.py`` subclasses the shared tt_transformers
``Generator`` and OWNS its prefill: it never goes through the shared ``prefill_forward``,
so it must record the slots it prefilled since the last decode itself (production's patch
0019; without it a reused slot inherits its previous occupant's token). Here
``model.generator.Generator`` plays the shared generator (the merge, the traces, the guard)
and this module is the user's code: it is loaded with ``--generator`` and imports ``ttnn``
as a tt-metal module does, which the suite resolves to the backend in use.

``RegressedQwen36StyleGenerator`` is the same code with the recording deleted: the
treatment arm's pinned slot-reuse seeds must fail with it (the framework catching a
regression in a user's generator).
"""

import torch

import ttnn  # ttsim under the suite, the real ttnn with --hil (harness.loader)

from model.flags import ALL_FLAGS
from model.generator import Generator


class Qwen36StyleGenerator(Generator):
    #: it switches every flag the shared generator does (model.flags.GeneratorFlags)
    ttsim_flags = ALL_FLAGS
    #: patch 0019: remember which slots this prefill filled, so the merge forces their host token
    RECORDS_PREFILLED_SLOTS = True

    def __init__(self, model, tt, mesh_device, **kw):
        if not isinstance(mesh_device, ttnn.MeshDevice):  # host-side only: the module's ttnn is the backend's
            raise TypeError(f"expected a {ttnn.__name__}.MeshDevice, got {type(mesh_device).__name__}")
        super().__init__(model, tt, mesh_device, **kw)

    def prefill_forward(self, tokens, page_table=None, kv_cache=None, prompt_lens=None, empty_slots=None,
                        start_pos=None, sampling_params=None, enable_trace=False, **kwargs):
        """Qwen36's own prefill: each row's chunk ``tokens[start:end]`` straight into the model;
        host logits back [B, 1, vocab] (qwen36 samples prefill on the host)."""
        rows = tokens.tolist()
        ends = prompt_lens.tolist() if prompt_lens is not None else [len(r) for r in rows]
        starts = start_pos.tolist() if start_pos is not None else [0] * len(rows)
        firsts = []
        for row, slot, start, end, table in zip(rows, empty_slots, starts, ends, page_table):
            if start == 0:
                self.model.reset_slot(int(slot))
            logits = self.model.prefill(row[start:end], slot=int(slot), page_table_row=table, start_pos=start)
            firsts.append(logits.reshape(1, -1))
            if self.RECORDS_PREFILLED_SLOTS:
                self._slots_prefilled_since_decode.add(int(slot))
        return torch.stack(firsts)


class RegressedQwen36StyleGenerator(Qwen36StyleGenerator):
    """Patch 0019 deleted: the prefilled slots are never recorded."""

    RECORDS_PREFILLED_SLOTS = False


class NotAGenerator:
    """Speaks only half the protocol (for the loader's refusal)."""

    def prefill_forward(self, *a, **k):
        raise NotImplementedError


def exploding_generator(model, tt, mesh_device, **kw):
    """A factory whose generator raises inside decode_forward (for the replay-line refusal)."""

    class Exploding(Generator):
        def decode_forward(self, *a, **k):
            raise RuntimeError("device hung in decode")

    return Exploding(model, tt, mesh_device, **kw)
