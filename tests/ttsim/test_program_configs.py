"""Matmul program configs: the fields that change values are modelled (fused_activation, applied
in the kernel on a @ b + bias) or refused by name (untilize_out); the rest schedule the kernel.
The fused activation used to be dropped silently (PCC 0.85 against the golden).
Also init_device_compute_kernel_config's defaults."""

import pytest
import torch
import torch.nn.functional as F

import ttsim

U = ttsim.UnaryOpType


def _tile(x, device):
    return ttsim.from_torch(x, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)


def _operands(device, m=64, k=64, n=96, seed=3):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(1, 1, m, k, generator=g).bfloat16().float()
    b = torch.randn(1, 1, k, n, generator=g).bfloat16().float()
    bias = torch.randn(1, 1, 1, n, generator=g).bfloat16().float()
    return a, b, bias, _tile(a, device), _tile(b, device), _tile(bias, device)


def _one_d(**kw):
    base = dict(compute_with_storage_grid_size=(8, 8), in0_block_w=2, out_subblock_h=1, out_subblock_w=1,
                per_core_M=2, per_core_N=3, fuse_batch=True, mcast_in0=True)
    return ttsim.MatmulMultiCoreReuseMultiCast1DProgramConfig(**{**base, **kw})


def _two_d(**kw):
    base = dict(compute_with_storage_grid_size=ttsim.CoreCoord(2, 2), in0_block_w=1, out_subblock_h=1,
                out_subblock_w=1, per_core_M=1, per_core_N=2, transpose_mcast=False)
    return ttsim.MatmulMultiCoreReuseMultiCastProgramConfig(**{**base, **kw})


def _dram(**kw):
    return ttsim.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(**{**dict(in0_block_w=2, per_core_M=2,
                                                                                 per_core_N=1), **kw})


def _close(got, want):
    assert torch.allclose(got.float(), want, atol=0.06, rtol=0.02), (got.float() - want).abs().max()


def _fusing_configs(act):
    """One config of each class that fuses an activation, spelled out (the keyword rule reads these)."""
    return [
        ttsim.MatmulMultiCoreReuseMultiCastProgramConfig(
            compute_with_storage_grid_size=ttsim.CoreCoord(2, 2), in0_block_w=1, out_subblock_h=1, out_subblock_w=1,
            per_core_M=1, per_core_N=2, transpose_mcast=False, fused_activation=act),
        ttsim.MatmulMultiCoreReuseMultiCast1DProgramConfig(
            compute_with_storage_grid_size=(8, 8), in0_block_w=2, out_subblock_h=1, out_subblock_w=1, per_core_M=2,
            per_core_N=3, fuse_batch=True, fused_activation=act, mcast_in0=True),
        ttsim.MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig(in0_block_w=2, per_core_M=2, per_core_N=1,
                                                                    fused_activation=act),
    ]


@pytest.mark.parametrize("which", [0, 1, 2], ids=["2d", "1d", "dram_sharded"])
def test_matmul_applies_the_program_configs_fused_activation(device, which):
    a, b, _, ta, tb, _ = _operands(device)
    got = ttsim.to_torch(ttsim.matmul(ta, tb, program_config=_fusing_configs(U.SILU)[which]))
    _close(got, F.silu(a @ b))
    plain = ttsim.to_torch(ttsim.matmul(ta, tb, program_config=_fusing_configs(None)[which]))
    _close(plain, a @ b)
    assert not torch.allclose(got.float(), plain.float(), atol=0.1)  # the activation is visible


def test_linear_fuses_the_activation_after_the_bias(device):
    """The kernel computes act(a @ b + bias): relu before the bias would differ."""
    a, b, bias, ta, tb, tbias = _operands(device)
    got = ttsim.to_torch(ttsim.linear(ta, tb, bias=tbias, program_config=_one_d(fused_activation=U.RELU)))
    _close(got, torch.relu(a @ b + bias))
    assert not torch.allclose(got.float(), torch.relu(a @ b) + bias, atol=0.1)


@pytest.mark.parametrize("act", [(U.GELU, True), ttsim.UnaryWithParam(U.GELU), U.GELU])
def test_gelu_fused_with_or_without_its_approximation_flag(device, act):
    a, b, _, ta, tb, _ = _operands(device)
    got = ttsim.to_torch(ttsim.matmul(ta, tb, program_config=_two_d(fused_activation=act)))
    _close(got, F.gelu(a @ b))


