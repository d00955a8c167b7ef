"""ttnn.get_golden_function and the attribute form ``ttnn.<op>.golden_function``: the torch references
of the ops ttsim models, with the signatures and semantics of ttnn 0.81.1's goldens, each checked
against the simulated op; an op without one is refused by name (and its attribute is None)."""

import pytest
import torch
import torch.nn.functional as F

import ttsim

T = ttsim.TILE_LAYOUT


# -- get_golden_function -----------------------------------------------------------------------

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


# -- the attribute form and the goldens 0.81.1 has --------------------------------------------

def test_golden_function_attribute_as_real(real):
    expr = real["constants"]["expressions"]
    assert expr["ttnn.argmax.golden_function is not None"] == "True"
    assert expr["ttnn.embedding.golden_function is not None"] == "True"
    assert ttsim.argmax.golden_function is ttsim.get_golden_function(ttsim.argmax)


def test_goldens_of_the_decode_path_ops():
    idx = torch.tensor([[2, 0, 1]])
    w = torch.randn(4, 8)
    assert torch.equal(ttsim.embedding.golden_function(idx.to(torch.int32), w), w[idx])
    assert ttsim.embedding.golden_function(idx, w, dtype=ttsim.bfloat16).dtype == torch.bfloat16
    x = torch.tensor([[1.0, 5.0, 5.0, 2.0]])
    assert ttsim.argmax.golden_function(x, dim=-1).tolist() == [1]
    assert torch.equal(ttsim.untilize_with_unpadding.golden_function(torch.ones(4, 64), [1, 30]), torch.ones(2, 31))
    assert ttsim.rms_norm.golden_function is ttsim.get_golden_function(ttsim.rms_norm)
    assert ttsim.experimental.rotary_embedding.golden_function is None  # no golden in ttsim: None, as ttnn's
    with pytest.raises(ttsim.TTFatal, match=r"does not have a golden function"):
        ttsim.get_golden_function(ttsim.experimental.rotary_embedding)

UNARY_GOLDENS = ["floor", "ceil", "sign", "erf", "erfc", "exp2", "expm1", "log1p", "sinh", "cosh", "atan",
                          "relu6", "softsign", "hardsigmoid", "hardswish"]


@pytest.mark.parametrize("name", UNARY_GOLDENS)
def test_each_unary_golden_agrees_with_the_op(device, name):
    x = torch.linspace(-3.0, 3.0, 32 * 64).reshape(1, 1, 32, 64)
    op = getattr(ttsim, name)
    got = ttsim.to_torch(op(ttsim.from_torch(x, dtype=ttsim.float32, layout=T, device=device)))
    assert torch.allclose(got, op.golden_function(x), rtol=1e-5, atol=1e-5, equal_nan=True), name


def test_shape_and_compare_goldens_agree_with_their_ops(device):
    x = torch.randn(2, 3, 32, 64, generator=torch.Generator().manual_seed(40))
    y = torch.randn(2, 3, 32, 64, generator=torch.Generator().manual_seed(41))
    tx, ty = (ttsim.from_torch(v, dtype=ttsim.float32, layout=T, device=device) for v in (x, y))
    checks = [
        (ttsim.permute, (tx, (0, 2, 1, 3)), (x, (0, 2, 1, 3))),
        (ttsim.transpose, (tx, 1, 3), (x, 1, 3)),
        (ttsim.reshape, (tx, (6, 32, 64)), (x, (6, 32, 64))),
        (ttsim.concat, ([tx, ty], 1), ([x, y], 1)),
        (ttsim.repeat, (tx, ttsim.Shape([1, 2, 1, 1])), (x, [1, 2, 1, 1])),
        (ttsim.slice, (tx, [0, 1, 0, 0], [2, 3, 32, 32]), (x, [0, 1, 0, 0], [2, 3, 32, 32])),
        (ttsim.gt, (tx, ty), (x, y)), (ttsim.le, (tx, ty), (x, y)), (ttsim.ne, (tx, tx), (x, x)),
        (ttsim.where, (ttsim.gt(tx, ty), tx, ty), (x > y, x, y)),
        (ttsim.clamp, (tx, -0.5, 0.5), (x, -0.5, 0.5)),
    ]
    for op, dev_args, torch_args in checks:
        got = ttsim.to_torch(op(*dev_args)).to(torch.float32)
        want = op.golden_function(*torch_args).to(torch.float32)
        assert torch.equal(got, want), op.__name__
