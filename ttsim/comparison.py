"""ttnn.pearson_correlation_coefficient: the PCC tt-metal's tests judge results by.

As ttnn 0.81.1 defines it (ttnn/operations/comparison.py, read from the real package): a
ttnn tensor ``actual`` is read back first; ``actual`` takes ``expected``'s dtype; both all-NaN
is 1.0, one all-NaN is 0.0; if exactly one of them is all zeros the answer is
``allclose(rtol=1e-5, atol=1e-4)`` as 0.0/1.0; infs and NaNs are then zeroed; equal tensors
are 1.0; bfloat16 is widened to float32; a constant tensor (max == min) falls back to
allclose; otherwise the Pearson correlation of the flattened values, computed in float64 (as
numpy's corrcoef does), with a NaN result falling back to allclose.
"""

from __future__ import annotations

import torch


def _allclose(expected: torch.Tensor, actual: torch.Tensor) -> float:
    return float(torch.allclose(expected, actual, rtol=1e-05, atol=1e-04))


def pearson_correlation_coefficient(expected, actual) -> float:
    from .tensor import Tensor, to_torch

    if isinstance(actual, Tensor):
        actual = to_torch(actual)
    if not isinstance(expected, torch.Tensor):
        raise ValueError("Expected tensor is not a torch.Tensor")
    if not isinstance(actual, torch.Tensor):
        actual = torch.as_tensor(actual)
    if actual.dtype != expected.dtype:
        actual = actual.to(expected.dtype)
    nan_e, nan_a = torch.isnan(expected).all(), torch.isnan(actual).all()
    if nan_e and nan_a:
        return 1.0
    if nan_e or nan_a:
        return 0.0
    if bool(expected.bool().any()) != bool(actual.bool().any()):
        return _allclose(expected, actual)
    expected = torch.where(torch.isfinite(expected), expected, torch.zeros((), dtype=expected.dtype))
    actual = torch.where(torch.isfinite(actual), actual, torch.zeros((), dtype=actual.dtype))
    if torch.equal(expected, actual):
        return 1.0
    if expected.dtype == torch.bfloat16:
        expected, actual = expected.float(), actual.float()
    if expected.max() == expected.min() or actual.max() == actual.min():
        return _allclose(expected, actual)
    e = expected.reshape(-1).to(torch.float64)
    a = actual.reshape(-1).to(torch.float64)
    e, a = e - e.mean(), a - a.mean()
    pcc = float((e * a).sum() / torch.sqrt((e * e).sum() * (a * a).sum()))
    if pcc != pcc:  # NaN
        return _allclose(expected, actual)
    return pcc  # (numpy.ma.corrcoef, which 0.81.1 uses, does not clip to [-1, 1] either)
