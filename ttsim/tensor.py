"""ttnn.Tensor and the host/device data movement API."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from . import numerics, tiles
from .device import Command, MeshDevice, current_cq_id
from .memory import Buffer
from .numerics import TORCH_STORAGE
from .seed import derive, junk_bytes
from .sharding import check_placement
from .types import (
    BLOCK_FLOATS,
    DRAM_MEMORY_CONFIG,
    INTEGER_TYPES,
    DataType,
    Layout,
    MemoryConfig,
    TILE_SIZE,
    Shape,
    TTFatal,
    reported_padded_shape,
    tile_padded,
)

#: dtype inference of ttnn 0.81.1's host constructor (measured with numpy inputs: int16 -> UINT16,
#: int64 -> UINT32, bool -> UINT8; float64 crashes the real one, so ttsim refuses it)
_FROM_TORCH_DTYPE = {
    torch.bfloat16: DataType.BFLOAT16,
    torch.float32: DataType.FLOAT32,
    torch.int32: DataType.INT32,
    torch.uint8: DataType.UINT8,
    torch.bool: DataType.UINT8,
    torch.uint16: DataType.UINT16,
    torch.int16: DataType.UINT16,
    torch.uint32: DataType.UINT32,
    torch.int64: DataType.UINT32,
}


def check_layout_change(tensor: "Tensor", layout, dtype) -> DataType:
    """A layout change ttnn allows (to_layout, Tensor.to(layout)); returns the dtype it keeps."""
    if not isinstance(layout, Layout) or layout == Layout.INVALID:
        raise TTFatal(f"to_layout: layout must be ROW_MAJOR_LAYOUT or TILE_LAYOUT, got {layout!r}")
    dtype = tensor._dtype if dtype is None else dtype
    if dtype in BLOCK_FLOATS and layout != Layout.TILE:
        raise TTFatal(f"to_layout: {dtype!r} requires TILE_LAYOUT; typecast to bfloat16 first")
    return dtype


def host_block_float_to_row_major(tensor: "Tensor") -> "Tensor":
    """ROW_MAJOR of a host bfloat8_b/bfloat4_b tensor, as 0.81.1's host to_layout does it (measured):
    a block float has no row-major form, so a tensor that fills its tiles comes back as it is
    (still TILE, same dtype and values) and one with tile padding fails where the host unpads."""
    if tuple(reported_padded_shape(tuple(tensor._shape))) != tuple(tensor._shape):
        raise TTFatal(f"to_layout: Tensor layout must be ROW_MAJOR for unpadding ({_describe(tensor)} has tile "
                      f"padding; typecast to bfloat16 first)")
    return tensor


def host_to_layout(tensor: "Tensor", layout, dtype, pad_value: float) -> "Tensor":
    """A host tensor's storage in another layout (tile padding filled with ``pad_value``; a new
    TILE form is in 32x32 tiles). Unpadding a tensor stored in other tiles needs its padded last two
    dims to be multiples of 32 (0.81.1's host unpad_from_tile, measured)."""
    tensor._await_read()
    if tensor._tile is not None and layout == Layout.ROW_MAJOR:
        padded = tensor.padded_shape
        if padded[-2] % TILE_SIZE or padded[-1] % TILE_SIZE:
            raise TTFatal("Last 2 dims of input shape must be multiples of 32")
    host = [_storage_of(_unpad(h, tensor._shape), dtype, layout, float(pad_value)) for h in tensor._host]
    return Tensor._make(tensor._shape, dtype, layout, host=host)


def _describe(t: "Tensor") -> str:
    where = "host" if t._device is None else repr(t._device)
    return f"Tensor(shape={list(t._shape)}, dtype={t._dtype!r}, layout={t._layout!r}, on {where})"



@functools.lru_cache(maxsize=4096)
def _tile_padded_of(shape: tuple) -> Shape:
    return Shape(tile_padded(shape))


def _tile_padded_shape(shape: Shape) -> Shape:
    """Storage shape of a TILE tensor of logical ``shape`` (Shapes are immutable: shared safely;
    cached by a plain tuple, whose key comparison needs no Python-level Shape.__eq__)."""
    return _tile_padded_of(tuple(shape))

class Tensor:
    """A host tensor (per-chip shards as torch tensors) or a device tensor (buffers).

    The constructor is ttnn's: ``Tensor(tensor_like, data_type=None, device=None, layout=None,
    mem_config=None, ...)`` (a torch tensor or numpy array, as ``from_torch``), the data
    overloads ``Tensor(data, shape, data_type, layout[, device[, memory_config]][, tile,
    pad_value])`` (a flat list of floats or ints), and ``Tensor(other_tensor)`` (a copy).
    ttsim's own code builds tensors with :meth:`_make`.
    """

    def __init__(self, tensor, data_type=None, device=None, layout=None, mem_config=None, tile=None, cq_id=None,
                 pad_value=None, mesh_mapper=None, preserve_nan_values=False, col_tilize=False,
                 enable_bfloat_opt=False):
        if isinstance(tensor, Tensor):  # Tensor(arg: Tensor): a copy of a host tensor / a new view
            if data_type is not None or device is not None:
                raise TTFatal("Tensor(tensor): the copy constructor takes only the tensor")
            src = tensor
        elif isinstance(tensor, (list, tuple)) and isinstance(data_type, (list, tuple, Shape)):
            src = _from_data("Tensor", tensor, data_type, device, layout, mem_config, tile, cq_id, pad_value)
        else:
            if not isinstance(tensor, torch.Tensor):
                try:
                    import numpy as np

                    if isinstance(tensor, np.ndarray):
                        tensor = torch.from_numpy(np.ascontiguousarray(tensor))
                except ImportError:  # pragma: no cover - numpy ships with torch
                    pass
            if not isinstance(tensor, torch.Tensor):
                raise TTFatal(
                    f"Tensor: expected a torch tensor / numpy array, a flat data list with a shape, or a Tensor; "
                    f"got {type(tensor).__name__}")
            if layout is None and data_type in BLOCK_FLOATS:  # the host constructor's default (measured)
                layout = Layout.TILE
            src = from_torch(tensor, data_type, tile=tile, pad_value=pad_value, layout=layout, device=device,
                             memory_config=mem_config, mesh_mapper=mesh_mapper, cq_id=cq_id,
                             preserve_nan_values=preserve_nan_values, col_tilize=col_tilize,
                             enable_bfloat_opt=enable_bfloat_opt)
        self.__dict__.update(src.__dict__)
        if src is tensor and self._host is not None:
            self._host = [h.clone() for h in self._host]

    @classmethod
    def _make(cls, shape, dtype: DataType, layout: Layout, *, host=None, device=None, buffers=None,
              memory_config: MemoryConfig | None = None, tile=None) -> "Tensor":
        self = object.__new__(cls)
        self._shape = shape if type(shape) is Shape else Shape(shape)
        self._dtype = dtype
        self._layout = layout
        # a TILE tensor's tile when it is not the plain 32x32 (ttsim/tiles.py): its storage padding
        self._tile = tile if layout == Layout.TILE and not tiles.is_standard(tile) else None
        if self._tile is not None:
            self._padded = Shape(tile_padded(tuple(self._shape), tiles.hw(self._tile)))
        else:
            self._padded = _tile_padded_shape(self._shape) if layout == Layout.TILE else self._shape
        self._host_shards: list[torch.Tensor] | None = host
        self._host_fill = None  # makes the seeded junk of a fresh host buffer when first looked at
        self._device: MeshDevice | None = device
        self._buffers: list[Buffer] | None = buffers
        self._memory_config = memory_config
        self._pending: Command | None = None  # a non-blocking read still filling this host tensor
        return self

    def _await_read(self) -> None:
        """Let a non-blocking read still filling this host tensor land (ops read it whole)."""
        if self._pending is not None and not self._pending.done:
            self._pending.device.wait_command(self._pending)

    # -- properties ttnn exposes -----------------------------------------------------
    @property
    def shape(self) -> Shape:
        return self._shape

    @property
    def padded_shape(self) -> Shape:
        """As ttnn reports it (rank 1 reports rank 2); ttsim's storage keeps ``_padded``.
        ``tilize_with_val_padding`` may report a larger padded shape than it stores."""
        if self._layout != Layout.TILE:
            return self._padded
        return self.__dict__.get("_padded_report") or Shape(reported_padded_shape(self._shape, tiles.hw(self._tile)))

    @property
    def dtype(self) -> DataType:
        return self._dtype

    @property
    def tile(self):
        """The tile the tensor is stored in (a ROW_MAJOR tensor reports 32x32, as 0.81.1)."""
        return self._tile or tiles.STANDARD

    @property
    def layout(self) -> Layout:
        return self._layout

    def get_dtype(self) -> DataType:
        return self._dtype

    def get_layout(self) -> Layout:
        return self._layout

    def device(self) -> MeshDevice | None:
        return self._device

    def memory_config(self) -> MemoryConfig:
        if self._device is None:
            raise TTFatal(f"memory_config: {_describe(self)} is not on a device")
        return self._memory_config

    def is_sharded(self) -> bool:
        """Whether the tensor is placed sharded (a host tensor is not)."""
        from .types import TensorMemoryLayout

        return self._device is not None and self._memory_config.memory_layout != TensorMemoryLayout.INTERLEAVED

    def storage_type(self) -> str:
        return "StorageType.HOST" if self._device is None else "StorageType.DEVICE"

    def is_allocated(self) -> bool:
        if self._device is None:
            return self._host is not None
        return self._buffers is not None and not any(b.freed for b in self._buffers)

    def buffer_address(self) -> int:
        """Address of the first chip's buffer (ttnn's buffer_address())."""
        return self._live_buffers("buffer_address")[0].address

    def logical_volume(self) -> int:
        """Number of logical elements (the product of ``shape``)."""
        v = 1
        for d in self._shape:
            v *= d
        return v

    def volume(self) -> int:
        """Number of elements including tile padding (the product of ``padded_shape``), as ttnn."""
        v = 1
        for d in self.padded_shape:
            v *= d
        return v

    def cpu(self, blocking: bool = True, cq_id: int | None = None) -> "Tensor":
        """The host copy of a device tensor; a host tensor is returned as it is (as ttnn)."""
        if self._device is None:
            return self
        return from_device(self, blocking=blocking, queue_id=cq_id)

    def to(self, device: MeshDevice, mem_config: MemoryConfig | None = None, cq_id: int | None = None) -> "Tensor":
        """``to(device[, mem_config, cq_id])`` moves a host tensor to a device; ttnn's other
        overload ``to(target_layout)`` converts a host tensor's layout."""
        if isinstance(device, Layout):
            if mem_config is not None or cq_id is not None:
                raise TTFatal("Tensor.to(target_layout) takes only the layout")
            if self._device is not None:  # tt-metal's tensor_to_layout
                raise TTFatal("Bring tensor to host before converting to target layout")
            if self._dtype in BLOCK_FLOATS and device == Layout.ROW_MAJOR:
                return host_block_float_to_row_major(self)
            dtype = check_layout_change(self, device, None)
            return self if device == self._layout else host_to_layout(self, device, dtype, 0.0)
        return to_device(self, device, memory_config=mem_config, queue_id=cq_id)

    def to_numpy(self, mesh_composer=None):
        """``to_torch`` as a numpy array (bfloat16 comes out as float32: numpy has no bfloat16)."""
        out = to_torch(self, mesh_composer=mesh_composer)
        return (out.float() if out.dtype == torch.bfloat16 else out).numpy()

    def to_torch(self, mesh_composer=None) -> torch.Tensor:
        return to_torch(self, mesh_composer=mesh_composer)

    def deallocate(self, force: bool = False) -> None:
        deallocate(self, force=force)

    def __repr__(self) -> str:
        return f"ttnn.{_describe(self)}"

    # -- internals ------------------------------------------------------------------
    @property
    def _host(self) -> list[torch.Tensor] | None:
        """Per-chip host shards. A non-blocking read's destination holds seeded junk until the
        read lands; the junk is fixed when the read is issued and made only if someone looks
        before it lands (most reads land first)."""
        if self._host_fill is not None:
            self._host_shards, self._host_fill = self._host_fill(), None
        return self._host_shards

    @_host.setter
    def _host(self, shards: list[torch.Tensor] | None) -> None:
        self._host_shards, self._host_fill = shards, None

    def _live_buffers(self, what: str) -> list[Buffer]:
        if self._device is None:
            raise TTFatal(f"{what}: expected a device tensor, got {_describe(self)}")
        self._device.check_open(what)
        bufs = self._buffers
        if bufs is None:
            raise TTFatal(f"{what}: {_describe(self)} has been deallocated")
        for b in bufs:
            if b.freed:
                raise TTFatal(f"{what}: {_describe(self)} has been deallocated")
        return bufs


# -- mesh mappers and composers -----------------------------------------------------

class ReplicateTensorToMesh:
    def __init__(self, mesh_device: MeshDevice):
        self.mesh_device = mesh_device

    def map(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        return [tensor] * self.mesh_device.get_num_devices()

    def config(self) -> dict:
        return {"strategy": "replicate", "replication_factor": str(self.mesh_device.get_num_devices())}


class ShardTensorToMesh:
    def __init__(self, mesh_device: MeshDevice, dim: int):
        self.mesh_device = mesh_device
        self.shard_dim = dim

    def map(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        n = self.mesh_device.get_num_devices()
        dim = self.shard_dim
        if not -tensor.dim() <= dim < tensor.dim():
            raise TTFatal(f"ShardTensorToMesh: dim={dim} is out of range for a rank-{tensor.dim()} tensor")
        if tensor.shape[dim] % n:
            raise TTFatal(
                f"ShardTensorToMesh: dim {dim} of shape {list(tensor.shape)} ({tensor.shape[dim]}) "
                f"does not divide across {n} devices"
            )
        return list(torch.chunk(tensor, n, dim=dim))

    def config(self) -> dict:
        return {"strategy": "shard", "shard_dim": str(self.shard_dim)}


class _ShardTensor2dMapper:
    """What :func:`ShardTensor2dMesh` returns (real 0.81.1: a CppTensorToMesh from create_mesh_mapper)."""

    def __init__(self, mesh_device: MeshDevice, mesh_shape: tuple[int, int], dims):
        self.mesh_device = mesh_device
        self.mesh_shape = mesh_shape
        self.dims = dims

    def _pieces(self, tensor: torch.Tensor, axis: int) -> list[torch.Tensor] | None:
        """``tensor`` cut into mesh_shape[axis] even parts along dims[axis]; None when that axis replicates."""
        dim, n = self.dims[axis], self.mesh_shape[axis]
        if dim is None:
            return None
        if not -tensor.dim() <= dim < tensor.dim():
            raise TTFatal(f"ShardTensor2dMesh: dims[{axis}]={dim} is out of range for a rank-{tensor.dim()} tensor")
        chunks = torch.chunk(tensor, n, dim=dim)
        if len(chunks) != n:
            # tt-metal chunks as torch.chunk does and then demands one chunk per mesh position
            raise TTFatal(f"ND sharding requires the number of chunks {len(chunks)} to match the mesh dimension "
                          f"size {n}")
        if tensor.shape[dim] % n:
            raise TTFatal(f"ShardTensor2dMesh: dim {dim} of shape {list(tensor.shape)} ({tensor.shape[dim]}) does "
                          f"not divide evenly across {n} mesh positions; uneven shards are not modelled by ttsim")
        return list(chunks)

    def map(self, tensor: torch.Tensor) -> list[torch.Tensor]:
        """One shard per device in row-major mesh order: shard (r, c) is part r of dims[0] and then
        part c of dims[1]; an axis whose dim is None gets the same data at each of its positions."""
        d0, d1 = self.dims
        if d0 is not None and d1 is not None and d0 % tensor.dim() == d1 % tensor.dim():
            raise TTFatal(f"ShardTensor2dMesh: both mesh axes shard tensor dim {d0}; not modelled by ttsim")
        rows, cols = self.mesh_shape
        by_row = self._pieces(tensor, 0) or [tensor] * rows
        out = []
        for part in by_row:
            out.extend(self._pieces(part, 1) or [part] * cols)
        return out

    def config(self):
        raise TTFatal("ShardTensor2dMesh(...).config(): ttnn.MeshMapperConfig is not modelled by ttsim")


def ShardTensor2dMesh(mesh_device: MeshDevice, mesh_shape, dims):  # noqa: N802 - ttnn's name
    """Shard over a 2-D mesh: tensor dim ``dims[0]`` across mesh rows, ``dims[1]`` across mesh
    columns (None replicates along that axis). ``mesh_shape`` must hold as many devices as
    ``mesh_device``: the same shape places shard (r, c) on device (r, c); another arrangement of
    the same size places the shards in row-major order (tt-metal's ROW_MAJOR distribution).
    A smaller mesh_shape (a submesh holding the tensor) is not modelled."""
    shape = tuple(mesh_shape)
    if len(shape) != 2 or not all(isinstance(n, int) and n > 0 for n in shape):
        raise TTFatal(f"ShardTensor2dMesh: mesh_shape must be two positive ints, got {mesh_shape!r}")
    dims = tuple(dims)
    if len(dims) != 2 or not all(d is None or isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise TTFatal(f"ShardTensor2dMesh: dims must be two ints or None, got {dims!r}")
    device_shape = mesh_device.shape
    size = shape[0] * shape[1]
    if size > device_shape.mesh_size():
        raise TTFatal(f"The size of the supplied mesh shape MeshShape([{shape[0]}, {shape[1]}]) does not match the "
                      f"device shape size {device_shape!r}")
    if size < device_shape.mesh_size():
        raise TTFatal(f"ShardTensor2dMesh: mesh_shape {list(shape)} is smaller than the mesh {device_shape!r}: "
                      f"placing a tensor on a submesh is not modelled by ttsim")
    return _ShardTensor2dMapper(mesh_device, shape, dims)


class ConcatMeshToTensor:
    def __init__(self, mesh_device: MeshDevice, dim: int):
        self.mesh_device = mesh_device
        self.concat_dim = dim

    def compose(self, shards: list[torch.Tensor]) -> torch.Tensor:
        return torch.cat(shards, dim=self.concat_dim)


def replicate_tensor_to_mesh_mapper(mesh_device: MeshDevice) -> ReplicateTensorToMesh:
    """ttnn's function form of :class:`ReplicateTensorToMesh`."""
    return ReplicateTensorToMesh(mesh_device)


def shard_tensor_to_mesh_mapper(mesh_device: MeshDevice, dim: int) -> ShardTensorToMesh:
    """ttnn's function form of :class:`ShardTensorToMesh`."""
    return ShardTensorToMesh(mesh_device, dim)


def concat_mesh_to_tensor_composer(mesh_device: MeshDevice, dim: int) -> ConcatMeshToTensor:
    """ttnn's function form of :class:`ConcatMeshToTensor`."""
    return ConcatMeshToTensor(mesh_device, dim)


# -- conversions --------------------------------------------------------------------

def _storage_of(tensor: torch.Tensor, dtype: DataType, layout: Layout, pad_value: float, tile=None) -> torch.Tensor:
    """A torch shard in storage form: padded to tiles if TILE, values quantised to dtype (a block
    float in transposed tiles shares its exponents down columns: ttsim/tiles.py)."""
    if layout == Layout.TILE:
        padded = tile_padded(tuple(tensor.shape), tiles.hw(tile))
        x = tensor if tensor.dim() >= 1 else tensor.reshape(1, 1)  # rank 0: element [0, 0] of one tile
        pads = []
        for have, want in zip(reversed(x.shape), reversed(padded)):
            pads += [0, want - have]
        if any(pads):
            if dtype in INTEGER_TYPES and not x.is_floating_point():
                x = F.pad(x.to(torch.int64), pads, value=int(pad_value))
            else:
                x = F.pad(x.to(torch.float32) if not x.is_floating_point() else x, pads, value=pad_value)
        tensor = x
        if tile is not None and tile.transpose_tile and dtype in BLOCK_FLOATS and tensor.dim() >= 2:
            return numerics.quantize(tensor.transpose(-1, -2), dtype).transpose(-1, -2).contiguous()
    return numerics.quantize(tensor, dtype).contiguous()


def from_torch(
    tensor: torch.Tensor,
    dtype: DataType | None = None,
    *,
    spec=None,
    tile=None,
    pad_value: float | None = None,
    layout: Layout | None = None,
    device: MeshDevice | None = None,
    memory_config: MemoryConfig | None = None,
    mesh_mapper=None,
    cq_id: int | None = None,
    preserve_nan_values: bool = False,
    col_tilize: bool = False,
    enable_bfloat_opt: bool = False,
) -> Tensor:
    """Convert a torch tensor to a ttnn tensor (on host, or on ``device``).

    ``layout=None`` keeps ROW_MAJOR. ``preserve_nan_values`` and ``enable_bfloat_opt`` change
    nothing in the host conversion (as in ttnn 0.81.1); ``col_tilize`` is not modelled.
    """
    if col_tilize:
        raise TTFatal("from_torch: col_tilize=True is not modelled by ttsim")
    if spec is not None:  # a TensorSpec
        raise TTFatal(f"from_torch: spec={spec!r} is not modelled by ttsim; pass dtype/layout/memory_config")
    tile = tiles.check("from_torch", tile)
    if not isinstance(tensor, torch.Tensor):
        raise TTFatal(f"from_torch: expected a torch.Tensor, got {type(tensor).__name__}")
    if dtype is None:
        if tensor.dtype not in _FROM_TORCH_DTYPE:
            raise TTFatal(
                f"from_torch: cannot infer a ttnn dtype from {tensor.dtype}; pass dtype= "
                f"(one of {sorted(d.name.lower() for d in TORCH_STORAGE)})"
            )
        dtype = _FROM_TORCH_DTYPE[tensor.dtype]
    if not isinstance(dtype, DataType) or dtype not in TORCH_STORAGE:
        raise TTFatal(f"from_torch: unsupported dtype {dtype!r}")
    layout = Layout.ROW_MAJOR if layout is None else layout
    if dtype in BLOCK_FLOATS and layout != Layout.TILE:
        raise TTFatal(f"from_torch: {dtype!r} is a block float and requires layout=TILE_LAYOUT, got {layout!r}")
    if mesh_mapper is not None:
        if device is not None and mesh_mapper.mesh_device is not device:
            raise TTFatal("from_torch: mesh_mapper was built for a different mesh device than device=")
        shards = mesh_mapper.map(tensor)
    else:
        shards = [tensor]
    pad = 0.0 if pad_value is None else float(pad_value)
    tile = tile if layout == Layout.TILE else None  # a ROW_MAJOR tensor has no tile (it reports 32x32)
    host = [_storage_of(s.detach(), dtype, layout, pad, tile) for s in shards]
    out = Tensor._make(tuple(shards[0].shape), dtype, layout, host=host, tile=tile)
    if device is not None:
        out = to_device(out, device, memory_config=memory_config, queue_id=cq_id)
    return out


def _from_data(what, data, shape, data_type, layout, device, memory_config_or_tile, tile, pad_value):
    """ttnn's ``Tensor(data, shape, data_type, layout, device=None, [memory_config,] tile=None,
    pad_value=0)`` overloads, reached positionally through the ArrayLike signature's slots."""
    memory_config = memory_config_or_tile if isinstance(memory_config_or_tile, MemoryConfig) else None
    if memory_config_or_tile is not None and memory_config is None:
        tile = memory_config_or_tile
    if not isinstance(data_type, DataType):
        raise TTFatal(f"{what}(data, shape, data_type, layout): data_type must be a ttnn DataType, got {data_type!r}")
    if not isinstance(layout, Layout):
        raise TTFatal(f"{what}(data, shape, data_type, layout): layout must be a ttnn Layout, got {layout!r}")
    dims = [int(d) for d in shape]
    n = 1
    for d in dims:
        n *= d
    if len(data) != n:
        raise TTFatal(f"{what}: data holds {len(data)} values but shape {dims} needs {n}")
    integer = data_type in INTEGER_TYPES
    values = torch.tensor(list(data), dtype=torch.int64 if integer else torch.float32).reshape(dims)
    if integer:
        values = values.to(torch.int32)
    return from_torch(values, data_type, tile=tile, pad_value=pad_value, layout=layout, device=device,
                      memory_config=memory_config)


def _unpad(x: torch.Tensor, shape: Shape) -> torch.Tensor:
    if not shape and x.dim():  # rank 0 in TILE: element [0, 0] of its one tile
        return x.reshape(-1)[0]
    return x[tuple(slice(0, d) for d in shape)] if tuple(x.shape) != tuple(shape) else x


def to_torch(
    tensor: Tensor,
    dtype: torch.dtype | None = None,
    *,
    torch_rank: int | None = None,
    mesh_composer=None,
    device=None,
    cq_id: int | None = None,
) -> torch.Tensor:
    """Convert a ttnn tensor to torch; a device tensor is read back (blocking) first."""
    if not isinstance(tensor, Tensor):
        raise TTFatal(f"to_torch: expected a ttnn Tensor, got {type(tensor).__name__}")
    private = tensor._device is not None  # the read below makes a host copy nobody else holds
    if private:
        # blocking, and nothing runs between the read and the copy below: the read may hand over
        # the buffer's own data, which is copied exactly once (the unpadded view or the whole)
        tensor = _read_back(tensor, cq_id)
    if tensor._pending is not None and not tensor._pending.done:
        # read not landed: the host buffer still holds what it held before
        tensor._pending.device.stats["stale_host_reads"] += 1
    shards = [_unpad(s, tensor._shape) for s in tensor._host]
    if len(shards) > 1:
        if mesh_composer is None:
            raise TTFatal(
                f"to_torch: {_describe(tensor)} holds {len(shards)} device shards; pass mesh_composer= "
                f"(e.g. ConcatMeshToTensor(mesh_device, dim=...))"
            )
        out = mesh_composer.compose(shards)
    else:
        out = shards[0] if mesh_composer is None else mesh_composer.compose(shards)
    target = TORCH_STORAGE[tensor._dtype]
    converted = out if out.dtype is target else out.to(target)  # (``to`` would return ``out`` itself)
    # copy what may be stored data (a host tensor's, or with a private read the buffer's own) or
    # a view of it; a composer's fresh result (torch.cat) is nobody else's
    if converted is out and (not private or out._base is not None or any(out is s for s in shards)):
        converted = out.clone()
    out = converted
    if torch_rank is not None:
        while out.dim() > torch_rank:
            if out.shape[0] != 1:
                raise TTFatal(f"to_torch: cannot squeeze shape {list(out.shape)} to rank {torch_rank}")
            out = out.squeeze(0)
    return out.to(dtype) if dtype is not None else out


def to_device(tensor: Tensor, device: MeshDevice, memory_config: MemoryConfig | None = None, *,
              queue_id: int | None = None) -> Tensor:
    """Allocate on ``device`` and enqueue the host-to-device write (on queue ``queue_id``, default 0)."""
    if not isinstance(device, MeshDevice):
        raise TTFatal(f"to_device: expected a MeshDevice, got {type(device).__name__}")
    if tensor._device is not None:
        if tensor._device is device:
            return tensor
        raise TTFatal(f"to_device: {_describe(tensor)} is already on another device")
    cq = current_cq_id(queue_id)
    device.check_open("to_device")
    device.check_cq(cq, "to_device")
    host = tensor._host
    n = device.get_num_devices()
    if len(host) == 1 and n > 1:
        host = host * n
    if len(host) != n:
        raise TTFatal(f"to_device: tensor has {len(host)} shards but {device!r} has {n} chips")
    mc = memory_config or DRAM_MEMORY_CONFIG
    check_placement("to_device", tensor._shape, tensor._layout, mc)
    bufs = device.allocate(mc.buffer_type, tensor._dtype, tensor._layout, tensor._padded, "to_device")

    def write():
        for b, h in zip(bufs, host):
            b.data = h.clone()  # each chip owns its bytes (a replicated shard is one host object)

    device.enqueue(cq, "write", write, writes=bufs)
    return Tensor._make(tensor._shape, tensor._dtype, tensor._layout, device=device, buffers=bufs, memory_config=mc,
                        tile=tensor._tile)


def _host_junk(t: Tensor, label: str):
    """Seeded contents of a freshly malloc'd host buffer (never read by a correct program), as
    a function making them: the key is taken now, the bytes only when needed."""
    dev = t._device
    issued, seed = dev.stats["commands"], dev.seed  # the key's inputs, hashed only if needed
    dtype, layout, padded, n = t._dtype, t._layout, tuple(t._padded), len(t._buffers)

    def make() -> list[torch.Tensor]:
        raw = junk_bytes(derive("host-buffer", label, issued, seed=seed), 0, numerics.nbytes(dtype, layout, padded))
        return [numerics.decode(raw, dtype, layout, padded) for _ in range(n)]

    return make


def from_device(tensor: Tensor, blocking: bool = True, *, queue_id: int | None = None) -> Tensor:
    """Read a device tensor back into a new host tensor (on queue ``queue_id``, default 0)."""
    bufs = tensor._live_buffers("from_device")
    out = Tensor._make(tensor._shape, tensor._dtype, tensor._layout, host=None, tile=tensor._tile)
    if not blocking:
        out._host_fill = _host_junk(tensor, "from_device")
    _enqueue_read(tensor, bufs, out, blocking, current_cq_id(queue_id), "from_device")
    return out


def _read_back(tensor: Tensor, cq_id: int | None) -> Tensor:
    """:func:`from_device` (blocking) whose host shards ARE the buffers' data, for a caller that
    copies them before anything else runs (to_torch)."""
    bufs = tensor._live_buffers("from_device")
    out = Tensor._make(tensor._shape, tensor._dtype, tensor._layout, host=None, tile=tensor._tile)
    _enqueue_read(tensor, bufs, out, True, current_cq_id(cq_id), "from_device", copy=False)
    return out


def _enqueue_read(src: Tensor, bufs: list[Buffer], dst: Tensor, blocking: bool, cq: int, what: str,
                  copy: bool = True) -> None:
    device = src._device
    device.check_cq(cq, what)
    if device._capturing is not None:
        raise TTFatal(f"{what}: reads are not allowed while a trace is being captured")

    def read():
        dst._host = [b.chip.contents(b).clone() for b in bufs] if copy else [b.chip.contents(b) for b in bufs]
        dst._pending = None

    cmd = device.enqueue(cq, f"read {what}", read)
    if blocking:
        device.wait_command(cmd)
    elif not cmd.done:
        dst._pending = cmd


def copy_host_to_device_tensor(host_tensor: Tensor, device_tensor: Tensor, cq_id: int | None = None) -> None:
    """Write ``host_tensor`` into the existing buffers of ``device_tensor`` (same spec)."""
    bufs = device_tensor._live_buffers("copy_host_to_device_tensor")
    if host_tensor._device is not None:
        raise TTFatal(f"copy_host_to_device_tensor: source must be a host tensor, got {_describe(host_tensor)}")
    _check_same_spec("copy_host_to_device_tensor", host_tensor, device_tensor)
    host = host_tensor._host
    if len(host) == 1 and len(bufs) > 1:
        host = host * len(bufs)
    if len(host) != len(bufs):
        raise TTFatal(
            f"copy_host_to_device_tensor: host tensor has {len(host)} shards, device tensor {len(bufs)}"
        )
    device = device_tensor._device
    cq_id = current_cq_id(cq_id)
    device.check_cq(cq_id, "copy_host_to_device_tensor")
    snapshot = [h.clone() for h in host]

    def write():
        for b, h in zip(bufs, snapshot):
            b.data = h

    device.enqueue(cq_id, "copy_host_to_device", write, writes=bufs)


def copy_device_to_host_tensor(device_tensor: Tensor, host_tensor: Tensor, blocking: bool = True,
                               cq_id: int | None = None) -> None:
    """Read ``device_tensor`` into the existing ``host_tensor``; non-blocking reads land later."""
    bufs = device_tensor._live_buffers("copy_device_to_host_tensor")
    if host_tensor._device is not None:
        raise TTFatal(f"copy_device_to_host_tensor: destination must be a host tensor, got {_describe(host_tensor)}")
    _check_same_spec("copy_device_to_host_tensor", host_tensor, device_tensor)
    _enqueue_read(device_tensor, bufs, host_tensor, blocking, current_cq_id(cq_id),
                  "copy_device_to_host_tensor")


def _check_same_spec(what: str, a: Tensor, b: Tensor) -> None:
    if a._dtype != b._dtype or a._layout != b._layout or tuple.__ne__(a._shape, b._shape) or a._tile != b._tile:
        raise TTFatal(f"{what}: tensor specs differ: {_describe(a)} vs {_describe(b)}")


def allocate_tensor_on_device(shape, dtype: DataType, layout: Layout, mesh_device: MeshDevice,
                              memory_config: MemoryConfig | None = None) -> Tensor:
    """A device tensor whose contents are whatever its memory held: UNINITIALIZED."""
    device = mesh_device
    if not isinstance(device, MeshDevice):
        raise TTFatal(f"allocate_tensor_on_device: expected a MeshDevice, got {type(device).__name__}")
    if dtype in BLOCK_FLOATS and layout != Layout.TILE:
        raise TTFatal(f"allocate_tensor_on_device: {dtype!r} requires TILE_LAYOUT, got {layout!r}")
    mc = memory_config or DRAM_MEMORY_CONFIG
    check_placement("allocate_tensor_on_device", tuple(shape), layout, mc)
    out = Tensor._make(tuple(shape), dtype, layout, device=device, memory_config=mc)
    bufs = device.allocate(mc.buffer_type, dtype, layout, out._padded, "allocate_tensor_on_device")
    out._buffers = bufs

    def materialise():
        for b in bufs:
            b.chip.contents(b)

    device.enqueue(0, "allocate (uninitialized)", materialise, writes=bufs)
    return out


def deallocate(tensor: Tensor, force: bool = True) -> None:
    """Free a device tensor's buffers; its bytes stay in memory for the next occupant."""
    if not isinstance(tensor, Tensor):
        raise TTFatal(f"deallocate: expected a ttnn Tensor, got {type(tensor).__name__}")
    if tensor._device is None:
        tensor._host = None
        return
    if tensor._buffers is not None:
        tensor._device.free(tensor._buffers)


def get_device_tensors(tensor: Tensor) -> list[Tensor]:
    """One tensor per chip (device tensors), or per shard (host tensors)."""
    if tensor._device is None:
        return [Tensor._make(tensor._shape, tensor._dtype, tensor._layout, host=[h], tile=tensor._tile)
                for h in tensor._host]
    bufs = tensor._live_buffers("get_device_tensors")
    return [
        Tensor._make(tensor._shape, tensor._dtype, tensor._layout, device=tensor._device, buffers=[b],
                     memory_config=tensor._memory_config, tile=tensor._tile)
        for b in bufs
    ]


def peek(tensor: Tensor) -> torch.Tensor | None:
    """ttsim only, not ttnn (for the sweep's shared runs, harness.shared_arms): what a blocking
    ``to_torch`` of the one-chip device tensor ``tensor`` would return now, without enqueuing
    the read; None where a read could return something else or change the device: commands
    are queued (a read runs them first), or nothing has written the buffer yet (a first look
    decodes the memory beneath it, which a read does and a peek must not)."""
    bufs = tensor._live_buffers("peek")
    device = tensor._device
    if len(bufs) != 1 or any(device._queues) or bufs[0].data is None:
        return None
    return _unpad(bufs[0].data, tensor._shape).to(TORCH_STORAGE[tensor._dtype], copy=True)
