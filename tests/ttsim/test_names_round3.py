"""Issue 22's names from the upstream decode path: unsqueeze_to_4D, ShardTensor2dMesh, the arch
queries and topk, each with the semantics of real ttnn 0.81.1 (the values marked "measured"
come from the real package on the host with the mock cluster, see conformance/README.md; the
rest from its docstrings, validation texts and tt-metal's distributed_tensor.cpp) or refused
by name. Names and signatures are also checked by test_conformance.py."""

import pytest
import torch

import ttsim

T = ttsim.TILE_LAYOUT


def dev_tensor(x, device, dtype=ttsim.bfloat16, layout=T):
    return ttsim.from_torch(x, dtype=dtype, layout=layout, device=device)


# -- the arch queries ------------------------------------------------------------------------------

def test_a_device_reports_the_blackhole_arch_as_the_ttnn_enum(device):
    arch = device.arch()
    assert arch is ttsim.Arch.BLACKHOLE and repr(arch) == "Arch.BLACKHOLE" and arch != ttsim.Arch.WORMHOLE_B0
    assert ttsim.device.Arch is ttsim.Arch  # ttnn.device.Arch is ttnn.Arch too
    assert ttsim.get_arch_name() == "blackhole"  # measured: the p150 mock cluster says "blackhole"


def test_is_blackhole_and_is_wormhole_b0_with_and_without_a_device(device):
    # measured on 0.81.1 without a device: is_blackhole() True, is_wormhole_b0() False
    assert ttsim.device.is_blackhole() is True and ttsim.device.is_wormhole_b0() is False
    assert ttsim.device.is_blackhole(device) is True and ttsim.device.is_wormhole_b0(device) is False


def test_the_device_form_asks_the_device_it_is_given():
    """With a device the answer is that device's arch(), not the host's arch name."""

    class Wormhole:
        def arch(self):
            return ttsim.Arch.WORMHOLE_B0

    assert ttsim.device.is_wormhole_b0(Wormhole()) is True and ttsim.device.is_blackhole(Wormhole()) is False


# -- unsqueeze_to_4D -------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [[6], [2, 3], [1, 2, 3]])
def test_unsqueeze_to_4d_left_pads_with_ones_on_device(device, shape):
    x = torch.arange(6.0).reshape(shape)
    out = ttsim.unsqueeze_to_4D(dev_tensor(x, device))
    want = [1] * (4 - len(shape)) + shape
    assert list(out.shape) == want and list(out.padded_shape) == want[:2] + [32, 32]  # measured
    assert out.layout == T and torch.equal(ttsim.to_torch(out), x.reshape(want))


def test_unsqueeze_to_4d_runs_on_a_host_tensor_too():
    x = torch.arange(6.0).reshape(2, 3)
    out = ttsim.unsqueeze_to_4D(ttsim.from_torch(x, dtype=ttsim.bfloat16))
    assert out.storage_type() == ttsim.from_torch(x).storage_type()  # still on host
    assert list(out.shape) == [1, 1, 2, 3] and out.layout == ttsim.ROW_MAJOR_LAYOUT  # measured
    assert torch.equal(ttsim.to_torch(out), x.reshape(1, 1, 2, 3))


def test_unsqueeze_to_4d_keeps_rank_4_and_refuses_rank_5(device):
    t = dev_tensor(torch.ones(1, 1, 2, 3), device)
    assert ttsim.unsqueeze_to_4D(t) is t
    for shape in ([1, 1, 1, 2, 3], [2, 1, 1, 1, 3]):  # measured: even all-ones leading dims throw
        with pytest.raises(ttsim.TTFatal, match=r"Tensor rank is greater than 4"):
            ttsim.unsqueeze_to_4D(dev_tensor(torch.ones(shape), device))


def test_unsqueeze_to_4d_golden():
    g = ttsim.get_golden_function(ttsim.unsqueeze_to_4D)
    assert g(torch.ones(5)).shape == (1, 1, 1, 5) and g(torch.ones(2, 3, 4)).shape == (1, 2, 3, 4)


# -- ShardTensor2dMesh ------------------------------------------------------------------------------

@pytest.fixture
def mesh_2x2(monkeypatch):
    monkeypatch.setenv("TTSIM_NUM_CHIPS", "4")
    mesh = ttsim.open_mesh_device(ttsim.MeshShape(2, 2))
    yield mesh
    ttsim.close_mesh_device(mesh)


