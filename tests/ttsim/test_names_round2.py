"""Issue 25's missing names, each with the semantics of real ttnn 0.81.1 (values below were
measured on the real package with the mock cluster, see conformance/README.md) or refused by
name. Names, signatures and enum values are also checked by test_conformance.py."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ttsim

CC = ttsim.CoreCoord


# -- CoreRange / CoreRangeSet -------------------------------------------------------------

def test_core_range_as_ttnn_prints_and_counts_it():
    r = ttsim.CoreRange(CC(0, 0), CC(1, 2))
    assert repr(r) == "[0-0 - 1-2]" and repr(r.grid_size()) == "2-3"
    assert (r.start, r.end) == (CC(0, 0), CC(1, 2))
    assert r.contains(CC(1, 2)) and not r.contains(CC(2, 0)) and r.contains(ttsim.CoreRange(CC(0, 1), CC(1, 1)))
    with pytest.raises(ttsim.TTFatal, match=r"invalid core range"):
        ttsim.CoreRange(CC(2, 0), CC(1, 0))


def test_core_range_set_as_ttnn():
    a = ttsim.CoreRange(CC(0, 0), CC(1, 2))
    s = ttsim.CoreRangeSet({a})
    assert repr(s) == "{[0-0 - 1-2]}" and s.num_cores() == 6 and s.size() == 1 and not s.empty()
    assert repr(s.bounding_box()) == "[0-0 - 1-2]" and s.ranges() == [a]
    empty = ttsim.CoreRangeSet([])
    assert repr(empty) == "{}" and empty.empty() and empty.num_cores() == 0
    two = ttsim.CoreRangeSet([ttsim.CoreRange(CC(1, 0), CC(3, 9)), ttsim.CoreRange(CC(5, 0), CC(6, 9))])
    assert two.num_cores() == 30 + 20 and repr(two.bounding_box()) == "[1-0 - 6-9]"
    assert two.contains(CC(5, 3)) and not two.contains(CC(4, 3))
    with pytest.raises(ttsim.TTFatal, match=r"core ranges \[0-0 - 1-2\] and \[1-2 - 2-2\] overlap!"):
        ttsim.CoreRangeSet([a, ttsim.CoreRange(CC(1, 2), CC(2, 2))])


# -- MeshCoordinate, sharding names ---------------------------------------------------------

def test_mesh_coordinate_as_ttnn():
    c = ttsim.MeshCoordinate(0, 1)
    assert repr(c) == "MeshCoordinate([0, 1])" and c.dims() == 2 and list(c) == [0, 1] and c[1] == 1
    assert c == ttsim.MeshCoordinate([0, 1]) and c != ttsim.MeshCoordinate(1, 0)
    assert ttsim.MeshCoordinate(0, 1, 2).dims() == 3
    with pytest.raises(ttsim.TTFatal, match=r"non-negative int coordinates"):
        ttsim.MeshCoordinate(-1, 0)


def test_sharded_presets_and_enums():
    mc = ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG
    assert mc.is_sharded() and mc.buffer_type == ttsim.BufferType.L1
    assert mc.memory_layout == ttsim.TensorMemoryLayout.HEIGHT_SHARDED and mc.shard_spec is None
    assert ttsim.L1_WIDTH_SHARDED_MEMORY_CONFIG.memory_layout == ttsim.TensorMemoryLayout.WIDTH_SHARDED
    assert repr(ttsim.ShardStrategy.HEIGHT) == "<ShardStrategy.HEIGHT: 1>"  # a Python enum in ttnn.types
    assert repr(ttsim.ShardOrientation.COL_MAJOR) == "ShardOrientation.COL_MAJOR"


def test_a_tensor_moved_to_a_sharded_preset_keeps_its_values(device):
    x = torch.randn(1, 1, 64, 32, generator=torch.Generator().manual_seed(2))
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    moved = ttsim.to_memory_config(t, ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    assert moved.memory_config() == ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG and torch.equal(ttsim.to_torch(moved), x)


# -- init_device_compute_kernel_config -------------------------------------------------------

def test_init_device_compute_kernel_config_defaults_and_passthrough():
    made = ttsim.init_device_compute_kernel_config(None, None, math_fidelity=ttsim.MathFidelity.HiFi4)
    assert isinstance(made, ttsim.WormholeComputeKernelConfig)
    assert (made.math_fidelity, made.math_approx_mode, made.fp32_dest_acc_en) == (ttsim.MathFidelity.HiFi4, True, False)
    default = ttsim.init_device_compute_kernel_config("blackhole")
    assert default.math_fidelity == ttsim.MathFidelity.LoFi and default.packer_l1_acc is False
    mine = ttsim.WormholeComputeKernelConfig(math_fidelity=ttsim.MathFidelity.HiFi2, fp32_dest_acc_en=True)
    assert ttsim.init_device_compute_kernel_config("blackhole", mine, math_approx_mode=False,
                                                   packer_l1_acc=True, dst_full_sync_en=True,
                                                   throttle_level=ttsim.ThrottleLevel.LEVEL_1,
                                                   fp32_dest_acc_en=False) is mine  # given: returned as is
    with pytest.raises(ttsim.TTFatal, match=r"device_kernel_config must be a ttnn.WormholeComputeKernelConfig"):
        ttsim.init_device_compute_kernel_config("blackhole", object())


# -- get_golden_function -------------------------------------------------------------------------

def test_golden_functions_of_modelled_ops():
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(4, 32, generator=g), torch.randn(32, 8, generator=g)
    add = ttsim.get_golden_function(ttsim.add)
    assert torch.equal(add(a, a, activations=[ttsim.UnaryOpType.RELU]), torch.relu(a + a))
    assert torch.equal(ttsim.get_golden_function(ttsim.softmax)(a), torch.softmax(a, -1))  # dim defaults to -1
    mm = ttsim.get_golden_function(ttsim.matmul)
    pc = ttsim.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(in0_block_w=1, per_core_M=1, per_core_N=1,
                                                                      fused_activation=ttsim.UnaryOpType.SILU)
    assert torch.allclose(mm(a, b, program_config=pc, activation="relu"), F.silu(a @ b))  # the config's wins
    assert torch.allclose(mm(a, b, activation="relu"), torch.relu(a @ b))
    rms = ttsim.get_golden_function(ttsim.rms_norm)
    w = torch.rand(32, generator=g)
    want = (a + a) * torch.rsqrt((a + a).pow(2).mean(-1, keepdim=True) + 1e-6) * w
    assert torch.allclose(rms(a, w, epsilon=1e-6, residual_input_tensor=a), want)


def test_golden_matches_the_simulated_op(device):
    """The golden and ttsim's op agree (bf16 inputs, fp32 math)."""
    x = torch.randn(1, 1, 32, 64, generator=torch.Generator().manual_seed(6)).bfloat16().float()
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    for op in (ttsim.exp, ttsim.silu, ttsim.gelu, ttsim.mish):
        assert torch.allclose(ttsim.to_torch(op(t)), ttsim.get_golden_function(op)(x), atol=1e-5), op


