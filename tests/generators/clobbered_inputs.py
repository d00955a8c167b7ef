"""Our generator with one of the public garbage routes forced, the bytes put where a trace
scratch overlapping a decode input would leave them. What the sweep, the replay and the
classifier make of the result is what the tests check, not how the garbage got there.

- GarbagePositionGenerator, the device route: at its third decode, once the inputs are staged,
  row 0 of the width's position input holds two bf16 activations seen as one int32
  (production's 1206993233). A card's paged SDPA decode walks the span it names and
  hangs (tests/serving/test_device_timeout.py).
- GarbageTokenGenerator, the token route (vllm-tt-plugin PR #122's state: the token buffer
  clobbered while the position buffer still matches the host): at the first prefill after a
  decode, row 0 of the width that ran last gets a token of two bf16 activations; its position
  is left as it is, so the merge at the next decode keeps the token (tests/serving/test_classify.py).
"""

import torch

from model.generator import Generator

JUNK = 1206993233  # 0x47F14151


class GarbagePositionGenerator(Generator):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._decodes = 0

    def decode_forward(self, *args, **kw):
        self._decodes += 1
        return super().decode_forward(*args, **kw)

    def _write_tables(self, trace, *args, **kw):
        # after this decode's inputs were staged (a refreshing model restages them every step)
        super()._write_tables(trace, *args, **kw)
        if self._decodes == 3:
            positions = self._host_ints(trace.positions)
            self._upload(torch.tensor([JUNK] + positions[1:], dtype=torch.int32), trace.positions, self.ttnn.int32)


class GarbageTokenGenerator(Generator):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.clobbered = 0

    def prefill_forward(self, *args, **kw):
        if self._mode == "decode" and not self.clobbered:
            trace = self._traces[self._last_bucket]
            tokens = self._host_ints(trace.tokens)
            self._upload(torch.tensor([JUNK] + tokens[1:], dtype=torch.int32), trace.tokens, self.ttnn.uint32)
            self.clobbered += 1
        return super().prefill_forward(*args, **kw)
