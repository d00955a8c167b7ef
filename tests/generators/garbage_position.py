"""Our generator with the device route of issue 35 forced: before its third decode it puts two
bf16 activations seen as one int32 (production's 1206993233) into row 0 of the width's position
input, as a trace scratch overlapping that input leaves it; between reloads nothing restages it.
A card's paged SDPA decode walks the span it names and hangs; ttsim ends it as the watchdog would
(ttsim.stray.DeviceTimeout). What the sweep and the replay make of that hang is what the tests
check (tests/serving/test_device_timeout.py), not how the garbage got there."""

import torch

from model.generator import Generator

JUNK = 1206993233


class GarbagePositionGenerator(Generator):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self._decodes = 0

    def _store(self, bucket, *args):
        trace, created = super()._store(bucket, *args)
        self._decodes += 1
        if self._decodes == 3:
            positions = self._host_ints(trace.positions)
            self._upload(torch.tensor([JUNK] + positions[1:], dtype=torch.int32), trace.positions, self.ttnn.int32)
        return trace, created