def shards_of(x, mesh, mapper):
    t = ttsim.from_torch(x, dtype=ttsim.float32, mesh_mapper=mapper, device=mesh)
    return [ttsim.to_torch(s) for s in ttsim.get_device_tensors(t)]


X = torch.arange(4 * 8.0).reshape(1, 1, 4, 8)


def test_2d_sharding_puts_part_r_c_on_device_r_c(mesh_2x2):
    got = shards_of(X, mesh_2x2, ttsim.ShardTensor2dMesh(mesh_2x2, (2, 2), (2, 3)))
    want = [X[:, :, 2 * r:2 * r + 2, 4 * c:4 * c + 4] for r in range(2) for c in range(2)]
    assert all(torch.equal(g, w) for g, w in zip(got, want)) and len(got) == 4
    # the other axis order swaps which tensor dim follows the mesh rows
    swapped = shards_of(X, mesh_2x2, ttsim.ShardTensor2dMesh(mesh_2x2, (2, 2), (3, 2)))
    assert torch.equal(swapped[1], X[:, :, 2:4, 0:4]) and torch.equal(swapped[2], X[:, :, 0:2, 4:8])


def test_a_none_dim_replicates_along_its_mesh_axis(mesh_2x2):
    cols = shards_of(X, mesh_2x2, ttsim.ShardTensor2dMesh(mesh_2x2, (2, 2), (None, 3)))
    assert torch.equal(cols[0], cols[2]) and torch.equal(cols[1], cols[3]) and torch.equal(cols[1], X[..., 4:])
    rows = shards_of(X, mesh_2x2, ttsim.ShardTensor2dMesh(mesh_2x2, (2, 2), (2, None)))
    assert torch.equal(rows[0], rows[1]) and torch.equal(rows[2], X[:, :, 2:]) and torch.equal(rows[2], rows[3])
    full = shards_of(X, mesh_2x2, ttsim.ShardTensor2dMesh(mesh_2x2, (2, 2), (None, None)))
    assert all(torch.equal(s, X) for s in full)


def test_another_arrangement_of_the_same_size_places_shards_row_major(mesh_2x2):
    got = shards_of(X, mesh_2x2, ttsim.ShardTensor2dMesh(mesh_2x2, (4, 1), (3, None)))
    assert all(torch.equal(got[i], X[..., 2 * i:2 * i + 2]) for i in range(4))


def test_on_a_1x2_mesh_it_agrees_with_shard_tensor_to_mesh(mesh_device):
    x = torch.randn(1, 2, 32, 64, generator=torch.Generator().manual_seed(3))
    a = shards_of(x, mesh_device, ttsim.ShardTensor2dMesh(mesh_device, (1, 2), (None, 3)))
    b = shards_of(x, mesh_device, ttsim.ShardTensorToMesh(mesh_device, 3))
    assert all(torch.equal(p, q) for p, q in zip(a, b)) and not torch.equal(a[0], a[1])


def test_2d_mesh_mapper_refusals(mesh_2x2):
    m = mesh_2x2
    with pytest.raises(ttsim.TTFatal, match=r"size of the supplied mesh shape .* does not match the device shape"):
        ttsim.ShardTensor2dMesh(m, (2, 4), (2, 3))
    with pytest.raises(ttsim.TTFatal, match=r"submesh is not modelled"):
        ttsim.ShardTensor2dMesh(m, (1, 2), (2, 3))
    with pytest.raises(ttsim.TTFatal, match=r"ND sharding requires the number of chunks 3 to match"):
        shards_of(torch.ones(1, 1, 4, 6), m, ttsim.ShardTensor2dMesh(m, (4, 1), (3, None)))  # chunk: 2+2+2
    with pytest.raises(ttsim.TTFatal, match=r"uneven shards are not modelled"):
        shards_of(torch.ones(1, 1, 4, 5), m, ttsim.ShardTensor2dMesh(m, (2, 2), (2, 3)))
    with pytest.raises(ttsim.TTFatal, match=r"both mesh axes shard tensor dim"):
        shards_of(X, m, ttsim.ShardTensor2dMesh(m, (2, 2), (3, -1)))
    with pytest.raises(ttsim.TTFatal, match=r"MeshMapperConfig is not modelled"):
        ttsim.ShardTensor2dMesh(m, (2, 2), (2, 3)).config()


# -- topk ------------------------------------------------------------------------------------------

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