def test_an_op_without_a_golden_is_refused_by_name():
    with pytest.raises(RuntimeError, match=r"does not have a golden function"):
        ttsim.get_golden_function(ttsim.experimental.rotary_embedding)


# -- UnaryOpType.MISH, Tensor.to_numpy -----------------------------------------------------------

def test_mish_fuses_as_an_activation(device):
    x = torch.randn(32, 32, generator=torch.Generator().manual_seed(7))
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    got = ttsim.to_torch(ttsim.multiply(t, t, activations=[ttsim.UnaryOpType.MISH]))
    assert torch.allclose(got, F.mish(x * x), atol=1e-6)
    assert int(ttsim.UnaryOpType.MISH.value) == 93


def test_to_numpy(device):
    x = torch.arange(6, dtype=torch.int32).reshape(2, 3)
    n = ttsim.from_torch(x, device=device).to_numpy()
    assert isinstance(n, np.ndarray) and n.dtype == np.int32 and (n == x.numpy()).all()
    f = ttsim.from_torch(torch.tensor([1.5, -2.0]), dtype=ttsim.bfloat16).to_numpy()
    assert f.dtype == np.float32 and f.tolist() == [1.5, -2.0]


# -- reshape(..., padded_shape), slice(starts=...), joint SDPA ---------------------------------

def test_reshape_with_its_natural_padded_shape(device):
    x = torch.arange(64.0).reshape(1, 1, 2, 32)
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    r = ttsim.reshape(t, [1, 2, 1, 32], [1, 2, 32, 32])
    assert list(r.shape) == [1, 2, 1, 32] and torch.equal(ttsim.to_torch(r), x.reshape(1, 2, 1, 32))
    with pytest.raises(ttsim.TTFatal, match=r"padded_shape \[1, 2, 64, 32\] other than \[1, 2, 32, 32\]"):
        ttsim.reshape(t, [1, 2, 1, 32], [1, 2, 64, 32])
    rm = ttsim.from_torch(x, dtype=ttsim.float32, device=device)
    assert list(ttsim.reshape(rm, [2, 32], padded_shape=[2, 32]).shape) == [2, 32]
    with pytest.raises(ttsim.TTFatal, match=r"other than \[2, 32\]"):
        ttsim.reshape(rm, [2, 32], [2, 64])