def test_user_activation_runs_after_the_fused_one(device):
    """tt-metal's bound_matmul applies ``activation`` as a unary op on the kernel's output."""
    a, b, _, ta, tb, _ = _operands(device)
    got = ttsim.to_torch(ttsim.matmul(ta, tb, program_config=_one_d(fused_activation=U.NEG), activation="relu"))
    _close(got, torch.relu(-(a @ b)))


def test_a_fused_activation_set_after_construction_is_applied(device):
    """The fields are read-write in ttnn; the op reads the config when it is called."""
    a, b, _, ta, tb, _ = _operands(device)
    pc = _one_d()
    pc.fused_activation = ttsim.UnaryWithParam(U.SIGMOID)
    _close(ttsim.to_torch(ttsim.matmul(ta, tb, program_config=pc)), torch.sigmoid(a @ b))


def test_untilize_out_is_refused_by_name(device):
    _, _, _, ta, tb, _ = _operands(device)
    pc = ttsim.MatmulMultiCoreReuseMultiCast1DProgramConfig(
        compute_with_storage_grid_size=(8, 8), in0_block_w=2, out_subblock_h=1, out_subblock_w=1, per_core_M=2,
        per_core_N=3, fuse_batch=True, mcast_in0=True, untilize_out=True)
    with pytest.raises(ttsim.TTFatal, match=r"program_config.untilize_out=True is not modelled"):
        ttsim.matmul(ta, tb, program_config=pc)
    pc = _one_d()
    pc.untilize_out = True
    with pytest.raises(ttsim.TTFatal, match=r"linear: program_config.untilize_out=True is not modelled"):
        ttsim.linear(ta, tb, program_config=pc)


def test_unmodelled_activation_and_foreign_configs_are_refused(device):
    _, _, _, ta, tb, _ = _operands(device)
    with pytest.raises(ttsim.TTFatal, match=r"program_config.fused_activation: UnaryOpType.LEAKY_RELU with params"):
        ttsim.matmul(ta, tb, program_config=_one_d(fused_activation=U.LEAKY_RELU))
    sdpa = ttsim.SDPAProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(8, 8), q_chunk_size=32,
                                   k_chunk_size=32)
    with pytest.raises(ttsim.TTFatal, match=r"program_config must be one of ttnn's Matmul\*ProgramConfig"):
        ttsim.linear(ta, tb, program_config=sdpa)


def test_scheduling_fields_leave_values_unchanged(device):
    """Blocking / multicast fields are hints: any legal choice gives the same result."""
    _, _, _, ta, tb, _ = _operands(device)
    ref = ttsim.to_torch(ttsim.matmul(ta, tb))
    for pc in (_one_d(mcast_in0=False, fuse_batch=False, in0_block_w=1, out_block_h=1),
               _two_d(transpose_mcast=True, fuse_batch=False),
               ttsim.MatmulMultiCoreReuseProgramConfig(compute_with_storage_grid_size=ttsim.CoreCoord(1, 1),
                                                      in0_block_w=2, out_subblock_h=1, out_subblock_w=1,
                                                      per_core_M=2, per_core_N=3),
               _dram(num_workers_per_dram_bank=2),
               _one_d(gather_in0=False, num_global_cb_receivers=1, stream_in1=False, hop_cores=ttsim.CoreRangeSet([]),
                      allowed_worker_cores=None)):
        assert torch.equal(ttsim.to_torch(ttsim.matmul(ta, tb, program_config=pc)), ref), pc


def test_config_defaults_and_repr_as_ttnn():
    pc = _one_d(fused_activation=(U.GELU, True))
    assert (pc.out_block_h, pc.out_block_w) == (2, 3)  # default to per_core_M / per_core_N
    assert pc.fused_activation.op_type == U.GELU and pc.fused_activation.params == [1.0]
    assert repr(pc.compute_with_storage_grid_size) == "8-8"
    assert pc.hop_cores.empty() and repr(pc.hop_cores) == "{}"
    assert pc.untilize_out is False and pc.gather_in0 is False and pc.num_global_cb_receivers == 1


# -- init_device_compute_kernel_config ---------------------------------------------------------

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
