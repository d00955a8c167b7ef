"""ttnn's elementwise names beyond the model's: short names, in-place forms, comparisons,
where, unary activations, fused activations on binary ops, scale_mask_softmax. Each is
checked against torch on the values the device holds (bf16 inputs), within bf16 rounding."""

import pytest
import torch
import torch.nn.functional as F

import ttsim
from model.pcc import comp_pcc

U = ttsim.UnaryOpType


def _tile(x, device, dtype=ttsim.float32):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device)


def _x(seed=0, shape=(32, 64), scale=2.0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed)) * scale


UNARY = [
    ("abs", {}, torch.abs), ("sin", {}, torch.sin), ("cos", {}, torch.cos), ("sinh", {}, torch.sinh),
    ("cosh", {}, torch.cosh), ("atan", {}, torch.atan), ("sign", {}, torch.sign), ("floor", {}, torch.floor),
    ("ceil", {}, torch.ceil), ("relu6", {}, F.relu6), ("hardsigmoid", {}, F.hardsigmoid),
    ("hardswish", {}, F.hardswish), ("softsign", {}, F.softsign), ("erfc", {}, torch.erfc), ("exp2", {}, torch.exp2),
    ("expm1", {}, torch.expm1), ("erf", {"fast_and_approximate_mode": True}, torch.erf),
    ("mish", {}, F.mish), ("gelu", {}, F.gelu), ("log1p", {}, lambda x: torch.log1p(x.abs())),
    ("isnan", {}, lambda x: torch.isnan(x).float()), ("logical_not", {}, lambda x: (x == 0).float()),
    ("elu", {"alpha": 0.5}, lambda x: F.elu(x, 0.5)), ("celu", {"alpha": 2.0}, lambda x: F.celu(x, 2.0)),
    ("hardtanh", {"min_val": -0.5, "max_val": 1.5}, lambda x: F.hardtanh(x, -0.5, 1.5)),
    ("selu", {"scale": 1.5, "alpha": 2.0}, lambda x: 1.5 * (x.clamp(min=0) + (2.0 * torch.expm1(x)).clamp(max=0))),
    ("clip", {"min": -1.0, "max": 0.5}, lambda x: x.clamp(-1.0, 0.5)),
    ("clamp", {"min": -0.25}, lambda x: x.clamp(min=-0.25)),
]


@pytest.mark.parametrize("name, kwargs, ref", UNARY, ids=[u[0] for u in UNARY])
def test_unary_ops_match_torch(device, name, kwargs, ref):
    x = _x(1)
    if name == "log1p":
        x = x.abs()
    got = ttsim.to_torch(getattr(ttsim, name)(_tile(x, device), **kwargs))
    assert torch.allclose(got, ref(x), atol=1e-5, rtol=1e-5, equal_nan=True), name


def test_parametrised_unaries_follow_their_parameters(device):
    x = _x(2)
    t = _tile(x, device)
    assert torch.allclose(ttsim.to_torch(ttsim.threshold(t, 0.5, -9.0)), F.threshold(x, 0.5, -9.0))
    assert torch.allclose(ttsim.to_torch(ttsim.leaky_relu(t, 0.2)), F.leaky_relu(x, 0.2))
    out = _tile(torch.zeros(32, 64), device)
    assert ttsim.clamp(t, -0.1, 0.1, output_tensor=out) is out
    assert ttsim.to_torch(out).abs().max() <= 0.1 + 1e-7
    with pytest.raises(ttsim.TTFatal, match=r"clip: at least one of min and max"):
        ttsim.clip(t)


BINARY = [
    ("mul", torch.mul), ("sub", torch.sub), ("div", torch.div), ("gt", lambda a, b: (a > b).float()),
    ("lt", lambda a, b: (a < b).float()), ("ge", lambda a, b: (a >= b).float()), ("le", lambda a, b: (a <= b).float()),
    ("minimum", torch.minimum), ("squared_difference", lambda a, b: (a - b) ** 2), ("rsub", lambda a, b: b - a),
    ("pow", lambda a, b: torch.pow(a, b)),
]