def test_slice_with_starts_ends_steps_keywords(device):
    x = torch.arange(120.0).reshape(2, 3, 20)
    t = ttsim.from_torch(x, dtype=ttsim.float32, device=device)
    got = ttsim.to_torch(ttsim.slice(t, starts=[0, 1, 2], ends=[2, 3, 18], steps=[1, 1, 4]))
    assert torch.equal(got, x[0:2, 1:3, 2:18:4])
    assert torch.equal(ttsim.to_torch(ttsim.slice(t, starts=[1, 0, 0], ends=[2, 3, 5])), x[1:2, :, :5])
    with pytest.raises(ttsim.TTFatal, match=r"not both"):
        ttsim.slice(t, [0, 0, 0], [1, 1, 1], starts=[0, 0, 0], ends=[1, 1, 1])


def test_slice_with_device_tensor_bounds_is_refused_by_name(device):
    x = ttsim.from_torch(torch.zeros(2, 64), dtype=ttsim.bfloat16, device=device)
    idx = ttsim.from_torch(torch.tensor([0, 0], dtype=torch.int32), dtype=ttsim.uint32, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"starts/ends as device tensors .* not modelled by ttsim"):
        ttsim.slice(x, idx, idx)
    with pytest.raises(ttsim.TTFatal, match=r"slice_dim=1, num_devices=2"):
        ttsim.slice(x, [0, 0], [2, 32], slice_dim=1, num_devices=2)
    for kw in ({"slice_dim": 0}, {"num_devices": 2}):  # either alone is the tensor overload's too
        with pytest.raises(ttsim.TTFatal, match=r"not modelled by ttsim; pass lists"):
            ttsim.slice(x, [0, 0], [2, 32], **kw)


def _joint_inputs(device, b=1, nh=2, n=64, length=32, d=32, seed=8):
    g = torch.Generator().manual_seed(seed)
    ts = [torch.randn(b, nh, m, d, generator=g).bfloat16().float() for m in (n, n, n, length, length, length)]
    return ts, [ttsim.from_torch(t, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device) for t in ts]


def _pc_joint():
    return ttsim.SDPAProgramConfig(compute_with_storage_grid_size=CC(8, 8), q_chunk_size=32, k_chunk_size=32)


def test_joint_sdpa_attends_over_main_and_joint_tokens(device):
    """0.81.1's golden: cat(q, joint_q) etc. along the sequence, non-causal, split at N."""
    (q, k, v, jq, jk, jv), tt = _joint_inputs(device)
    out, joint = ttsim.transformer.joint_scaled_dot_product_attention(*tt, joint_strategy="rear",
                                                                      program_config=_pc_joint())
    ref = F.scaled_dot_product_attention(torch.cat([q, jq], 2), torch.cat([k, jk], 2), torch.cat([v, jv], 2))
    assert list(out.shape) == [1, 2, 64, 32] and list(joint.shape) == [1, 2, 32, 32]
    assert torch.allclose(ttsim.to_torch(out).float(), ref[:, :, :64], atol=0.02)
    assert torch.allclose(ttsim.to_torch(joint).float(), ref[:, :, 64:], atol=0.02)
    alone = F.scaled_dot_product_attention(q, k, v)  # without the joint keys it would differ
    assert not torch.allclose(ttsim.to_torch(out).float(), alone, atol=0.05)
    golden = ttsim.get_golden_function(ttsim.transformer.joint_scaled_dot_product_attention)
    g_out, g_joint = golden(q, k, v, jq, jk, jv, joint_strategy="rear")
    assert torch.allclose(g_out, ref[:, :, :64]) and torch.allclose(g_joint, ref[:, :, 64:])


def test_joint_sdpa_scale_and_one_program(device):
    (q, k, v, jq, jk, jv), tt = _joint_inputs(device, seed=9)
    device.clear_program_cache()
    for _ in range(2):
        out, _ = ttsim.transformer.joint_scaled_dot_product_attention(*tt, joint_strategy="rear",
                                                                      program_config=_pc_joint(), scale=0.5)
    assert device.num_program_cache_entries() == 1  # both outputs come from one program
    ref = F.scaled_dot_product_attention(torch.cat([q, jq], 2), torch.cat([k, jk], 2), torch.cat([v, jv], 2),
                                         scale=0.5)
    assert torch.allclose(ttsim.to_torch(out).float(), ref[:, :, :64], atol=0.02)


def test_joint_sdpa_refuses_other_strategies_and_shapes(device):
    _, tt = _joint_inputs(device)
    with pytest.raises(ttsim.TTFatal, match=r"joint_strategy must be 'rear', got 'front'"):
        ttsim.transformer.joint_scaled_dot_product_attention(*tt, joint_strategy="front", program_config=_pc_joint())
    _, gqa = _joint_inputs(device, nh=1)
    with pytest.raises(ttsim.TTFatal, match=r"same b, nh and d"):
        ttsim.transformer.joint_scaled_dot_product_attention(tt[0], gqa[1], gqa[2], *tt[3:], joint_strategy="rear",
                                                             program_config=_pc_joint())
