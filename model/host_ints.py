"""Small int32 host tensors from Python ints.

The serving path stages a handful of ints per step (tokens, positions, slots, page ids).
``torch.tensor`` walks a Python list element by element (6 us for 8 ints, 33 us for an
8 x 32 page table here; 14 to 20 us even for one int on a busy hour); packing them into an
``array`` and viewing its buffer is ~2 us (~5 us then).
"""

from __future__ import annotations

import functools
from array import array
from itertools import chain

import torch


def int32_bits(v: int) -> int:
    """The low 32 bits of ``v`` as a signed int32 (two's complement, as a static_cast does): a
    uint32 token staged as int32 wraps."""
    return ((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000


@functools.lru_cache(maxsize=4096)
def _row_bytes(row: tuple) -> bytes:
    """A row of ints packed as int32 (OverflowError for a value outside int32, as unpacked)."""
    return array("i", row).tobytes()


def int64_tensor(values) -> torch.Tensor:
    """``torch.tensor(values, dtype=torch.int64)`` for a flat sequence of ints: the same dtype,
    shape and values (OverflowError for a value outside int64)."""
    packed = array("q", values)
    if not packed:
        return torch.empty(0, dtype=torch.int64)
    return torch.frombuffer(packed, dtype=torch.int64)  # the tensor keeps the array alive


def int32_tensor(values, rows: bool = False) -> torch.Tensor:
    """A 1-D int32 tensor of ``values`` (or, with ``rows``, a 2-D one of equal-length rows).
    Every value must fit int32 (OverflowError otherwise, as ``torch.tensor`` raises)."""
    if rows:
        values = list(values)
        width = len(values[0]) if values else 0
        tuples = True
        for r in values:
            if len(r) != width:
                raise ValueError(f"int32_tensor: rows of unequal length {sorted({len(r) for r in values})}")
            tuples = tuples and type(r) is tuple
        if tuples and width:  # page-table rows repeat step after step: each packed once
            packed = bytearray(b"".join(map(_row_bytes, values)))
            return torch.frombuffer(packed, dtype=torch.int32).reshape(len(values), width)
        return int32_tensor(chain.from_iterable(values)).reshape(len(values), width)
    packed = array("i", values)
    if not packed:
        return torch.empty(0, dtype=torch.int32)
    return torch.frombuffer(packed, dtype=torch.int32)  # the tensor keeps the array alive
