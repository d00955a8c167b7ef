"""Our generator with one fix lost while the flags still say it is on: what a user's regressed
code looks like to the suite (its config claims the fix; its code no longer has it).

Each factory declares every production flag (``ttsim_flags``), so every arm runs, and forces
one fix off whatever the arm asks: the incidents (tests/serving/test_incidents.py) must fail
naming that fix, and pass for the others.
"""

from dataclasses import replace

from model.flags import USER_FLAGS
from model.generator import Generator


def _losing(field: str):
    def make(model, tt, mesh_device, *, flags, **kw):
        return Generator(model, tt, mesh_device, flags=replace(flags, **{field: False}), **kw)

    make.ttsim_flags = USER_FLAGS
    make.__name__ = f"without_{field}"
    return make


without_marks = _losing("prefilled_slots_fix")
without_guard = _losing("merge_batch_guard")
without_clamp = _losing("position_clamp")
