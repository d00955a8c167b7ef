"""The one way a ttsim op runs: validate at the call, allocate outputs, enqueue the math.

An op's math sees, per chip, the LOGICAL values of its inputs as float32 (or int32 for
integer tensors) and returns logical results; this module pads and rounds them to the
output's storage format. Validation and allocation happen at the call (host side, like
ttnn); the math runs when the device reaches the command.
"""

from __future__ import annotations

import functools
from typing import Callable, Sequence

import torch

from .. import numerics
from ..device import MeshDevice, current_cq_id
from ..fabric import check_collective
from ..sharding import check_placement
from ..tensor import Tensor, _describe
from ..types import (
    BLOCK_FLOATS,
    DRAM_MEMORY_CONFIG,
    INTEGER_TYPES,
    DataType,
    Layout,
    MemoryConfig,
    TTFatal,
    tile_padded,
)


def require_device_tensor(op: str, name: str, t) -> Tensor:
    if not isinstance(t, Tensor):
        raise TTFatal(f"{op}: {name} must be a ttnn.Tensor, got {type(t).__name__}")
    t._live_buffers(f"{op}({name})")
    return t


def require_layout(op: str, name: str, t: Tensor, layout: Layout) -> None:
    if t._layout != layout:
        raise TTFatal(f"{op}: {name} must be in {layout!r}, got {_describe(t)}")


def require_same_device(op: str, tensors: dict[str, Tensor]) -> MeshDevice:
    items = list(tensors.items())
    first_name, first = items[0]
    for name, t in items[1:]:
        if t._device is not first._device:
            raise TTFatal(f"{op}: {name} is on {t._device!r} but {first_name} is on {first._device!r}")
        if len(t._buffers) != len(first._buffers):
            raise TTFatal(f"{op}: {name} spans {len(t._buffers)} chips but {first_name} spans {len(first._buffers)}")
    return first._device


def unpadded(data: torch.Tensor, t: Tensor) -> torch.Tensor:
    """One chip's storage of ``t`` without its tile padding, in the storage format."""
    x = data
    if not t._shape and x.dim():  # rank 0 in TILE: element [0, 0] of its one tile
        return x.reshape(-1)[0]
    if x.shape != t._shape:
        for dim, (have, want) in enumerate(zip(x.shape, t._shape)):
            if have != want:
                x = x.narrow(dim, 0, want)
    return x


def logical(data: torch.Tensor, t: Tensor) -> torch.Tensor:
    """The logical (unpadded) values of one chip's storage, float32 or int32."""
    x = unpadded(data, t)
    if t._dtype in INTEGER_TYPES:
        return x
    return x if x.dtype == torch.float32 else x.to(torch.float32)


def chip_stored(buf, t: Tensor) -> torch.Tensor:
    """:func:`unpadded` of what ``buf`` (one chip's storage of ``t``) holds now: the values of
    a bf16 tensor as bf16, for ops that only move values (see ``run_op``'s ``moves_values``)."""
    return unpadded(buf.chip.contents(buf), t)


def chip_logical(buf, t: Tensor) -> torch.Tensor:
    """:func:`logical` of what ``buf`` (one chip's storage of ``t``) holds now, converted once
    per write instead of once per op: a model's bf16 tables are read by every step.

    The memo is valid while the buffer holds the same data object at the same version
    (torch bumps ``_version`` on every in-place write: ``copy_``, indexed stores, a trace
    replay's in-place ops) and nobody wrote into the converted values themselves.
    Anything else (a new object from an op, a residue decode, trace corruption) misses."""
    data = buf.chip.contents(buf)
    memo = buf.__dict__.get("_logical")  # never made for an inference tensor (see below)
    if (memo is not None and memo[0] is data and memo[1] == data._version and memo[2] == t._shape
            and memo[3] == t._dtype and memo[4]._version == memo[5]):
        return memo[4]
    if data.is_inference():  # no version counter to invalidate by: convert every time
        return logical(data, t)
    x = logical(data, t)
    buf._logical = (data, data._version, t._shape, t._dtype, x, x._version)
    return x


#: output formats whose storage IS these torch values (numerics.quantize would at most copy
#: them; a bf16 value only has its NaNs canonicalised, see ``moves_values``)
_SAME_STORAGE = {DataType.FLOAT32: torch.float32, DataType.INT32: torch.int32, DataType.UINT32: torch.int32,
                 DataType.BFLOAT16: torch.bfloat16}


