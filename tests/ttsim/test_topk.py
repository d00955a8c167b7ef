"""ttnn.topk with the semantics of real ttnn 0.81.1 (its docstring, validation texts and golden; the
values marked "measured" come from the real package on the host with the mock cluster, see
conformance/README.md), or refused by name."""

import pytest
import torch

import ttsim

T = ttsim.TILE_LAYOUT


def dev_tensor(x, device, dtype=ttsim.bfloat16, layout=T):
    return ttsim.from_torch(x, dtype=dtype, layout=layout, device=device)


def distinct(shape, seed=0):
    """Values distinct in bf16 (a permutation of small integers), so no ties."""
    n = shape[-1]
    rows = torch.stack([torch.randperm(n, generator=torch.Generator().manual_seed(seed + i))
                        for i in range(int(torch.tensor(shape[:-1]).prod()))])
    return rows.reshape(shape).float() - n // 2


def host(t):
    return ttsim.to_torch(t)


@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_torch_on_distinct_values(device, largest):
    x = distinct([1, 1, 32, 64])
    v, i = ttsim.topk(dev_tensor(x, device), 8, largest=largest)
    want = torch.topk(x, 8, largest=largest)
    assert torch.equal(host(v), want.values) and torch.equal(host(i).long(), want.indices)
    assert (v.dtype, v.layout, i.dtype, i.layout) == (ttsim.bfloat16, T, ttsim.uint16, T)
    assert list(v.shape) == list(i.shape) == [1, 1, 32, 8]


def test_topk_along_another_dim(device):
    x = distinct([1, 1, 32, 64]).transpose(-1, -2).contiguous()  # [1, 1, 64, 32], distinct along dim 2
    v, i = ttsim.topk(dev_tensor(x, device), 5, dim=2)
    want = torch.topk(x, 5, dim=2)
    assert list(v.shape) == [1, 1, 5, 32] and torch.equal(host(v), want.values)
    assert torch.equal(host(i).long(), want.indices)


def test_topk_index_and_value_dtypes(device):
    x = distinct([1, 1, 32, 64])
    v, i = ttsim.topk(dev_tensor(x, device, dtype=ttsim.float32), 4)
    assert (v.dtype, i.dtype) == (ttsim.float32, ttsim.uint32)  # FLOAT32 needs 32-bit indices
    v, i = ttsim.topk(dev_tensor(x, device, dtype=ttsim.bfloat8_b), 4)
    assert (v.dtype, i.dtype) == (ttsim.bfloat8_b, ttsim.uint16)
    assert torch.equal(host(i).long(), torch.topk(x, 4).indices)


def test_topk_indices_widen_past_65536_padded(device):
    for width, want in ((65536, ttsim.uint16), (65537, ttsim.uint32)):  # tile-padded 65536 / 65568
        x = torch.zeros(1, 1, 1, width)
        x[..., -1] = 5.0  # the last position: its index only fits 16 bits below the boundary
        v, i = ttsim.topk(dev_tensor(x, device), 1)
        assert i.dtype == want and int(host(i).flatten()[0]) == width - 1 and float(host(v).flatten()[0]) == 5.0


def test_topk_ties_stable_lowest_index_unstable_highest(device):
    x = torch.tensor([1.0, 3.0, 3.0, 2.0, 3.0, 0.0] + [-5.0] * 26).repeat(32, 1)
    t = dev_tensor(x, device)
    _, i = ttsim.topk(t, 3, stable=True)
    assert host(i)[0].tolist() == [1, 2, 4]
    _, i = ttsim.topk(t, 3)
    assert host(i)[0].tolist() == [4, 2, 1]  # any tie order is the card's right; ttsim's is the reverse
    v, i = ttsim.topk(t, 2, largest=False, stable=True)
    assert host(v)[0].tolist() == [-5.0, -5.0] and host(i)[0].tolist() == [6, 7]


def test_topk_stable_returns_plus_zero(device):
    x = torch.tensor([-0.0, 0.0, -1.0, -2.0] + [-9.0] * 28).repeat(32, 1)
    v, i = ttsim.topk(dev_tensor(x, device), 2, stable=True)
    assert host(i)[0].tolist() == [0, 1] and torch.signbit(host(v)[0]).tolist() == [False, False]
    v, _ = ttsim.topk(dev_tensor(x, device), 2)
    assert torch.signbit(host(v)[0]).tolist() == [False, True]  # unstable: as given (indices 1, 0)


