"""The asynchronous collectives on a 1x2 mesh (TP=2) against torch: global semaphores,
experimental.all_gather_async, reduce_scatter_minimal_async (tt_transformers' tt_all_reduce
path for a 1xN mesh), the fused all_gather_minimal_matmul_async / matmul_reduce_scatter_async,
and fast_reduce_nc."""

import pytest
import torch
import torch.nn.functional as F

import ttsim

MESH = pytest.mark.parametrize("mesh_device", [2], indirect=True)
X = ttsim.experimental


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _bf(x):
    return x.to(torch.bfloat16)


def _cores(mesh):
    g = mesh.compute_with_storage_grid_size()
    return ttsim.CoreRangeSet({ttsim.CoreRange(ttsim.CoreCoord(0, 0), ttsim.CoreCoord(g.x - 1, g.y - 1))})


def _sems(mesh, n, value=0):
    return [ttsim.create_global_semaphore(mesh, _cores(mesh), value) for _ in range(n)]


def _shard(x, mesh, dim, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=mesh,
                            mesh_mapper=ttsim.ShardTensorToMesh(mesh, dim=dim))


def _replicate(x, mesh, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=mesh,
                            mesh_mapper=ttsim.ReplicateTensorToMesh(mesh))


def _chips(t, mesh):
    whole = ttsim.to_torch(t, mesh_composer=ttsim.ConcatMeshToTensor(mesh, dim=0))
    return list(torch.chunk(whole, mesh.get_num_devices(), dim=0))


# -- all_gather_async -----------------------------------------------------------------------------

@MESH
def test_all_gather_async_gives_every_chip_the_concatenation(mesh_device):
    x = _bf(torch.randn(1, 1, 32, 128, generator=_g(1)))
    out = X.all_gather_async(_shard(x, mesh_device, 3), persistent_output_buffer=None, dim=3,
                             multi_device_global_semaphore=_sems(mesh_device, 2), num_links=1,
                             cluster_axis=1, topology=ttsim.Topology.Linear,
                             memory_config=ttsim.DRAM_MEMORY_CONFIG, barrier_semaphore=_sems(mesh_device, 1)[0],
                             chunks_per_sync=10, num_workers_per_link=2, num_buffers_per_channel=2,
                             use_optimal_ccl_for_llama=True)
    assert list(out.shape) == [1, 1, 32, 128]
    for chip in _chips(out, mesh_device):
        assert torch.equal(chip, x)


@MESH
def test_all_gather_async_positional_overload_and_persistent_buffer(mesh_device):
    """(input_tensor, dim, semaphore) binds as 0.81.1's first overload; a persistent buffer is written
    in place, and holds the old value until the op runs."""
    x = _bf(torch.randn(1, 2, 32, 64, generator=_g(2)))
    shards = _shard(x, mesh_device, 1)
    out = X.all_gather_async(shards, 1, _sems(mesh_device, 2))
    for chip in _chips(out, mesh_device):
        assert torch.equal(chip, x)
    buf = _replicate(torch.zeros(1, 2, 32, 64), mesh_device)
    ret = X.all_gather_async(shards, buf, 1, _sems(mesh_device, 2))
    assert ret is buf
    for chip in _chips(buf, mesh_device):
        assert torch.equal(chip, x)
    with pytest.raises(ttsim.TTFatal, match="persistent_output_buffer must be"):
        X.all_gather_async(shards, _replicate(torch.zeros(1, 1, 32, 64), mesh_device), 1, _sems(mesh_device, 2))