@pytest.mark.parametrize("name, ref", BINARY, ids=[b[0] for b in BINARY])
def test_binary_ops_match_torch(device, name, ref):
    a, b = _x(3).abs() + 0.5, _x(4).abs() + 0.5
    got = ttsim.to_torch(getattr(ttsim, name)(_tile(a, device), _tile(b, device)))
    assert torch.allclose(got, ref(a, b), rtol=1e-5, atol=1e-5), name
    scalar = ttsim.to_torch(getattr(ttsim, name)(_tile(a, device), 1.5))
    assert torch.allclose(scalar, ref(a, torch.tensor(1.5)), rtol=1e-5, atol=1e-5), name


@pytest.mark.parametrize("name, ref", [("add_", torch.add), ("sub_", torch.sub), ("mul_", torch.mul)])
def test_in_place_binaries_write_their_first_operand(device, name, ref):
    a, b = _x(5), _x(6, shape=(1, 64))
    ta = _tile(a, device)
    assert getattr(ttsim, name)(ta, _tile(b, device)) is ta
    assert torch.allclose(ttsim.to_torch(ta), ref(a, b), atol=1e-5)
    with pytest.raises(ttsim.TTFatal, match=r"in place, .* must broadcast to"):
        getattr(ttsim, name)(_tile(b, device), ta)


def test_where_with_tensors_and_scalars(device):
    p = (_x(7) > 0).float()
    a, b = _x(8), _x(9)
    tp = _tile(p, device)
    assert torch.equal(ttsim.to_torch(ttsim.where(tp, _tile(a, device), _tile(b, device))), torch.where(p != 0, a, b))
    assert torch.equal(ttsim.to_torch(ttsim.where(tp, 1.0, _tile(b, device))), torch.where(p != 0, 1.0, b))
    out = _tile(torch.zeros(32, 64), device)
    assert ttsim.where(tp, _tile(a, device), -2.0, output_tensor=out) is out
    assert torch.equal(ttsim.to_torch(out), torch.where(p != 0, a, -2.0))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "mul", "divide", "maximum", "minimum", "eq", "ne",
                                  "gt", "rsub"])
def test_fused_activations_apply_to_operands_and_result(device, name):
    a, b = _x(10), _x(11).abs() + 1.0
    ta, tb = _tile(a, device), _tile(b, device)
    fused = ttsim.to_torch(getattr(ttsim, name)(ta, tb, input_tensor_a_activations=[U.SILU],
                                                input_tensor_b_activations=[ttsim.UnaryWithParam(U.SQRT)],
                                                activations=[ttsim.UnaryWithParam((U.LEAKY_RELU, 0.1))]))
    plain = getattr(ttsim, name)(ttsim.silu(ta), ttsim.sqrt(tb))
    want = ttsim.to_torch(ttsim.leaky_relu(plain, 0.1))
    assert torch.allclose(fused, want, atol=1e-5), name


def test_tt_transformers_mlp_idiom(device):
    """w1_out * silu... as tt_transformers writes it: mul(w1, w3, input_tensor_a_activations=[SILU])."""
    w1, w3 = _x(12), _x(13)
    got = ttsim.to_torch(ttsim.mul(_tile(w1, device, ttsim.bfloat16), _tile(w3, device, ttsim.bfloat16),
                                   input_tensor_a_activations=[U.SILU], dtype=ttsim.bfloat8_b))
    want = F.silu(w1.bfloat16().float()) * w3.bfloat16().float()
    ok, pcc = comp_pcc(want, got, 0.999)
    assert ok, pcc


def test_unknown_fused_activation_is_refused_at_the_call(device):
    t = _tile(_x(14), device)
    with pytest.raises(ttsim.TTFatal, match=r"add: activations entries must be ttnn.UnaryOpType"):
        ttsim.add(t, t, activations=["relu"])
    with pytest.raises(ttsim.TTFatal, match=r"UnaryOpType.RELU with params \[2.0\] is not modelled"):
        ttsim.add(t, t, activations=[ttsim.UnaryWithParam((U.RELU, 2.0))])


def _softmax_ref(x, scale, mask):
    return torch.softmax(x.double() * scale + mask.double(), -1)


