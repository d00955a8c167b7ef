"""Opening devices and meshes, moving tensors (mesh mappers: ShardTensorToMesh, ShardTensor2dMesh,
MeshCoordinate), and ttnn-style errors."""

import pytest
import torch

import ttsim


def test_open_close_and_closed_device_errors():
    dev = ttsim.open_device(device_id=0)
    assert dev.get_num_devices() == 1 and dev.id() == 0
    with pytest.raises(ttsim.TTFatal, match="already open"):
        ttsim.open_device(device_id=0)
    t = ttsim.from_torch(torch.ones(2, 2), device=dev)
    ttsim.close_device(dev)
    with pytest.raises(ttsim.TTFatal, match="is closed"):
        ttsim.to_torch(t)
    with pytest.raises(ttsim.TTFatal, match="is closed"):
        ttsim.from_torch(torch.ones(2, 2), device=dev)


def test_device_id_out_of_range_names_the_system_size():
    with pytest.raises(ttsim.TTFatal, match=r"device_id 5 is out of range: the system has 2 chip"):
        ttsim.open_device(device_id=5)


@pytest.mark.parametrize("shape", [(1, 4), (2, 2)])
def test_mesh_larger_than_the_system_is_refused(shape):
    with pytest.raises(ttsim.TTFatal, match="the system has 2"):
        ttsim.open_mesh_device(ttsim.MeshShape(*shape))


def test_bad_mesh_shape_is_refused():
    with pytest.raises(ttsim.TTFatal, match="MeshShape needs two positive ints"):
        ttsim.MeshShape(0, 2)


@pytest.mark.parametrize("mesh_device", [(1, 2)], indirect=True)
def test_shard_and_concat_across_a_1x2_mesh(mesh_device):
    x = torch.arange(4 * 64, dtype=torch.float32).reshape(1, 4, 64)
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=mesh_device,
                         mesh_mapper=ttsim.ShardTensorToMesh(mesh_device, dim=-1))
    halves = ttsim.get_device_tensors(t)
    assert len(halves) == 2
    assert torch.equal(ttsim.to_torch(halves[1]), x[..., 32:])
    back = ttsim.to_torch(t, mesh_composer=ttsim.ConcatMeshToTensor(mesh_device, dim=-1))
    assert torch.equal(back, x)
    with pytest.raises(ttsim.TTFatal, match="pass mesh_composer"):
        ttsim.to_torch(t)


@pytest.mark.parametrize("mesh_device", [2], indirect=True)
def test_replicate_places_the_same_data_on_every_chip(mesh_device):
    x = torch.randn(3, 5)
    t = ttsim.from_torch(x, dtype=ttsim.float32, device=mesh_device,
                         mesh_mapper=ttsim.ReplicateTensorToMesh(mesh_device))
    shards = [ttsim.to_torch(s) for s in ttsim.get_device_tensors(t)]
    assert all(torch.equal(s, x) for s in shards)
    # each chip has its own DRAM: same address on both
    assert len({b.address for b in t._buffers}) == 1 and len({b.chip.id for b in t._buffers}) == 2


@pytest.mark.parametrize("device_params", [{"num_command_queues": 2}], indirect=True)
def test_device_params_reach_open_device(device, device_params):
    assert device.num_command_queues == 2


def test_copy_between_different_specs_is_refused(device):
    dev_t = ttsim.from_torch(torch.zeros(4, 32), dtype=ttsim.bfloat16, device=device)
    host = ttsim.from_torch(torch.zeros(4, 32), dtype=ttsim.float32)
    with pytest.raises(ttsim.TTFatal, match=r"copy_host_to_device_tensor: tensor specs differ.*FLOAT32.*BFLOAT16"):
        ttsim.copy_host_to_device_tensor(host, dev_t)


def test_matmul_refuses_row_major_and_names_the_argument(device):
    a = ttsim.from_torch(torch.ones(32, 32), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT, device=device)
    b = ttsim.from_torch(torch.ones(32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match="matmul: input_tensor_a must be in Layout.TILE"):
        ttsim.matmul(a, b)
    c = ttsim.from_torch(torch.ones(64, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"inner dimensions differ.*K=32.*K=64"):
        ttsim.matmul(b, c)


def test_matmul_accumulates_in_fp32(device):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(64, 256, generator=g), torch.randn(256, 96, generator=g)
    ta = ttsim.from_torch(a, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    tb = ttsim.from_torch(b, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    want = (a.bfloat16().float() @ b.bfloat16().float()).bfloat16()
    assert torch.equal(ttsim.to_torch(ttsim.matmul(ta, tb)), want)


def test_to_layout_and_typecast(device):
    x = torch.randn(5, 40)
    t = ttsim.from_torch(x, dtype=ttsim.float32, device=device)
    tiled = ttsim.to_layout(t, ttsim.TILE_LAYOUT)
    assert list(tiled.padded_shape) == [32, 64]
    as_bf16 = ttsim.typecast(tiled, ttsim.bfloat16)
    assert torch.equal(ttsim.to_torch(as_bf16), x.bfloat16())
    as_int = ttsim.typecast(ttsim.from_torch(torch.tensor([[2.7, -2.7]]), dtype=ttsim.float32, device=device),
                            ttsim.int32)
    assert ttsim.to_torch(as_int).tolist() == [[2, -2]]


# -- MeshCoordinate ----------------------------------------------------------------------------

def test_mesh_coordinate_as_ttnn():
    c = ttsim.MeshCoordinate(0, 1)
    assert repr(c) == "MeshCoordinate([0, 1])" and c.dims() == 2 and list(c) == [0, 1] and c[1] == 1
    assert c == ttsim.MeshCoordinate([0, 1]) and c != ttsim.MeshCoordinate(1, 0)
    assert ttsim.MeshCoordinate(0, 1, 2).dims() == 3
    with pytest.raises(ttsim.TTFatal, match=r"non-negative int coordinates"):
        ttsim.MeshCoordinate(-1, 0)


# -- ShardTensor2dMesh on a 2x2 mesh (tt-metal's distributed_tensor.cpp semantics) -------------

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
