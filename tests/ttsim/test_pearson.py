"""ttnn.pearson_correlation_coefficient as ttnn 0.81.1 defines it (ttnn/operations/comparison.py,
read from the real package): each special case, and the float64 correlation otherwise."""

import pytest
import torch

import ttsim

pcc = ttsim.pearson_correlation_coefficient


def _ref(a, b):
    a, b = a.double().flatten(), b.double().flatten()
    a, b = a - a.mean(), b - b.mean()
    return float((a @ b) / (a.norm() * b.norm()))


def test_pcc_is_the_float64_correlation():
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 33, generator=g)
    b = a + 0.3 * torch.randn(4, 33, generator=g)
    assert pcc(a, b) == pytest.approx(_ref(a, b), abs=1e-12)
    assert pcc(a, -a) == pytest.approx(-1.0, abs=1e-12)
    assert 0.9 < pcc(a, b) < 0.99


def test_pcc_special_cases_as_0_81_1():
    x = torch.arange(8.0)
    nan = torch.full((8,), float("nan"))
    assert pcc(nan, nan) == 1.0 and pcc(nan, x) == 0.0 and pcc(x, nan) == 0.0
    z = torch.zeros(8)
    assert pcc(z, torch.full((8,), 5e-5)) == 1.0  # one all-zero: allclose(atol=1e-4)
    assert pcc(z, torch.full((8,), 1e-3)) == 0.0
    r = torch.randn(64, generator=torch.Generator().manual_seed(2))
    assert pcc(r, r.clone()) == 1.0
    const = torch.full((8,), 2.0)
    assert pcc(const, const + 1e-5) == 1.0 and pcc(const, x) == 0.0  # constant: allclose fallback
    inf = x.clone()
    inf[3] = float("inf")
    y = x.clone()
    y[3] = 0.0
    assert pcc(inf, y) == 1.0  # infs and NaNs are zeroed before comparing


def test_pcc_takes_expecteds_dtype_and_reads_a_ttnn_tensor(device):
    g = torch.Generator().manual_seed(1)
    a = torch.randn(32, 32, generator=g)
    t = ttsim.from_torch(a, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    got = pcc(a, t)
    assert got == pytest.approx(_ref(a, a.to(torch.bfloat16).float()), abs=1e-12) and 0.999 < got < 1.0
    with pytest.raises(ValueError, match="Expected tensor is not a torch.Tensor"):
        pcc([1.0, 2.0], a)
    assert ttsim.get_golden_function(ttsim.pearson_correlation_coefficient)(a, a * 2 + 1) == pytest.approx(1.0, abs=1e-12)