@MESH
def test_semaphores_are_checked(mesh_device):
    x = _shard(torch.randn(1, 1, 32, 64), mesh_device, 3)
    with pytest.raises(ttsim.TTFatal, match=r"holds 1, not 0"):
        X.all_gather_async(x, dim=3, multi_device_global_semaphore=_sems(mesh_device, 2, value=1))
    with pytest.raises(TypeError, match="global semaphores"):
        X.all_gather_async(x, dim=3, multi_device_global_semaphore=[object()])
    with pytest.raises(TypeError, match="dim and multi_device_global_semaphore are required"):
        X.all_gather_async(x, dim=3)
    with pytest.raises(ttsim.TTFatal, match=r"Expected 3 semaphores but got 2"):
        X.reduce_scatter_minimal_async(x, dim=3, multi_device_global_semaphore=_sems(mesh_device, 2))
    with pytest.raises(ttsim.TTFatal, match="use_broadcast=True is not modelled"):
        X.all_gather_async(x, dim=3, multi_device_global_semaphore=_sems(mesh_device, 2), use_broadcast=True)
    with pytest.raises(TypeError, match="initial_value"):
        ttsim.create_global_semaphore(mesh_device, _cores(mesh_device), -1)
    s = ttsim.create_global_semaphore(mesh_device, _cores(mesh_device), 0, buffer_type=ttsim.BufferType.L1)
    assert s.buffer_type == ttsim.BufferType.L1


