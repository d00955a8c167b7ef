"""Opening devices and meshes, moving tensors, and ttnn-style errors."""

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
