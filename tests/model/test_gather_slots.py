"""gather_slots(remap): new slot i takes old slot remap[i], bytes unchanged; bad remaps refused.

Another engineer's generator calls ``model.gather_slots(remap)`` to condense decode rows, so
the name and signature are pinned here for both models.
"""

from __future__ import annotations

import pytest
import torch

from model.config import TINY
from model.markov import MarkovModel
from model_helpers import DecodeInputs, build, logits_rows, pages, prompt

SLOTS = 4
#: a permutation that is not its own inverse (so a scatter in place of the gather is caught)
REMAP = [2, 0, 3, 1]
PROMPTS = {0: prompt(40), 1: prompt(33, offset=11), 2: prompt(51, offset=19), 3: prompt(29, offset=61)}


def _pools(ttnn, model) -> dict[str, torch.Tensor]:
    """Every GDN pool, all chips joined along the dimension the pool is split on (slots stay put)."""
    dev = model.mesh_device
    out = {}
    for i in model.conv_pool:
        out[f"conv{i}"] = ttnn.to_torch(model.conv_pool[i], mesh_composer=ttnn.ConcatMeshToTensor(dev, dim=3))
        out[f"state{i}"] = ttnn.to_torch(model.state_pool[i], mesh_composer=ttnn.ConcatMeshToTensor(dev, dim=1))
    return out


def _caches(ttnn, model) -> dict[str, torch.Tensor]:
    dev = model.mesh_device
    return {f"{n}{i}": ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(dev, dim=1))
            for n, pool in (("k", model.k_cache), ("v", model.v_cache)) for i, t in pool.items()}


def _prefilled(ttnn, mesh_device):
    model = build(ttnn, mesh_device, TINY, max_slots=SLOTS)
    firsts = {}
    for slot, toks in PROMPTS.items():
        firsts[slot] = int(model.prefill(toks, slot=slot, page_table_row=pages(TINY, slot)).argmax())
    return model, firsts


def _slot_rows(pools: dict[str, torch.Tensor]) -> dict[str, list[torch.Tensor]]:
    """Each pool as one tensor per slot (conv pools hold slots on dim 2, state pools on dim 0)."""
    return {k: [v[:, :, s] if k.startswith("conv") else v[s] for s in range(SLOTS)] for k, v in pools.items()}


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_each_new_slot_holds_the_old_slots_bytes(ttnn, mesh_device):
    model, _ = _prefilled(ttnn, mesh_device)
    before = _slot_rows(_pools(ttnn, model))
    for name, rows in before.items():  # the check means something only if the slots differ
        assert not torch.equal(rows[0], rows[1]), f"{name}: slots 0 and 1 hold the same state"
    caches = _caches(ttnn, model)
    model.gather_slots(REMAP)
    after = _slot_rows(_pools(ttnn, model))
    for name in before:
        for new, old in enumerate(REMAP):
            assert torch.equal(after[name][new], before[name][old]), f"{name}: slot {new} != old slot {old}"
            assert after[name][new].dtype == before[name][old].dtype
    for name, t in _caches(ttnn, model).items():  # K/V is addressed by page table: untouched
        assert torch.equal(t, caches[name]), name


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_decoding_row_i_after_the_gather_equals_decoding_old_slot_remap_i_before(ttnn, mesh_device):
    """Decode a batch where row i reads slot remap[i]; on a twin model, gather first and let row
    i read slot i: the logits are the same bytes, and so is the state both leave behind."""
    def inputs(firsts):
        toks = [firsts[old] for old in REMAP]
        pos = [len(PROMPTS[old]) for old in REMAP]
        return toks, pos, [pages(TINY, old) for old in REMAP]

    direct, firsts = _prefilled(ttnn, mesh_device)
    toks, pos, rows = inputs(firsts)
    inp = DecodeInputs(ttnn, mesh_device, TINY, batch=SLOTS)
    inp.set(toks, pos, REMAP, rows)
    want = logits_rows(ttnn, direct.decode(*inp.args()))

    gathered, firsts2 = _prefilled(ttnn, mesh_device)
    assert firsts2 == firsts
    gathered.gather_slots(REMAP)
    inp2 = DecodeInputs(ttnn, mesh_device, TINY, batch=SLOTS)
    inp2.set(toks, pos, list(range(SLOTS)), rows)
    got = logits_rows(ttnn, gathered.decode(*inp2.args()))
    assert torch.equal(got, want)
    # the state each decode wrote: direct's old slot remap[i] is gathered's slot i
    d, g = _slot_rows(_pools(ttnn, direct)), _slot_rows(_pools(ttnn, gathered))
    for name in d:
        for new, old in enumerate(REMAP):
            assert torch.equal(g[name][new], d[name][old]), f"{name}: slot {new} after decode"


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_the_identity_remap_changes_no_byte(ttnn, mesh_device):
    model, _ = _prefilled(ttnn, mesh_device)
    before = {**_pools(ttnn, model), **_caches(ttnn, model)}
    model.gather_slots(list(range(SLOTS)))
    model.gather_slots(torch.arange(SLOTS))  # a tensor remap is taken too
    after = {**_pools(ttnn, model), **_caches(ttnn, model)}
    for name in before:
        assert torch.equal(after[name], before[name]), name


