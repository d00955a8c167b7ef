"""Host-side numerics of ttnn's storage formats, bit for bit.

Storage form: a device or host buffer keeps its values as a torch tensor of the padded
shape holding exactly the values the format can represent (bf16 as torch.bfloat16,
block floats as float32 already quantised, integers as int32 bit patterns). The byte
image of a buffer, which is what "uninitialized" memory shows, is derived on demand by
:func:`encode` and read back by :func:`decode`.

Block floats (bfloat8_b / bfloat4_b) follow tt-metal's packer: one shared exponent per
16 consecutive values of a 16x16 face row (the max biased exponent of the 16, inf/NaN
included), each mantissa with its hidden bit shifted right by (shared - own exponent)
with truncation, then rounded to 7 (bfp8) or 3 (bfp4) bits, ties to even, saturating; a
zero mantissa drops its sign. Zeros and float32 subnormals have exponent 0: they never
raise the shared exponent and flush to +0. Checked bit for bit against the real package
by tests/ttsim/test_conformance.py.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from .types import (
    BLOCK_FLOATS,
    ELEMENT_SIZE,
    FACE_SIZE,
    TILE_SIZE,
    DataType,
    Layout,
)

_MANTISSA_BITS = {DataType.BFLOAT8_B: 7, DataType.BFLOAT4_B: 3}

TORCH_STORAGE = {
    DataType.BFLOAT16: torch.bfloat16,
    DataType.FLOAT32: torch.float32,
    DataType.BFLOAT8_B: torch.float32,
    DataType.BFLOAT4_B: torch.float32,
    DataType.UINT32: torch.int32,
    DataType.INT32: torch.int32,
    DataType.UINT16: torch.uint16,
    DataType.UINT8: torch.uint8,
}
_SMALL_UNSIGNED = {DataType.UINT16: 16, DataType.UINT8: 8}


def _bits(x: torch.Tensor) -> torch.Tensor:
    """float32 bit patterns as int64 in [0, 2**32)."""
    return x.contiguous().to(torch.float32).view(torch.int32).to(torch.int64) & 0xFFFFFFFF


def _from_bits(bits: torch.Tensor) -> torch.Tensor:
    b = bits & 0xFFFFFFFF
    b = torch.where(b >= 2**31, b - 2**32, b)
    return b.to(torch.int32).view(torch.float32)


def bfp_pack(x: torch.Tensor, dtype: DataType) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantise float data to a block float: (shared exponents, sign|mantissa codes).

    ``x`` has a last dim that is a multiple of 16; groups are 16 consecutive values of
    that dim (a face row when the data is tile-padded). Returns exps ``[..., W/16]`` and
    codes ``[..., W/16, 16]``, both int64.

    As ttnn 0.81.1's host packer (bit-exact against conformance/dump_ttnn.py's reference
    model): shared = the block's largest biased exponent, inf/NaN (255) included; float32
    subnormals (exponent 0) flush to 0; each 24-bit mantissa is shifted right (truncating) by
    ``shared - exp``, then rounded to nearest-even on its low ``24 - width`` bits, saturating
    at ``2**width - 1`` without an exponent carry; a zero code drops its sign.
    """
    width = _MANTISSA_BITS[dtype]
    shift = 24 - width
    max_val = (1 << width) - 1
    bits = _bits(x).reshape(*x.shape[:-1], x.shape[-1] // FACE_SIZE, FACE_SIZE)
    exp = (bits >> 23) & 0xFF
    shared = exp.amax(dim=-1)
    mant = torch.where(exp == 0, torch.zeros_like(bits), (bits & 0x7FFFFF) | (1 << 23))
    diff = shared.unsqueeze(-1) - exp
    mant = torch.where(diff >= 32, torch.zeros_like(mant), mant >> diff.clamp(max=31))
    rnd = mant & ((1 << shift) - 1)
    mant = mant >> shift
    tie = 1 << (shift - 1)
    mant = mant + ((rnd > tie) | ((rnd == tie) & ((mant & 1) == 1))).to(torch.int64)
    mant = mant.clamp(max=max_val)
    sign = torch.where(mant == 0, torch.zeros_like(bits), (bits >> 31) & 1)
    return shared, (sign << width) | mant


def bfp_unpack(shared: torch.Tensor, codes: torch.Tensor, dtype: DataType) -> torch.Tensor:
    """Inverse of :func:`bfp_pack`, float32 ``[..., W]``.

    A code decodes to ``±q * 2**(shared - 127 - (width - 1))`` (float32, so tiny results
    become subnormal or 0). With shared exponent 255, a ``q`` with its leading bit set is
    inf (fraction 0) or a NaN keeping the sign and the stored fraction bits.
    """
    width = _MANTISSA_BITS[dtype]
    sign = (codes >> width) & 1
    q = codes & ((1 << width) - 1)
    scale = torch.exp2((shared.unsqueeze(-1) - 127 - (width - 1)).to(torch.float64))
    val = (q.to(torch.float64) * scale).to(torch.float32)
    bits = _bits(val) | (sign << 31)
    top = 1 << (width - 1)
    special = (sign << 31) | 0x7F800000 | ((q & (top - 1)) << (24 - width))
    bits = torch.where((shared.unsqueeze(-1) == 255) & (q >= top), special, bits)
    out = _from_bits(bits)
    return out.reshape(*codes.shape[:-2], codes.shape[-2] * codes.shape[-1])


_BF16_NAN = torch.tensor(0x7FC0, dtype=torch.int16).view(torch.bfloat16)


def to_bfloat16(x: torch.Tensor) -> torch.Tensor:
    """float -> bfloat16 as ttnn's host conversion: round to nearest even; any NaN -> 0x7FC0."""
    y = x if x.dtype == torch.bfloat16 else x.to(torch.bfloat16)  # (``to`` would return x itself)
    # a NaN anywhere makes the sum NaN (so does inf + -inf: then the exact check decides);
    # one reduction instead of a mask and a reduction on every conversion
    if x.is_floating_point() and _is_nan(float(x.sum())):  # (an empty sum is 0.0)
        nan = torch.isnan(x)
        if bool(nan.any()):  # torch's vectorised paths may keep the sign or give 0xFFFF
            y = torch.where(nan, _BF16_NAN, y)
    return y


def _is_nan(v: float) -> bool:
    return v != v


def has_nan(x: torch.Tensor) -> bool:
    """Whether a floating tensor holds a NaN (the one-reduction test of :func:`to_bfloat16`)."""
    if not _is_nan(float(x.sum())):  # no NaN (an inf + -inf sum is NaN too: then look exactly)
        return False
    return bool(torch.isnan(x).any())


#: elements per chunk of a block-float conversion: bfp_pack/unpack need ~70 bytes of int64 and
#: float64 temporaries per element, so converting chunk by chunk bounds them to a few MB and
#: the whole conversion needs only its float32 output (bench/bench_bfp_memory.py measures it)
BFP_CHUNK_ELEMENTS = 1 << 16


def _bfp_quantize(x: torch.Tensor, dtype: DataType) -> torch.Tensor:
    width = x.shape[-1] if x.dim() else 1
    flat = x.reshape(-1, width)
    out = torch.empty(flat.shape, dtype=torch.float32)
    rows = max(1, BFP_CHUNK_ELEMENTS // max(width, 1))
    # One intra-op thread: a chunk is ~30 small elementwise ops, and on a busy box every OpenMP
    # barrier waits for a descheduled thread (the same reason as ttsim/kernels/attention.py).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for i in range(0, flat.shape[0], rows):
            shared, codes = bfp_pack(flat[i:i + rows].to(torch.float32), dtype)
            out[i:i + rows] = bfp_unpack(shared, codes, dtype)
            del shared, codes
    finally:
        torch.set_num_threads(threads)
    return out.reshape(x.shape)


#: float -> int32 conversions of up to this many values check their range in Python (decode
#: positions), not with aminmax: the same answer for every value, NaN and inf included
SMALL_RANGE_CHECK = 64


def quantize(x: torch.Tensor, dtype: DataType) -> torch.Tensor:
    """Round float/int data to what ``dtype`` stores, in its storage form."""
    if dtype == DataType.BFLOAT16:
        return to_bfloat16(x)
    if dtype == DataType.FLOAT32:
        return x.to(torch.float32)
    if dtype in BLOCK_FLOATS:
        return _bfp_quantize(x, dtype)
    if dtype in (DataType.UINT32, DataType.INT32):
        # int32 bit patterns are already stored; int64 -> int32 keeps the low 32 bits (two's
        # complement wrap, checked against the explicit wrap below by tests/ttsim/test_numerics.py)
        if x.dtype == torch.int32:
            return x.clone()
        if x.dtype == torch.int64:
            return x.to(torch.int32)
        n = x.numel() if x.is_floating_point() else 0
        if 0 < n <= SMALL_RANGE_CHECK:  # a few values: compared as Python floats (exact), NaN fails
            if all(-(2**31) <= v < 2**31 for v in x.reshape(-1).tolist()):
                return x.to(torch.int32)
        elif n:
            lo, hi = torch.aminmax(x)  # a NaN makes both NaN: the comparison fails
            if -(2**31) <= float(lo) and float(hi) < 2**31:  # no wrap: the cast truncates toward zero
                return x.to(torch.int32)
        v = (x.to(torch.float64).trunc() if x.is_floating_point() else x).to(torch.int64)
        v = v & 0xFFFFFFFF  # two's complement wrap, as a static_cast to 32 bits does
        return torch.where(v >= 2**31, v - 2**32, v).to(torch.int32)
    if dtype in _SMALL_UNSIGNED:
        bits = _SMALL_UNSIGNED[dtype]
        if x.is_floating_point():  # ttnn's host float conversion truncates and clamps
            v = x.to(torch.float64).trunc().clamp(0, 2**bits - 1).to(torch.int64)
        else:  # integers wrap, as ttnn 0.81.1 measured: int64 70000 -> uint16 4464, -3 -> 65533
            v = x.to(torch.int64) & (2**bits - 1)
        return v.to(TORCH_STORAGE[dtype])
    raise NotImplementedError(f"ttsim does not model dtype {dtype!r}")


# -- byte images -----------------------------------------------------------------

def _to_tiles(x: torch.Tensor) -> torch.Tensor:
    """[..., H, W] (multiples of 32) -> [n_tiles, 4 faces, 16, 16] in device order."""
    h, w = x.shape[-2], x.shape[-1]
    t = x.reshape(-1, h // TILE_SIZE, 2, FACE_SIZE, w // TILE_SIZE, 2, FACE_SIZE)
    return t.permute(0, 1, 4, 2, 5, 3, 6).reshape(-1, 4, FACE_SIZE, FACE_SIZE)


def _from_tiles(tiles: torch.Tensor, padded: tuple[int, ...]) -> torch.Tensor:
    h, w = padded[-2], padded[-1]
    t = tiles.reshape(-1, h // TILE_SIZE, w // TILE_SIZE, 2, 2, FACE_SIZE, FACE_SIZE)
    return t.permute(0, 1, 3, 5, 2, 4, 6).reshape(padded)


def physical_2d(padded: tuple[int, ...]) -> tuple[int, ...]:
    """Rank-1 data is one row: give it a height so tiling has two dims."""
    return padded if len(padded) >= 2 else (1, *padded)


def encode(data: torch.Tensor, dtype: DataType, layout: Layout, copy: bool = True) -> np.ndarray:
    """The byte image a device buffer holding ``data`` (storage form) has in DRAM.

    ``copy=False``: the caller only reads the image, and before ``data`` can change, so the
    image may share memory with ``data`` (or with a temporary of the conversion)."""
    if layout == Layout.ROW_MAJOR:
        img = data.contiguous().view(torch.uint8).reshape(-1).numpy()
    elif dtype in BLOCK_FLOATS:
        tiles = _to_tiles(data.reshape(physical_2d(tuple(data.shape))).to(torch.float32))  # [n, 4, 16, 16]
        shared, codes = bfp_pack(tiles, dtype)  # [n,4,16], [n,4,16,1,16]
        exps = shared.reshape(-1, 64).to(torch.uint8)
        codes = codes.reshape(-1, 1024)
        if dtype == DataType.BFLOAT4_B:
            codes = codes[:, 0::2] | (codes[:, 1::2] << 4)
        img = torch.cat([exps, codes.to(torch.uint8)], dim=1).reshape(-1).numpy()
    else:
        tiles = _to_tiles(data.reshape(physical_2d(tuple(data.shape))))
        img = tiles.contiguous().view(torch.uint8).reshape(-1).numpy()
    return img.copy() if copy else img


def decode(raw: np.ndarray, dtype: DataType, layout: Layout, padded: tuple[int, ...],
           owned: bool = False) -> torch.Tensor:
    """Storage-form data of shape ``padded`` read from the byte image ``raw``.

    The result never shares memory with ``raw``, unless ``owned``: ``raw`` is the caller's
    own array, which nothing else holds or writes, so the result may keep it."""
    raw_t = torch.from_numpy(np.ascontiguousarray(raw, dtype=np.uint8))
    tdtype = TORCH_STORAGE[dtype]
    if layout == Layout.ROW_MAJOR:
        x = raw_t.view(tdtype).reshape(padded)
        return x if owned else x.clone()
    phys = physical_2d(padded)
    if dtype in BLOCK_FLOATS:
        per_tile = 64 + (1024 if dtype == DataType.BFLOAT8_B else 512)
        t = raw_t.reshape(-1, per_tile).to(torch.int64)
        exps = t[:, :64].reshape(-1, 4, FACE_SIZE, 1)
        body = t[:, 64:]
        if dtype == DataType.BFLOAT4_B:
            body = torch.stack([body & 0xF, body >> 4], dim=-1).reshape(-1, 1024)
        codes = body.reshape(-1, 4, FACE_SIZE, 1, FACE_SIZE)
        values = bfp_unpack(exps, codes, dtype).reshape(-1, 4, FACE_SIZE, FACE_SIZE)
        return _from_tiles(values, phys).reshape(padded).clone()
    tiles = raw_t.view(tdtype).reshape(-1, 4, FACE_SIZE, FACE_SIZE)
    x = _from_tiles(tiles, phys).reshape(padded)
    return x if owned else x.clone()


@functools.lru_cache(maxsize=4096)  # every allocation asks; a model uses a few hundred specs
def nbytes(dtype: DataType, layout: Layout, padded: tuple[int, ...]) -> int:
    """Size in bytes of a buffer of ``padded`` shape."""
    from .types import TILE_BYTES

    volume = 1
    for d in physical_2d(padded):
        volume *= d
    if layout == Layout.TILE:
        return volume // (TILE_SIZE * TILE_SIZE) * TILE_BYTES[dtype]
    return volume * ELEMENT_SIZE[dtype]
