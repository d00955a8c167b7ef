"""int32 host tensors packed from Python ints (model/host_ints.py)."""

import pytest
import torch

from model.host_ints import int32_tensor

EXTREMES = [0, 1, -1, 2**31 - 1, -(2**31), 255]


def test_values_and_rows_come_back_exactly():
    assert int32_tensor(EXTREMES).tolist() == EXTREMES
    assert int32_tensor(EXTREMES).dtype == torch.int32
    rows = [(1, 2, 3), (4, 5, 6)]
    t = int32_tensor(rows, rows=True)
    assert t.shape == (2, 3) and t.tolist() == [[1, 2, 3], [4, 5, 6]]
    assert int32_tensor([]).shape == (0,) and int32_tensor(iter([7])).tolist() == [7]


@pytest.mark.parametrize("v", [2**31, -(2**31) - 1])
def test_a_value_outside_int32_is_refused_as_torch_refuses_it(v):
    with pytest.raises(OverflowError):
        int32_tensor([0, v])
    with pytest.raises(RuntimeError, match="overflow"):
        torch.tensor([0, v], dtype=torch.int32)


def test_ragged_rows_are_named():
    with pytest.raises(ValueError, match="unequal length"):
        int32_tensor([(1, 2), (3,)], rows=True)


def test_two_tensors_never_share_memory():
    a, b = int32_tensor([1, 2]), int32_tensor([1, 2])
    a += 5
    assert b.tolist() == [1, 2]