def test_topk_unsorted_gives_the_same_set_in_index_order(device):
    x = distinct([1, 1, 32, 64], seed=9)
    t = dev_tensor(x, device)
    vs, is_ = ttsim.topk(t, 6)
    vu, iu = ttsim.topk(t, 6, sorted=False)
    assert torch.equal(host(iu).long(), torch.sort(host(is_).long(), dim=-1).values)
    assert torch.equal(torch.sort(host(vu), dim=-1).values, torch.sort(host(vs), dim=-1).values)
    assert torch.equal(host(vu), torch.gather(x, -1, host(iu).long()))


def test_topk_returns_the_labels_of_an_indices_tensor(device):
    x = distinct([1, 1, 32, 64], seed=4)
    labels = (torch.arange(64) * 1000 + 7).repeat(1, 1, 32, 1)
    lt = ttsim.from_torch(labels, dtype=ttsim.uint32, layout=T, device=device)
    v, i = ttsim.topk(dev_tensor(x, device), 3, indices_tensor=lt)
    assert i.dtype == ttsim.uint32
    assert torch.equal(host(i).long(), torch.topk(x, 3).indices * 1000 + 7)
    g = ttsim.get_golden_function(ttsim.topk)(x, 3, indices_tensor=labels)
    assert torch.equal(g[1], host(i).long()) and torch.equal(g[0], host(v))


def test_topk_indices_tensor_refusals(device):
    x = dev_tensor(distinct([1, 1, 32, 64]), device)
    u16 = ttsim.from_torch(torch.zeros(1, 1, 32, 64), dtype=ttsim.uint16, layout=T, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"cannot be combined with stable=True"):
        ttsim.topk(x, 2, stable=True, indices_tensor=u16)
    with pytest.raises(ttsim.TTFatal, match=r"UINT16 indices_tensor cannot label a result that needs 32-bit"):
        ttsim.topk(dev_tensor(distinct([1, 1, 32, 64]), device, dtype=ttsim.float32), 2, indices_tensor=u16)
    i32 = ttsim.from_torch(torch.zeros(1, 1, 32, 64, dtype=torch.int32), dtype=ttsim.int32, layout=T, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"INT32 indices_tensor is not modelled"):
        ttsim.topk(x, 2, indices_tensor=i32)
    small = ttsim.from_torch(torch.zeros(1, 1, 32, 32), dtype=ttsim.uint16, layout=T, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"must have input_tensor's shape"):
        ttsim.topk(x, 2, indices_tensor=small)


def test_topk_refusals(device):
    x = distinct([1, 1, 32, 64])
    t = dev_tensor(x, device)
    with pytest.raises(ttsim.TTFatal, match=r"The input must be in tiled format"):
        ttsim.topk(dev_tensor(x, device, layout=ttsim.ROW_MAJOR_LAYOUT), 2)
    with pytest.raises(ttsim.TTFatal, match=r"Input tensor must be BFLOAT16, BFLOAT8_B, or FLOAT32"):
        ttsim.topk(dev_tensor(x.abs(), device, dtype=ttsim.uint32), 2)
    with pytest.raises(ttsim.TTFatal, match=r"K must be non-zero"):
        ttsim.topk(t, 0)
    with pytest.raises(ttsim.TTFatal, match=r"k=65 is above the size 64 .* not modelled"):
        ttsim.topk(t, 65)
    with pytest.raises(ttsim.TTFatal, match=r"preallocated output_tensor is not modelled"):
        ttsim.topk(t, 2, output_tensor=ttsim.topk(t, 2))
    with pytest.raises(ttsim.TTFatal, match=r"sharded output memory configs are not supported"):
        ttsim.topk(t, 2, memory_config=ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ttsim.TTFatal, match=r"not contained in the device grid"):
        ttsim.topk(t, 2, sub_core_grids=ttsim.CoreRangeSet([ttsim.CoreRange(ttsim.CoreCoord(0, 0),
                                                                            ttsim.CoreCoord(13, 0))]))


def test_topk_on_a_sub_core_grid_gives_the_same_answer(device):
    t = dev_tensor(distinct([1, 1, 32, 64], seed=5), device)
    grid = ttsim.CoreRangeSet([ttsim.CoreRange(ttsim.CoreCoord(1, 0), ttsim.CoreCoord(3, 9))])
    a, b = ttsim.topk(t, 4), ttsim.topk(t, 4, sub_core_grids=grid)
    assert torch.equal(host(a[0]), host(b[0])) and torch.equal(host(a[1]), host(b[1]))


def test_topk_golden_agrees_with_the_op_on_distinct_values(device):
    x = distinct([1, 1, 32, 128], seed=2)
    g = ttsim.get_golden_function(ttsim.topk)
    for kw in ({}, {"largest": False}, {"stable": True}):
        v, i = ttsim.topk(dev_tensor(x, device), 7, **kw)
        gv, gi = g(x, 7, **kw)
        assert torch.equal(gv, host(v)) and torch.equal(gi, host(i).long()), kw
