"""Accuracy comparisons with tt-metal's ``comp_pcc`` / ``comp_allclose`` conventions.

Our own implementation of the semantics of tt-metal's
``models/common/utility_functions.py::comp_pcc`` (same argument order: golden first),
computed in float64, with two deliberate tightenings that are listed below because a
test gate must not pass on a broken kernel:

``comp_pcc(golden, calculated, pcc=0.99) -> (passed, value)`` where ``value`` is a float:

1. both tensors all NaN                 -> ``(True, 1.0)``   (as tt-metal)
2. exactly one tensor all NaN           -> ``(False, 0.0)``  (as tt-metal)
3. one tensor all zero, the other not   -> ``(False, 0.0)``  (as tt-metal)
4. non-finite values: tt-metal zeroes NaN/inf in each tensor independently, so a NaN in
   ``calculated`` where ``golden`` is finite is silently hidden. Here the NaN positions
   and the +inf/-inf positions (and signs) must agree, else ``(False, 0.0)``
   [tightened]; when they agree they are zeroed in both and the rest is compared
   (as tt-metal). ``strict_nonfinite=False`` restores tt-metal's behaviour exactly.
5. equal after that masking (``torch.equal``) -> ``(True, 1.0)`` (as tt-metal)
6. zero variance in either tensor (and not equal): tt-metal's masked ``corrcoef`` turns
   the undefined coefficient into a pass with 1.0; here it is ``(False, 0.0)``
   [tightened: a constant output against a varying golden is not a match].
7. otherwise the Pearson coefficient of the flattened float64 tensors,
   ``passed = value >= pcc``.

As in tt-metal, ``calculated`` is first cast to ``golden``'s dtype when they differ (a
bf16 golden rounds an fp32 result to bf16; a float64 golden loses nothing).

The element counts must match (tt-metal squeezes then flattens; so do we, shapes
[1, n] and [n] compare fine); a different count raises ValueError.
"""

from __future__ import annotations

import math
from typing import Tuple

import torch

__all__ = ["comp_pcc", "comp_allclose", "assert_with_pcc", "pcc_value"]


def _as_tensor(x) -> torch.Tensor:
    return (x if isinstance(x, torch.Tensor) else torch.as_tensor(x)).detach().cpu()


def _as_f64(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.float64).reshape(-1)


def _nonfinite_agree(g: torch.Tensor, c: torch.Tensor) -> bool:
    if not torch.equal(torch.isnan(g), torch.isnan(c)):
        return False
    gi, ci = torch.isinf(g), torch.isinf(c)
    if not torch.equal(gi, ci):
        return False
    return torch.equal(g[gi], c[ci])  # same signs of infinity


def comp_pcc(golden, calculated, pcc: float = 0.99, *, strict_nonfinite: bool = True) -> Tuple[bool, float]:
    """Pearson correlation gate with tt-metal semantics (see the module docstring)."""
    g, c = _as_tensor(golden), _as_tensor(calculated)
    if c.dtype != g.dtype:  # as tt-metal: calculated is first cast to golden's dtype
        c = c.to(g.dtype)
    g, c = _as_f64(g), _as_f64(c)
    if g.numel() != c.numel():
        raise ValueError(f"comp_pcc: element counts differ ({g.numel()} vs {c.numel()})")
    g_nan, c_nan = torch.isnan(g), torch.isnan(c)
    g_all_nan = bool(g_nan.all()) if g.numel() else False
    c_all_nan = bool(c_nan.all()) if c.numel() else False
    if g_all_nan and c_all_nan:
        return True, 1.0
    if g_all_nan or c_all_nan:
        return False, 0.0
    if bool((g != 0).any()) != bool((c != 0).any()):  # NaN counts as non-zero, as bool() does
        return False, 0.0
    if strict_nonfinite and not _nonfinite_agree(g, c):
        return False, 0.0
    g = torch.where(torch.isfinite(g), g, 0.0)
    c = torch.where(torch.isfinite(c), c, 0.0)
    if torch.equal(g, c):
        return True, 1.0
    gd, cd = g - g.mean(), c - c.mean()
    sg, sc = float(gd.square().sum()), float(cd.square().sum())
    if sg == 0.0 or sc == 0.0:
        return False, 0.0
    r = float((gd * cd).sum()) / math.sqrt(sg * sc)
    r = max(-1.0, min(1.0, r))
    return r >= pcc, r


def pcc_value(golden, calculated, **kw) -> float:
    """Just the coefficient of :func:`comp_pcc`."""
    return comp_pcc(golden, calculated, **kw)[1]


def assert_with_pcc(golden, calculated, pcc: float = 0.999, **kw) -> Tuple[bool, float]:
    """Assert shapes match and ``comp_pcc`` passes; returns ``(True, value)``."""
    if tuple(golden.shape) != tuple(calculated.shape):
        raise AssertionError(f"shape mismatch: golden {tuple(golden.shape)} vs calculated {tuple(calculated.shape)}")
    ok, value = comp_pcc(golden, calculated, pcc, **kw)
    assert ok, f"PCC {value} < {pcc}"
    return ok, value


def comp_allclose(golden, calculated, rtol: float = 1e-05, atol: float = 1e-08) -> Tuple[bool, str]:
    """``torch.allclose`` (NaN == NaN) plus tt-metal's delta message:
    ``Max ATOL Delta: a, Max RTOL Delta: r`` with ``r = max(|g - c| / |c|)``."""
    g = golden if isinstance(golden, torch.Tensor) else torch.as_tensor(golden)
    c = calculated if isinstance(calculated, torch.Tensor) else torch.as_tensor(calculated)
    if c.dtype != g.dtype:
        c = c.to(g.dtype)
    diff = (g - c).abs()
    atol_delta = diff.max().item() if diff.numel() else 0.0
    rtol_delta = (diff / c.abs()).max().item() if diff.numel() else 0.0
    ok = torch.allclose(g, c, rtol=rtol, atol=atol, equal_nan=True)
    return ok, f"Max ATOL Delta: {atol_delta}, Max RTOL Delta: {rtol_delta}"