@functools.lru_cache(maxsize=None)
def _tile_pads(shape: tuple[int, ...]) -> tuple[int, ...] | None:
    """constant_pad_nd's pads (last dim first) from ``shape`` to its tile-padded shape, or None."""
    padded = tile_padded(shape)
    if shape == padded:
        return None
    pads: tuple[int, ...] = ()
    for have, want in zip(reversed(shape), reversed(padded)):
        pads += (0, want - have)
    return pads


def storage(x: torch.Tensor, dtype: DataType, layout: Layout, inputs: Sequence[torch.Tensor] = (),
            canonical: bool = False, tile=None) -> torch.Tensor:
    """Logical results -> storage form of the output (padded with zeros if TILE).

    The result is never ``x`` itself when ``x`` may be one of the math's ``inputs`` or a
    view: a buffer owns its data (another buffer's in-place write must not show here).
    ``canonical``: a bf16 ``x`` is known to hold no NaN but 0x7FC0 (values moved from
    canonical buffers, see :func:`canonical_bf16`), so its NaN canonicalisation is skipped:
    it would change no byte. ``tile``: a tile other than 32x32 (ttsim/tiles.py) the output is stored in."""
    if tile is not None and layout == Layout.TILE:
        from ..tensor import _storage_of

        return _storage_of(x.reshape(1, 1) if x.dim() == 0 else x, dtype, layout, 0.0, tile)
    if layout == Layout.TILE and x.dim() == 0:  # rank 0 is stored as element [0, 0] of one tile
        x = x.reshape(1, 1)
    pads = _tile_pads(tuple(x.shape)) if layout == Layout.TILE else None
    if dtype in BLOCK_FLOATS:  # a shared exponent spans 16 values of a face row: pad first
        if pads is not None:
            x = torch.constant_pad_nd(x, pads, 0)
        return numerics.quantize(x, dtype).contiguous()
    # elementwise formats: round the logical values, then pad (zero is exact in every format)
    if x.dtype == _SAME_STORAGE.get(dtype):  # f32 -> FLOAT32, int32 -> (U)INT32, bf16 -> BFLOAT16: no rounding
        if dtype == DataType.BFLOAT16 and not canonical:
            x = numerics.to_bfloat16(x)  # bf16 -> BFLOAT16: NaNs canonicalised, nothing else
        if pads is None and x._base is None and not _is_one_of(x, inputs):
            return x.contiguous()
        if pads is None:  # an input (or its memo, see chip_logical) or a view: copy
            return x.clone(memory_format=torch.contiguous_format)
    else:
        x = numerics.quantize(x, dtype)
    return x.contiguous() if pads is None else torch.constant_pad_nd(x, pads, 0)


def _is_one_of(x, items) -> bool:
    for a in items:
        if x is a:
            return True
    return False


def canonical_bf16(buf) -> bool:
    """Whether BFLOAT16 ``buf`` holds no NaN other than the canonical 0x7FC0 (every bf16 output
    of :func:`storage` is so; anything else is looked at once per data object and remembered).

    ``buf.canon`` names the data object the answer is about: a write that replaces the data
    (an op's output, a host write, a residue decode, trace corruption) makes it stale by
    itself, and the in-place writers (:func:`run_inplace`, a ``pool``) clear it."""
    data = buf.chip.contents(buf)
    if buf.canon is data:
        return True
    if numerics.has_nan(data):  # conservative: a buffer holding any NaN is never marked
        return False
    buf.canon = data
    return True


def broadcast_shapes(*shapes) -> tuple[int, ...] | None:
    """torch's broadcasting rule (trailing dims align; each dim equal across shapes or 1), or
    None when the shapes do not broadcast. Written out: ``torch.broadcast_shapes`` is
    Python-level and costs more than a small op."""
    shapes = [tuple(s) for s in shapes]
    if all(s == shapes[0] for s in shapes):
        return shapes[0]
    n = max(len(s) for s in shapes)
    out = [1] * n
    for s in shapes:
        for i, d in enumerate(s, n - len(s)):
            if d != out[i] and d != 1:
                if out[i] != 1:
                    return None
                out[i] = d
    return tuple(out)


#: the ops that take a tensor stored in tiles other than 32x32 and keep its tile (placement and
#: dtype changes); every other op refuses such an input (see :func:`_check_tiles`)
TILE_KEEPING = frozenset({"to_memory_config", "interleaved_to_sharded", "sharded_to_interleaved", "typecast",
                          "to_layout"})