def test_scale_mask_softmax_with_a_row_mask_and_a_causal_mask(device):
    x = _x(15, shape=(2, 1, 64, 64))
    row = torch.zeros(2, 1, 1, 64)
    row[..., 50:] = -1e9
    got = ttsim.to_torch(ttsim.scale_mask_softmax(_tile(x, device), 0.125, _tile(row, device)))
    assert torch.allclose(got.double(), _softmax_ref(x, 0.125, row), atol=1e-6)
    causal = torch.triu(torch.full((64, 64), -1e9), 1).expand(2, 1, 64, 64)
    got = ttsim.to_torch(ttsim.scale_mask_softmax(_tile(x, device), 0.5, _tile(causal, device), is_causal_mask=True))
    assert torch.allclose(got.double(), _softmax_ref(x, 0.5, causal), atol=1e-6)
    assert got[0, 0, 0, 1:].abs().max() < 1e-6  # the first row sees only itself


def test_scale_mask_softmax_reads_the_first_row_of_a_tile_padded_row_mask(device):
    x = _x(16, shape=(1, 1, 32, 64))
    padded = torch.cat([torch.zeros(1, 1, 1, 64), torch.full((1, 1, 31, 64), -1e9)], dim=2)
    got = ttsim.to_torch(ttsim.scale_mask_softmax(_tile(x, device), 1.0, _tile(padded, device)))
    assert torch.allclose(got, torch.softmax(x, -1), atol=1e-6)


def test_in_place_softmaxes_write_their_input(device):
    x = _x(17, shape=(1, 1, 32, 64))
    t = _tile(x, device)
    assert ttsim.scale_mask_softmax_in_place(t, 2.0) is t
    assert torch.allclose(ttsim.to_torch(t), torch.softmax(x * 2.0, -1), atol=1e-6)
    u = _tile(x, device)
    assert ttsim.softmax_in_place(u, dim=-1) is u
    assert torch.allclose(ttsim.to_torch(u), torch.softmax(x, -1), atol=1e-6)
    causal = torch.triu(torch.full((32, 64), -1e9), 1)[None, None]
    w = _tile(x, device)
    ttsim.scale_mask_softmax_in_place(w, 0.5, mask=_tile(causal, device), is_causal_mask=True)
    assert torch.allclose(ttsim.to_torch(w), torch.softmax(x * 0.5 + causal, -1), atol=1e-6)
    with pytest.raises(ttsim.TTFatal, match=r"softmax_in_place: dim=2: ttnn's in-place softmax runs over the last dim"):
        ttsim.softmax_in_place(u, dim=2)


def test_scale_mask_softmax_refuses_a_mask_that_does_not_fit(device):
    with pytest.raises(ttsim.TTFatal, match=r"mask must be \[\.\.\., 64, 64\]"):
        ttsim.scale_mask_softmax(_tile(_x(18, shape=(1, 1, 64, 64)), device), 1.0,
                                 _tile(torch.zeros(1, 1, 1, 64), device), is_causal_mask=True)


WITH_OUT = [u for u in UNARY if u[0] != "clip"]  # ttnn.clip has no output_tensor


@pytest.mark.parametrize("name, kwargs", [(u[0], u[1]) for u in WITH_OUT] + [("threshold", {"threshold": 0.0, "value": 1.0}),
                                                                             ("leaky_relu", {"negative_slope": 0.3})],
                         ids=[u[0] for u in WITH_OUT] + ["threshold", "leaky_relu"])
def test_unary_output_tensor_receives_the_result(device, name, kwargs):
    x = _x(20).abs() + 0.1
    out = _tile(torch.zeros(32, 64), device)
    assert getattr(ttsim, name)(_tile(x, device), **kwargs, output_tensor=out) is out
    assert torch.equal(ttsim.to_torch(out), ttsim.to_torch(getattr(ttsim, name)(_tile(x, device), **kwargs)))


@pytest.mark.parametrize("name", [b[0] for b in BINARY if b[0] != "pow"])
def test_binary_dtype_and_output_tensor(device, name):
    a, b = _x(21).abs() + 0.5, _x(22).abs() + 0.5
    out = _tile(torch.zeros(32, 64), device, ttsim.bfloat16)
    ta, tb = _tile(a, device), _tile(b, device)
    assert getattr(ttsim, name)(ta, tb, dtype=ttsim.bfloat16, output_tensor=out) is out
    want = ttsim.to_torch(getattr(ttsim, name)(ta, tb, dtype=ttsim.bfloat16))
    assert want.dtype == torch.bfloat16 and torch.equal(ttsim.to_torch(out), want)