BAD = [
    ([0, 1, 2], "one old slot for each of the 4 slots, got 3 entries"),
    ([0, 1, 2, 3, 0], "one old slot for each of the 4 slots, got 5 entries"),
    ([0, 0, 1, 2], "not a permutation of 0..3: old slot 0 is taken by new slots 0 and 1, and old slot 3 by none"),
    ([0, 1, 2, 4], r"remap\[3\] = 4 is outside 0..3"),
    ([0, 1, 2, -1], r"remap\[3\] = -1 is outside 0..3"),
    ([0, 1, 2.0, 3], r"remap\[2\] must be an int slot id, got 2.0"),
    ([0, True, 2, 3], r"remap\[1\] must be an int slot id, got True"),
    (None, "remap must be a list of 4 slot ids, got NoneType"),
]


@pytest.mark.parametrize("remap, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_a_bad_remap_is_refused_naming_the_problem_and_moves_nothing(ttnn, mesh_device, remap, message):
    model, _ = _prefilled(ttnn, mesh_device)
    before = _pools(ttnn, model)
    with pytest.raises(ValueError, match=message) as exc:
        model.gather_slots(remap)
    assert str(exc.value).startswith("gather_slots: ")
    for name, t in _pools(ttnn, model).items():
        assert torch.equal(t, before[name]), name


@pytest.mark.parametrize("remap, message", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_the_sweep_model_refuses_the_same_remaps_with_the_same_message(ttnn, mesh_device, remap, message):
    model = MarkovModel(ttnn, mesh_device, max_slots=SLOTS)
    with pytest.raises(ValueError, match=message) as exc:
        model.gather_slots(remap)
    assert str(exc.value).startswith("gather_slots: ")


@pytest.mark.parametrize("mesh_device", [1], indirect=True, ids=["tp1"])
def test_the_sweep_model_accepts_a_permutation_and_its_decode_is_unchanged(ttnn, mesh_device):
    """The sweep model keeps no per-slot state: a gather moves nothing and decode reads the same."""
    model = MarkovModel(ttnn, mesh_device, max_slots=SLOTS)

    def dev(values, dtype):
        return ttnn.from_torch(torch.tensor(values, dtype=torch.int32), dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT,
                               device=mesh_device)

    args = (dev([[5, 9, 200, 31]], ttnn.uint32), dev([3, 17, 0, 511], ttnn.int32),
            dev([[0]] * SLOTS, ttnn.int32), dev(list(range(SLOTS)), ttnn.int32))
    before = logits_rows(ttnn, model.decode(*args))
    assert model.gather_slots(REMAP) is None
    assert torch.equal(logits_rows(ttnn, model.decode(*args)), before)