def _check_tiles(op: str, inputs) -> None:
    """ttsim models tiles other than 32x32 (ttsim/tiles.py) through the host conversions and the
    placement / dtype ops of :data:`TILE_KEEPING`; any other op refuses them rather than guess
    which tile its output would have on a card."""
    if op in TILE_KEEPING:
        return
    for t in inputs:
        tile = getattr(t, "_tile", None)
        if tile is not None:
            raise TTFatal(f"{op}: an input is stored in {tile!r} tiles (transposed={tile.transpose_tile}); ttsim "
                          f"models tiles other than 32x32 only through from_torch/to_torch, to_device/from_device "
                          f"and {sorted(TILE_KEEPING)}")


def _allocate_output(op, first: Tensor, out_shape, out_dtype, out_layout, memory_config, cq_id, tile=None) -> Tensor:
    """The output tensor, allocated (host side, at the call) on the chips of the first input."""
    if out_dtype in BLOCK_FLOATS and out_layout != Layout.TILE:
        raise TTFatal(f"{op}: output dtype {out_dtype!r} requires TILE_LAYOUT")
    device = first._device
    device.check_cq(cq_id, op)
    mc = memory_config or first._memory_config or DRAM_MEMORY_CONFIG
    check_placement(op, out_shape, out_layout, mc)
    out = Tensor._make(tuple(out_shape), out_dtype, out_layout, device=device, memory_config=mc, tile=tile)
    chips = [b.chip for b in first._buffers]
    out._buffers = device.allocate(mc.buffer_type, out_dtype, out_layout, out._padded, op, chips=chips)
    return out


def take_output(op: str, output_tensor, out_shape, out_dtype: DataType, out_layout: Layout, first: Tensor,
                dtype_given: bool, name: str = "output_tensor") -> DataType:
    """Validate a caller-provided output tensor at the call (as ttnn does) and return the
    dtype the op writes: the output tensor's own (an explicit ``dtype`` must agree with it)."""
    out = require_device_tensor(op, name, output_tensor)
    if out._device is not first._device or len(out._buffers) != len(first._buffers):
        raise TTFatal(f"{op}: {name} is on {out._device!r}, the inputs on {first._device!r}")
    if tuple(out._shape) != tuple(out_shape):
        raise TTFatal(f"{op}: {name} has shape {list(out._shape)}, the result has {list(out_shape)}")
    if out._layout != out_layout:
        raise TTFatal(f"{op}: {name} is in {out._layout!r}, the result is in {out_layout!r}")
    if dtype_given and out._dtype != out_dtype:
        raise TTFatal(f"{op}: dtype={out_dtype!r} and {name} dtype {out._dtype!r} disagree")
    return out._dtype


