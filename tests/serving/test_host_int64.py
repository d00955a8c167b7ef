"""int64 host tensors packed from Python ints (model/host_ints.int64_tensor): what the runner
hands the generator instead of ``torch.tensor(values, dtype=torch.int64)``, so it must be
that tensor exactly (dtype, shape, values, strides), from any iterable of ints."""

import numpy as np
import pytest
import torch

from model.host_ints import int64_tensor

EXTREMES = [0, 1, -1, 2**31 - 1, -(2**31), 2**31, 2**63 - 1, -(2**63), 255]


def _same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.dtype == b.dtype == torch.int64
    assert a.shape == b.shape and a.stride() == b.stride()
    assert torch.equal(a, b) and a.tolist() == b.tolist()


@pytest.mark.parametrize("values", [EXTREMES, [7], [], list(range(128)), (3, 1, 2)])
def test_it_is_torch_tensor_int64_bit_for_bit(values):
    _same(int64_tensor(values), torch.tensor(list(values), dtype=torch.int64))
    # the runner's 2-D shapes: one prompt row, one token per decode row
    n = len(values)
    _same(int64_tensor(values).reshape(1, n), torch.tensor([list(values)], dtype=torch.int64))
    _same(int64_tensor(values).reshape(-1, 1), torch.tensor(list(values), dtype=torch.int64).reshape(-1, 1))


def test_numpy_ints_iterators_and_zero_dim_tensors_are_ints():
    assert int64_tensor(iter([5, 6])).tolist() == [5, 6]
    assert int64_tensor([np.int32(-3), np.int64(2**40)]).tolist() == [-3, 2**40]
    assert int64_tensor([torch.tensor(9)]).tolist() == [9]


@pytest.mark.parametrize("v", [2**63, -(2**63) - 1])
def test_a_value_outside_int64_is_refused(v):
    with pytest.raises(OverflowError):
        int64_tensor([0, v])


def test_two_tensors_never_share_memory_and_are_writable():
    a, b = int64_tensor([1, 2]), int64_tensor([1, 2])
    a += 5
    assert b.tolist() == [1, 2] and a.tolist() == [6, 7]
    e = int64_tensor([])
    assert e.shape == (0,) and e.dtype == torch.int64


# -- int32 page-table rows, packed once per distinct row ----------------------------------------

def test_tuple_rows_pack_as_the_chained_rows_do():
    from model.host_ints import int32_tensor

    rows = [tuple(range(i, i + 32)) for i in range(8)] + [(0,) * 32, (2**31 - 1,) * 16 + (-(2**31),) * 16]
    for chosen in (rows, rows[:1], rows[::-1], [rows[0]] * 3):
        got = int32_tensor(chosen, rows=True)
        want = torch.tensor([list(r) for r in chosen], dtype=torch.int32)
        assert got.dtype == torch.int32 and got.shape == want.shape and got.stride() == want.stride()
        assert torch.equal(got, want)
        lists = int32_tensor([list(r) for r in chosen], rows=True)  # the chained path
        assert torch.equal(lists, want)


def test_tuple_rows_are_checked_and_never_share_memory():
    from model.host_ints import int32_tensor

    with pytest.raises(OverflowError):
        int32_tensor([(1, 2**31)], rows=True)
    with pytest.raises(ValueError, match="unequal length"):
        int32_tensor([(1, 2), (3,)], rows=True)
    a = int32_tensor([(1, 2), (3, 4)], rows=True)
    b = int32_tensor([(1, 2), (3, 4)], rows=True)
    a += 10
    assert b.tolist() == [[1, 2], [3, 4]] and a.tolist() == [[11, 12], [13, 14]]
    assert int32_tensor([(), ()], rows=True).shape == (2, 0)
    assert int32_tensor([], rows=True).shape == (0, 0)