def test_a_semaphore_belongs_to_its_mesh():
    a, b = ttsim.open_device(device_id=0), ttsim.open_device(device_id=1)
    try:
        x = ttsim.from_torch(torch.ones(1, 1, 32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=a)
        with pytest.raises(ttsim.TTFatal, match="was created on"):
            X.all_gather_async(x, dim=3, multi_device_global_semaphore=_sems(b, 2))
        with pytest.raises(ttsim.TTFatal, match="was created on"):
            X.reduce_scatter_minimal_async(x, dim=3, multi_device_global_semaphore=_sems(a, 2) + _sems(b, 1))
        assert list(X.all_gather_async(x, dim=3, multi_device_global_semaphore=_sems(a, 2)).shape) == [1, 1, 32, 32]
    finally:
        ttsim.close_device(a)
        ttsim.close_device(b)


# -- reduce_scatter_minimal_async: tt_all_reduce's 1xN path -------------------------------------------

@MESH
@pytest.mark.parametrize("dtype", [ttsim.bfloat16, ttsim.float32])
def test_tt_all_reduce_on_a_1x2_mesh_is_a_reduce_scatter_of_the_partials(mesh_device, dtype):
    """tt_transformers.tt.ccl.tt_all_reduce with 1 in mesh shape: reduce_scatter_minimal_async(dim=3)."""
    parts = [_bf(torch.randn(1, 1, 32, 256, generator=_g(10 + i))) for i in range(2)]
    t = _shard(torch.cat(parts, dim=0), mesh_device, 0, dtype)
    t = ttsim.reshape(t, (1, 1, 32, 256))
    out = X.reduce_scatter_minimal_async(
        t, persistent_output_buffers=None, dim=3, multi_device_global_semaphore=_sems(mesh_device, 3),
        barrier_semaphore=_sems(mesh_device, 1)[0], num_links=1, memory_config=ttsim.DRAM_MEMORY_CONFIG,
        intermediate_memory_config=ttsim.DRAM_MEMORY_CONFIG, topology=ttsim.Topology.Linear, chunks_per_sync=10,
        num_workers_per_link=2, num_buffers_per_channel=2, cluster_axis=1)
    total = parts[0].double() + parts[1].double()
    want = total.float().to(torch.bfloat16 if dtype == ttsim.bfloat16 else torch.float32)
    got = _chips(out, mesh_device)
    assert list(out.shape) == [1, 1, 32, 128]
    assert torch.equal(got[0], want[..., :128]) and torch.equal(got[1], want[..., 128:])


@MESH
def test_reduce_scatter_minimal_async_into_persistent_buffers(mesh_device):
    parts = [_bf(torch.randn(1, 1, 64, 64, generator=_g(20 + i))) for i in range(2)]
    t = ttsim.reshape(_shard(torch.cat(parts, dim=0), mesh_device, 0), (1, 1, 64, 64))
    inter = _replicate(torch.zeros(1, 1, 64, 64), mesh_device)
    out = _replicate(torch.zeros(1, 1, 32, 64), mesh_device)
    ret = X.reduce_scatter_minimal_async(t, [inter, out], 2, _sems(mesh_device, 3))
    assert ret is out
    total = (parts[0].double() + parts[1].double()).float().to(torch.bfloat16)
    got = _chips(out, mesh_device)
    assert torch.equal(got[0], total[:, :, :32]) and torch.equal(got[1], total[:, :, 32:])
    with pytest.raises(ttsim.TTFatal, match=r"\[intermediate, output\]"):
        X.reduce_scatter_minimal_async(t, [out], 2, _sems(mesh_device, 3))


# -- fused all-gather + matmul ------------------------------------------------------------------------

def _agmm_inputs(mesh, m=32, k=128, n=96, seed=30):
    x = _bf(torch.randn(1, 1, m, k, generator=_g(seed)))
    w = _bf(torch.randn(k, n, generator=_g(seed + 1)) / 8)
    return x, w, _shard(x, mesh, 3), _replicate(w.reshape(1, 1, k, n), mesh)


@MESH
def test_all_gather_minimal_matmul_is_the_full_product(mesh_device):
    """gdn/tp.py's prefill in-proj: a K-sharded activation gathered and multiplied in one op."""
    x, w, tx, tw = _agmm_inputs(mesh_device)
    gather_buf = _replicate(torch.zeros(1, 1, 32, 128), mesh_device)
    cfg = ttsim.MinimalMatmulConfig(M_block_size=1, K_block_size=2, N_block_size=3, subblock_h=1, subblock_w=1,
                                    compute_with_storage_grid_size=(8, 4))
    out = X.all_gather_minimal_matmul_async(
        tx, tw, config=cfg, multi_device_global_semaphore=_sems(mesh_device, 2), persistent_output_buffer=gather_buf,
        num_links=1, topology=ttsim.Topology.Linear, cluster_axis=1, memory_config=ttsim.DRAM_MEMORY_CONFIG,
        dtype=ttsim.bfloat16, force_transpose=True, num_workers_per_link=2, num_buffers_per_channel=8)
    assert isinstance(out, list) and len(out) == 1
    want = (x.float() @ w.float()).to(torch.bfloat16)
    for chip in _chips(out[0], mesh_device):
        assert torch.equal(chip, want)
    for chip in _chips(gather_buf, mesh_device):
        assert torch.equal(chip, x)  # the gathered activation, in the persistent buffer


@MESH
def test_all_gather_minimal_matmul_bias_activation_addcmul_and_chunks(mesh_device):
    x, w, tx, tw = _agmm_inputs(mesh_device, seed=40)
    bias = _bf(torch.randn(1, 96, generator=_g(42)))
    resid = _bf(torch.randn(1, 1, 32, 96, generator=_g(43)))
    gate = _bf(torch.randn(1, 1, 32, 96, generator=_g(44)))
    sems = _sems(mesh_device, 2)
    barrier = _sems(mesh_device, 1)[0]
    outs = X.all_gather_minimal_matmul_async(
        tx, tw, bias_tensor=_replicate(bias, mesh_device), fused_activation=ttsim.UnaryWithParam(
            ttsim.UnaryOpType.GELU_TANH), scalar=0.5, addcmul_input_tensor1=_replicate(resid, mesh_device),
        addcmul_input_tensor2=_replicate(gate, mesh_device), multi_device_global_semaphore=sems,
        barrier_semaphore=barrier, chunks=2, dim=-1)
    mm = (x.float() @ w.float() + bias.float()).to(torch.bfloat16)
    act = F.gelu(mm.float(), approximate="tanh").to(torch.bfloat16)
    want = (resid.double() + 0.5 * act.double() * gate.double()).float().to(torch.bfloat16)
    assert len(outs) == 2
    got = torch.cat([_chips(o, mesh_device)[1] for o in outs], dim=-1)
    assert ttsim.pearson_correlation_coefficient(want.float(), got.float()) > 0.999
    sized = X.all_gather_minimal_matmul_async(tx, tw, multi_device_global_semaphore=sems, barrier_semaphore=barrier,
                                              chunk_sizes=[32, 64])
    assert [list(p.shape)[-1] for p in sized] == [32, 64]
    plain = (x.float() @ w.float()).to(torch.bfloat16)  # fp32 accumulation, as every ttsim matmul
    assert torch.equal(_chips(sized[1], mesh_device)[0], plain[..., 32:])


@MESH
def test_all_gather_minimal_matmul_refusals(mesh_device):
    x, w, tx, tw = _agmm_inputs(mesh_device, seed=50)
    sems = _sems(mesh_device, 2)
    barrier = _sems(mesh_device, 1)[0]
    with pytest.raises(ttsim.TTFatal, match="needs persistent_output_buffer or barrier_semaphore"):
        X.all_gather_minimal_matmul_async(tx, tw, multi_device_global_semaphore=sems)
    with pytest.raises(ttsim.TTFatal, match="Both addcmul_input_tensor1 and addcmul_input_tensor2"):
        X.all_gather_minimal_matmul_async(tx, tw, multi_device_global_semaphore=sems, barrier_semaphore=barrier,
                                          addcmul_input_tensor1=tx)
    with pytest.raises(ttsim.TTFatal, match=r"chunk_sizes must sum to the output width N=96, got 64"):
        X.all_gather_minimal_matmul_async(tx, tw, multi_device_global_semaphore=sems, barrier_semaphore=barrier,
                                          chunk_sizes=[32, 32])
    with pytest.raises(ttsim.TTFatal, match="FSDP"):
        X.all_gather_minimal_matmul_async(tx, tw, multi_device_global_semaphore=sems, barrier_semaphore=barrier,
                                          fsdp_cluster_axis=0, fsdp_multi_device_global_semaphore=sems,
                                          persistent_weight_buffer=tw, fsdp_topology=ttsim.Topology.Linear)
    with pytest.raises(ttsim.TTFatal, match="fuse_swiglu=True is not modelled"):
        X.all_gather_minimal_matmul_async(tx, tw, multi_device_global_semaphore=sems, barrier_semaphore=barrier,
                                          fuse_swiglu=True)
    with pytest.raises(ttsim.TTFatal, match="force_transpose=False is not modelled"):
        X.all_gather_minimal_matmul_async(tx, tw, multi_device_global_semaphore=sems, barrier_semaphore=barrier,
                                          force_transpose=False)


# -- fused matmul + reduce-scatter ------------------------------------------------------------------------

@MESH
def test_matmul_reduce_scatter_sums_the_row_parallel_partials(mesh_device):
    """gdn/tp.py's prefill out-proj: each chip holds a K-slice of x and of w; the partial products
    are summed across chips and scattered along N."""
    x = _bf(torch.randn(1, 1, 64, 128, generator=_g(60)))
    w = _bf(torch.randn(128, 128, generator=_g(61)) / 8)
    bias = _bf(torch.randn(1, 128, generator=_g(62)) / 4)
    tx = _shard(x, mesh_device, 3)
    tw = _shard(w.reshape(1, 1, 128, 128), mesh_device, 2)
    inter = _replicate(torch.zeros(1, 1, 64, 128), mesh_device)
    out = _replicate(torch.zeros(1, 1, 64, 64), mesh_device)
    mm, rs = X.matmul_reduce_scatter_async(
        tx, tw, inter, out, 3, _sems(mesh_device, 3), ttsim.CoreCoord(0, 6), barrier_semaphore=_sems(mesh_device, 1)[0],
        bias=_replicate(bias, mesh_device), num_links=1, memory_config_rs=ttsim.DRAM_MEMORY_CONFIG,
        intermediate_memory_config_rs=ttsim.DRAM_MEMORY_CONFIG, topology=ttsim.Topology.Linear,
        memory_config_mm=ttsim.DRAM_MEMORY_CONFIG, transpose_a=False, transpose_b=False, dtype=ttsim.bfloat16,
        activation=None)
    assert rs is out
    # each chip's matmul: fp32 accumulation, rounded to bf16 (as ttnn.linear); the RS then sums those
    partials = [(x[..., 64 * i:64 * (i + 1)].float() @ w[64 * i:64 * (i + 1)].float() + bias.float())
                .to(torch.bfloat16) for i in range(2)]
    for chip, p in zip(_chips(mm, mesh_device), partials):
        assert torch.equal(chip, p)
    total = (partials[0].double() + partials[1].double()).float().to(torch.bfloat16)
    got = _chips(out, mesh_device)
    assert torch.equal(got[0], total[..., :64]) and torch.equal(got[1], total[..., 64:])


@MESH
def test_matmul_reduce_scatter_transposed_weight_and_activation(mesh_device):
    x = _bf(torch.randn(1, 1, 32, 64, generator=_g(63)))
    w = _bf(torch.randn(64, 64, generator=_g(64)) / 8)
    tw = _shard(w.T.contiguous().reshape(1, 1, 64, 64), mesh_device, 3)  # [N, K], K-sharded
    out = _replicate(torch.zeros(1, 1, 32, 32), mesh_device)
    mm, _ = X.matmul_reduce_scatter_async(_shard(x, mesh_device, 3), tw, _replicate(torch.zeros(1, 1, 32, 64),
                                                                                   mesh_device),
                                          out, 3, _sems(mesh_device, 3), (0, 6), transpose_b=True, activation="relu")
    partials = [torch.relu(x[..., 32 * i:32 * (i + 1)].float() @ w[32 * i:32 * (i + 1)].float())
                .to(torch.bfloat16) for i in range(2)]
    for chip, p in zip(_chips(mm, mesh_device), partials):
        assert torch.equal(chip, p)


# -- fast_reduce_nc ------------------------------------------------------------------------------------

def test_fast_reduce_nc_sums_outer_dims_one_at_a_time(device):
    x = _bf(torch.randn(4, 3, 32, 64, generator=_g(70)))
    t = ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    one = X.fast_reduce_nc(t, dims=[0], memory_config=ttsim.DRAM_MEMORY_CONFIG)
    assert list(one.shape) == [1, 3, 32, 64]
    assert torch.equal(ttsim.to_torch(one), x.double().sum(0, keepdim=True).float().to(torch.bfloat16))
    both = X.fast_reduce_nc(t, dims=[0, 1])
    # dim 1 first, rounded to bf16, then dim 0 (tt-metal's composite, highest dim first)
    stage = x.double().sum(1, keepdim=True).float().to(torch.bfloat16)
    assert torch.equal(ttsim.to_torch(both), stage.double().sum(0, keepdim=True).float().to(torch.bfloat16))
    out = ttsim.from_torch(torch.zeros(1, 3, 32, 64), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    assert X.fast_reduce_nc(t, dims=[0], output=out) is out
    assert torch.equal(ttsim.to_torch(out), ttsim.to_torch(one))


def test_fast_reduce_nc_refusals_in_tt_metals_words(device):
    t = ttsim.from_torch(torch.ones(2, 2, 32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match="fast_reduce_nc dims should not be empty"):
        X.fast_reduce_nc(t)
    with pytest.raises(ttsim.TTFatal, match=r"reduces only outer dims: dim must be between 0 and 1, but has 2"):
        X.fast_reduce_nc(t, dims=[2])
    with pytest.raises(ttsim.TTFatal, match="dims must be unique"):
        X.fast_reduce_nc(t, dims=[1, 1])