def run_op(
    op: str,
    inputs: Sequence[Tensor],
    out_shape: Sequence[int],
    out_dtype: DataType,
    out_layout: Layout,
    math: Callable[..., torch.Tensor],
    *,
    memory_config: MemoryConfig | None = None,
    cq_id: int | None = None,
    chip_args: Callable[[int], tuple] | None = None,
    reads_output: bool = False,
    pool: Tensor | None = None,
    output_tensor: Tensor | None = None,
    moves_values: bool = False,
    program_key: tuple = (),
    tile=None,
) -> Tensor:
    """Allocate the output and enqueue ``math(*logical_inputs, *extras)`` per chip i.

    ``moves_values``: ``math`` only moves values (a gather, a reshape, a layout change), so it
    sees its inputs as stored (bf16 as bf16) instead of widened to float32. Widening and
    rounding back is the identity on every non-NaN bf16 value, and storing the result
    canonicalises NaNs as that rounding does; a float32 or block-float output widens the
    moved values exactly as it would have widened the inputs.

    Extras, in order: ``chip_args(i)``; with ``reads_output`` the output's current logical
    contents (what its memory holds: ops that skip rows leave them as they were); with
    ``pool`` that tensor's storage on chip i, which ``math`` may update in place.
    With ``output_tensor`` (validated by :func:`take_output`) the result is written into it.
    ``program_key``: attributes the op's program cache entry is keyed on besides tensor specs.
    ``tile``: the output's tile when it is not 32x32 (the ops of :data:`TILE_KEEPING`).
    """
    _check_tiles(op, inputs)
    cq_id = current_cq_id(cq_id)
    if output_tensor is not None:
        output_tensor._device.check_cq(cq_id, op)
        out = output_tensor
    else:
        out = _allocate_output(op, inputs[0], out_shape, out_dtype, out_layout, memory_config, cq_id, tile)
    out_tile = out._tile
    device = out._device
    in_bufs = [t._buffers for t in inputs]
    out_bufs = out._buffers

    pool_bufs = pool._buffers if pool is not None else None
    read = chip_stored if moves_values else chip_logical
    bf16_out = out_dtype == DataType.BFLOAT16
    # a value-moving op whose every float input is bf16 moves only stored bf16 values (and
    # zeros): when those are canonical, so is the result (its NaN check is skipped, see storage)
    moved_bf16 = (moves_values and bf16_out and not reads_output and pool is None
                  and all(t._dtype == DataType.BFLOAT16 or t._dtype in INTEGER_TYPES for t in inputs))
    bf16_in = [k for k, t in enumerate(inputs) if t._dtype == DataType.BFLOAT16] if moved_bf16 else []

    def execute():
        for i, ob in enumerate(out_bufs):
            args = [read(bufs[i], t) for bufs, t in zip(in_bufs, inputs)]
            if chip_args is not None:
                args.extend(chip_args(i))
            if reads_output:
                args.append(chip_logical(ob, out))
            if pool_bufs is not None:
                pb = pool_bufs[i]
                pb.canon = None  # math may write the pool in place
                args.append(pb.chip.contents(pb))
            canon = moved_bf16
            for k in bf16_in:  # (the reads above made every input's data)
                b = in_bufs[k][i]
                if b.canon is not b.data and not canonical_bf16(b):
                    canon = False
                    break
            ob.data = data = storage(math(*args), out_dtype, out_layout, args, canon, out_tile)
            if bf16_out:  # storage canonicalises every bf16 result
                ob.canon = data

    writes = out_bufs + (pool_bufs or [])
    device.program_cache.dispatch(op, inputs, [out], program_key)
    device.enqueue(cq_id, op, execute, writes=writes)
    return out


def run_inplace(op: str, target: Tensor, inputs: Sequence[Tensor], update: Callable[..., None], *,
                cq_id: int | None = None) -> None:
    """Enqueue ``update(target_storage, *logical_inputs, chip_index)`` mutating ``target`` in place."""
    _check_tiles(op, [target, *inputs])
    device = target._device
    cq_id = current_cq_id(cq_id)
    device.check_cq(cq_id, op)
    tgt_bufs = target._buffers
    in_bufs = [t._buffers for t in inputs]

    def execute():
        for i, tb in enumerate(tgt_bufs):
            args = [chip_logical(bufs[i], t) for bufs, t in zip(in_bufs, inputs)]
            tb.canon = None  # written in place: no longer known canonical
            update(tb.chip.contents(tb), *args, i)

    device.program_cache.dispatch(op, list(inputs), [target])
    device.enqueue(cq_id, op, execute, writes=tgt_bufs)


def run_collective(
    op: str,
    inputs: Sequence[Tensor],
    out_shape: Sequence[int],
    out_dtype: DataType,
    out_layout: Layout,
    math: Callable[..., list[torch.Tensor]],
    *,
    memory_config: MemoryConfig | None = None,
    cq_id: int | None = None,
) -> Tensor:
    """Allocate the output on every chip and enqueue ONE command that sees all chips at once.

    ``math(*per_input)`` gets, for each input tensor, the list of its per-chip logical values
    (chip order = the tensor's buffer order) and returns one logical result per chip.
    """
    check_collective(inputs[0]._device, op)
    _check_tiles(op, inputs)
    cq_id = current_cq_id(cq_id)
    out = _allocate_output(op, inputs[0], out_shape, out_dtype, out_layout, memory_config, cq_id)
    device = out._device
    in_bufs = [t._buffers for t in inputs]
    out_bufs = out._buffers

    def execute():
        per_input = [[chip_logical(b, t) for b in bufs] for bufs, t in zip(in_bufs, inputs)]
        results = math(*per_input)
        if len(results) != len(out_bufs):
            raise TTFatal(f"{op}: collective produced {len(results)} shards for {len(out_bufs)} chips")
        flat = [x for xs in per_input for x in xs]
        for ob, r in zip(out_bufs, results):
            ob.data = storage(r, out_dtype, out_layout, flat)

    device.program_cache.dispatch(op, inputs, [out])
    device.enqueue(cq_id, op, execute, writes=out_bufs)
    return out
