"""Collectives on a 1x2 mesh (TP=2): all_gather, all_reduce, reduce_scatter vs torch."""

import pytest
import torch

import ttsim

pytestmark = pytest.mark.parametrize("mesh_device", [2], indirect=True)


def bf(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).float()


def sharded(x, mesh, dim, layout=ttsim.TILE_LAYOUT):
    return ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=layout, device=mesh,
                            mesh_mapper=ttsim.ShardTensorToMesh(mesh, dim=dim))


def shards(t, mesh) -> list[torch.Tensor]:
    """Each chip's copy, as float32."""
    whole = ttsim.to_torch(t, mesh_composer=ttsim.ConcatMeshToTensor(mesh, dim=0)).float()
    return list(torch.chunk(whole, mesh.get_num_devices(), dim=0))


@pytest.mark.parametrize("dim, layout", [(3, ttsim.TILE_LAYOUT), (2, ttsim.ROW_MAJOR_LAYOUT), (1, ttsim.TILE_LAYOUT)])
def test_all_gather_gives_every_chip_the_concatenation(mesh_device, dim, layout):
    g = torch.Generator().manual_seed(0)
    x = bf(torch.randn(1, 2, 40, 64, generator=g))
    out = ttsim.all_gather(sharded(x, mesh_device, dim, layout), dim)
    assert out.shape == ttsim.Shape(x.shape) and out.layout == layout
    for chip in shards(out, mesh_device):
        assert torch.equal(chip, x)


def test_all_reduce_sums_in_fp32_and_rounds_once(mesh_device):
    g = torch.Generator().manual_seed(1)
    parts = [bf(torch.randn(1, 1, 32, 96, generator=g)) for _ in range(2)]
    x = torch.cat(parts, dim=0)  # chip i holds parts[i] (shard on dim 0, then view as [1, ...])
    t = sharded(x, mesh_device, 0)
    out = ttsim.all_reduce(t)
    want = bf(parts[0] + parts[1])
    for chip in shards(out, mesh_device):
        assert torch.equal(chip, want)
    assert out.shape == ttsim.Shape([1, 1, 32, 96])


def test_reduce_scatter_sums_then_splits_along_dim(mesh_device):
    g = torch.Generator().manual_seed(2)
    parts = [bf(torch.randn(1, 1, 32, 128, generator=g)) for _ in range(2)]
    t = sharded(torch.cat(parts, dim=0), mesh_device, 0)
    out = ttsim.reduce_scatter(t, 3)
    total = bf(parts[0] + parts[1])
    assert out.shape == ttsim.Shape([1, 1, 32, 64])
    got = shards(out, mesh_device)
    assert torch.equal(got[0], total[..., :64]) and torch.equal(got[1], total[..., 64:])


def test_cluster_axis_zero_on_a_1x2_mesh_is_a_group_of_one(mesh_device):
    parts = [torch.full((1, 1, 32, 32), float(i + 1)) for i in range(2)]
    t = sharded(torch.cat(parts, dim=0), mesh_device, 0)
    got = shards(ttsim.all_reduce(t, cluster_axis=0), mesh_device)
    assert torch.equal(got[0], parts[0]) and torch.equal(got[1], parts[1])
    got = shards(ttsim.all_reduce(t, cluster_axis=1), mesh_device)
    assert torch.equal(got[0], parts[0] + parts[1]) and torch.equal(got[1], parts[0] + parts[1])


def test_collectives_bad_inputs_name_the_argument(mesh_device):
    t = sharded(torch.zeros(2, 1, 32, 96), mesh_device, 0)
    with pytest.raises(ttsim.TTFatal, match=r"all_gather: dim=4 is out of range for input_tensor"):
        ttsim.all_gather(t, 4)
    with pytest.raises(ttsim.TTFatal, match=r"reduce_scatter: dim 1 of input_tensor .* \(1\) does not divide"):
        ttsim.reduce_scatter(t, 1, cluster_axis=1)
    with pytest.raises(ttsim.TTFatal, match=r"all_reduce: cluster_axis must be None, 0 or 1"):
        ttsim.all_reduce(t, cluster_axis=2)
    ids = ttsim.from_torch(torch.zeros(2, 4, dtype=torch.int32), dtype=ttsim.int32, device=mesh_device,
                           mesh_mapper=ttsim.ShardTensorToMesh(mesh_device, dim=0))
    with pytest.raises(ttsim.TTFatal, match=r"all_reduce: input_tensor must be BFLOAT16"):
        ttsim.all_reduce(ids)
    one = ttsim.get_device_tensors(t)[0]
    with pytest.raises(ttsim.TTFatal, match=r"all_gather: input_tensor spans 1 of the 2 chips"):
        ttsim.all_gather(one, 0)
