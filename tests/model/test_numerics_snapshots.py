"""Numeric snapshots (stored with their tolerance, one file per backend): per-layer PCC of the
model against the float64 reference, and an op numerics table (PCC vs float64, max abs
error per op and shape). Each test asserts its floor first; the snapshot records the values
so a change in numerics shows up in review (``ttsim snapshots report``)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from harness.snapshots.numeric import Close, NumericSnapshotExtension, Pcc
from model.config import TINY
from model.pcc import pcc_value
from model.reference import ReferenceSession
from model.qwen36 import Qwen36Model
from model_helpers import pages, prompt, weights_for

LAYER_PCC_FLOOR = 0.99  # bf16 through the whole stack (the prefill test's floor)
OP_PCC_FLOOR = 0.999
ERR_TOL = dict(abs=1e-3, rel=0.25)  # low bits differ between a card, the sim and tt-metal versions


@pytest.fixture
def num_snapshot(snapshot, snapshot_backend):
    return snapshot.use_extension(NumericSnapshotExtension)(name=snapshot_backend)


@pytest.mark.parametrize("mesh_device", [1], indirect=True)
def test_per_layer_pcc_against_float64(ttnn, mesh_device, num_snapshot):
    """Logits of the model cut after k layers vs the reference cut the same way (k = 1..all):
    where accuracy is lost shows as the layer whose PCC drops."""
    toks = prompt(45)
    table = {}
    for k in range(1, TINY.num_layers + 1):
        config = dataclasses.replace(TINY, num_layers=k)
        model = Qwen36Model(ttnn, mesh_device, config, weights_for(TINY), max_slots=1, num_blocks=config.max_pages)
        got = model.prefill(toks, slot=0, page_table_row=pages(config, 0))
        want = ReferenceSession(config, weights_for(TINY)).prefill(toks)[-1]
        pcc = pcc_value(want, got)
        kind = "attention" if TINY.is_attention_layer(k - 1) else "gdn"
        assert pcc >= LAYER_PCC_FLOOR, f"after layer {k - 1} ({kind}): PCC {pcc}"
        err = float((got.double() - want.double()).abs().max())
        table[f"layers 0-{k - 1} (last {kind})"] = {"pcc": Pcc(round(pcc, 6), floor=LAYER_PCC_FLOOR),
                                                   "max_abs": Close(round(err, 6), **ERR_TOL)}
    assert table == num_snapshot


def _ops(ttnn):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return [
        ("matmul", (32, 64, 32), lambda t: ttnn.matmul(t[0], t[1]), lambda a, b: a @ b, [r(32, 64), r(64, 32)]),
        ("matmul", (32, 256, 128), lambda t: ttnn.matmul(t[0], t[1]), lambda a, b: a @ b, [r(32, 256), r(256, 128)]),
        ("add", (32, 128), lambda t: ttnn.add(t[0], t[1]), torch.add, [r(32, 128), r(32, 128)]),
        ("multiply", (32, 128), lambda t: ttnn.multiply(t[0], t[1]), torch.mul, [r(32, 128), r(32, 128)]),
        ("softmax", (32, 128), lambda t: ttnn.softmax(t[0], dim=-1), lambda a: torch.softmax(a, -1), [r(32, 128)]),
        ("rms_norm", (32, 128), lambda t: ttnn.rms_norm(t[0], epsilon=1e-6),
         lambda a: a * torch.rsqrt(a.pow(2).mean(-1, keepdim=True) + 1e-6), [r(32, 128)]),
        ("silu", (32, 128), lambda t: ttnn.silu(t[0]), torch.nn.functional.silu, [r(32, 128)]),
        ("exp", (32, 128), lambda t: ttnn.exp(t[0]), torch.exp, [r(32, 128)]),
    ]


def test_op_numerics_table(ttnn, device, num_snapshot):
    table = {}
    for name, shape, op, ref, inputs in _ops(ttnn):
        dev = [ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device) for x in inputs]
        got = ttnn.to_torch(op(dev)).double()
        want = ref(*[x.double() for x in inputs])
        pcc = pcc_value(want, got)
        assert pcc >= OP_PCC_FLOOR, f"{name} {shape}: PCC {pcc}"
        key = f"{name} {'x'.join(map(str, shape))} bf16"
        table[key] = {"pcc": Pcc(round(pcc, 6), floor=OP_PCC_FLOOR),
                      "max_abs": Close(round(float((got - want).abs().max()), 6), **ERR_TOL)}
    assert table == num_snapshot