def test_pow_writes_output_tensor(device):
    x = _x(23).abs()
    out = _tile(torch.zeros(32, 64), device)
    assert ttsim.pow(_tile(x, device), 2.0, output_tensor=out) is out
    assert torch.allclose(ttsim.to_torch(out), x * x, rtol=1e-6)


def test_rdiv_divides_the_value_by_the_tensor(device):
    x = _x(24).abs() + 0.5
    out = _tile(torch.zeros(32, 64), device)
    assert ttsim.rdiv(_tile(x, device), 7.0, rounding_mode="floor", output_tensor=out) is out
    assert torch.equal(ttsim.to_torch(out), torch.div(torch.tensor(7.0), x, rounding_mode="floor"))
    assert torch.allclose(ttsim.to_torch(ttsim.rdiv(_tile(x, device), 7.0)), 7.0 / x, rtol=1e-6)


BROADCAST_OK = [((32, 64), (32, 64)), ((2, 32, 64), (1, 64)), ((1, 64), (2, 32, 64)), ((2, 1, 64), (1, 32, 1)),
                ((64,), (3, 32, 64)), ((1, 1), (2, 32, 64)), ((2, 32, 1), (2, 32, 64))]
BROADCAST_BAD = [((32, 64), (32, 63)), ((2, 32, 64), (3, 32, 64)), ((2, 32, 64), (2, 1, 32))]


@pytest.mark.parametrize("sa, sb", BROADCAST_OK + BROADCAST_BAD)
def test_binary_broadcasting_follows_torch_shapes_and_values(device, sa, sb):
    a, b = _x(1, sa), _x(2, sb)
    try:
        want = a + b
    except RuntimeError:
        with pytest.raises(ttsim.TTFatal, match=r"add: shapes do not broadcast: .* and "):
            ttsim.add(_tile(a, device), _tile(b, device))
        return
    got = ttsim.add(_tile(a, device), _tile(b, device))
    assert tuple(got.shape) == tuple(want.shape)
    assert torch.equal(ttsim.to_torch(got), want)


def test_matmul_where_and_mask_softmax_broadcast_by_the_same_rule(device):
    """Batch dims of matmul, where's three operands and the mask's leading dims of
    scale_mask_softmax: what broadcasts runs (matching torch), what does not is refused."""
    a, b = _x(30, (2, 1, 32, 64)), _x(31, (1, 3, 64, 32))
    got = ttsim.matmul(_tile(a, device), _tile(b, device))
    assert tuple(got.shape) == (2, 3, 32, 32)
    assert comp_pcc(torch.matmul(a, b), ttsim.to_torch(got).float(), 0.9999)[0]
    with pytest.raises(ttsim.TTFatal, match="matmul: batch dims do not broadcast"):
        ttsim.matmul(_tile(_x(32, (2, 32, 64)), device), _tile(_x(33, (3, 64, 32)), device))
    p, t, f = (_x(34 + i, s) for i, s in enumerate([(2, 1, 32), (1, 32, 32), (32, 1)]))
    got = ttsim.where(_tile((p > 0).float(), device), _tile(t, device), _tile(f, device))
    assert torch.equal(ttsim.to_torch(got), torch.where(p > 0, t, f))
    with pytest.raises(ttsim.TTFatal, match="where: shapes do not broadcast"):
        ttsim.where(_tile((p > 0).float(), device), _tile(_x(37, (3, 32, 32)), device), 0.0)
    x = _tile(_x(38, shape=(2, 1, 64, 64)), device)
    out = ttsim.scale_mask_softmax(x, 1.0, _tile(torch.zeros(1, 1, 64, 64), device), is_causal_mask=True)
    assert tuple(out.shape) == (2, 1, 64, 64)
    with pytest.raises(ttsim.TTFatal, match=r"mask must be \[\.\.\., 64, 64\] broadcasting over input_tensor"):
        ttsim.scale_mask_softmax(x, 1.0, _tile(torch.zeros(3, 1, 64, 64), device), is_causal_mask=True)


# -- UnaryOpType.MISH --------------------------------------------------------------------------

def test_mish_fuses_as_an_activation(device):
    x = torch.randn(32, 32, generator=torch.Generator().manual_seed(7))
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    got = ttsim.to_torch(ttsim.multiply(t, t, activations=[ttsim.UnaryOpType.MISH]))
    assert torch.allclose(got, F.mish(x * x), atol=1e-6)
    assert int(ttsim.UnaryOpType.MISH.value) == 93
