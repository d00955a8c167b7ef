"""ttnn.as_tensor: from_torch with an on-disk cache (``cache_file_name``), as tt-metal's models
load weights. The cache file is ttsim's own format (a torch-saved dict of the host storage),
named as ttnn names it: ``{cache_file_name}_dtype_{DTYPE}_layout_{LAYOUT}.tensorbin``."""

from __future__ import annotations

import enum
import logging
import os
import pathlib
import uuid

import torch

from .tensor import Tensor, from_torch, to_device
from .types import DataType, Layout, MemoryConfig, TTFatal, _tt_enum

log = logging.getLogger("ttsim")
_FORMAT = "ttsim-tensorbin-1"


@_tt_enum
class DumpTensorMode(enum.Enum):
    """ttnn.DumpTensorMode: how a multi-host cache miss writes the file (ttsim is one host)."""

    DISTRIBUTED_GATHER = 0
    LOCAL = 1


def as_tensor(
    tensor: torch.Tensor,
    dtype: DataType | None = None,
    *,
    layout: Layout = Layout.ROW_MAJOR,
    device=None,
    memory_config: MemoryConfig | None = None,
    cache_file_name: str | os.PathLike | None = None,
    preprocess=None,
    mesh_mapper=None,
    cache_dump_mode: DumpTensorMode = DumpTensorMode.DISTRIBUTED_GATHER,
) -> Tensor:
    """``from_torch(preprocess(tensor), ...)``, cached on disk when ``cache_file_name`` is given:
    a hit loads the stored (already converted) tensor and never calls ``preprocess``."""
    if device is not None and memory_config is None:
        raise TTFatal("as_tensor: memory_config must be specified when device is specified")
    if not isinstance(cache_dump_mode, DumpTensorMode):
        raise TTFatal(f"as_tensor: cache_dump_mode must be a ttnn.DumpTensorMode, got {cache_dump_mode!r}")

    def convert(on_device):
        src = preprocess(tensor) if preprocess else tensor
        return from_torch(src, dtype=dtype, layout=layout, mesh_mapper=mesh_mapper, memory_config=memory_config,
                          device=on_device)

    if cache_file_name is None:
        return convert(device)
    dtype_name = dtype.name if dtype is not None else "None"
    layout_name = layout.name if layout is not None else "None"
    path = pathlib.Path(f"{cache_file_name}_dtype_{dtype_name}_layout_{layout_name}.tensorbin")
    host = _load(path) if path.is_file() else None
    if host is None:
        host = convert(None)
        _dump(path, host)
    return host if device is None else to_device(host, device, memory_config=memory_config)


def _dump(path: pathlib.Path, t: Tensor) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")  # readers never see half a file
    record = {"format": _FORMAT, "shape": list(t._shape), "dtype": t._dtype.name, "layout": t._layout.name,
              "shards": t._host}
    try:
        torch.save(record, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _load(path: pathlib.Path) -> Tensor | None:
    """The cached tensor, or None (and a warning, as ttnn logs) if the file is not a ttsim cache."""
    try:
        record = torch.load(path, weights_only=True)
        if record.get("format") != _FORMAT:
            raise ValueError(f"not a {_FORMAT} file")
        return Tensor._make(record["shape"], DataType[record["dtype"]], Layout[record["layout"]],
                            host=list(record["shards"]))
    except Exception as exc:  # noqa: BLE001 - any unreadable cache is regenerated, as ttnn does
        log.warning("Failed to load cache for %s: %s", path, exc)
        return None


def zeros(shape, dtype: DataType | None = None, layout: Layout | None = None, device=None,
          memory_config: MemoryConfig | None = None) -> Tensor:
    """ttnn.zeros: a tensor of zeros, BFLOAT16 and ROW_MAJOR unless told (a block float is TILE,
    as 0.81.1's host path measured). With ``device`` it is filled ON the device, as 0.81.1's
    FullDeviceOperation does: no host write, so it is legal inside a trace capture."""
    from . import numerics
    from .device import MeshDevice, current_cq_id
    from .sharding import check_placement
    from .types import BLOCK_FLOATS, DRAM_MEMORY_CONFIG

    dims = tuple(int(d) for d in shape)
    dtype = DataType.BFLOAT16 if dtype is None else dtype
    if not isinstance(dtype, DataType):
        raise TTFatal(f"zeros: dtype must be a ttnn.DataType, got {dtype!r}")
    if layout is None:
        layout = Layout.TILE if dtype in BLOCK_FLOATS else Layout.ROW_MAJOR
    if dtype in BLOCK_FLOATS and layout != Layout.TILE:
        raise TTFatal(f"zeros: {dtype!r} requires TILE_LAYOUT, got {layout!r}")
    host = from_torch(torch.zeros(dims, dtype=numerics.TORCH_STORAGE[dtype]), dtype=dtype, layout=layout)
    if device is None:
        return host
    if not isinstance(device, MeshDevice):
        raise TTFatal(f"zeros: device must be a MeshDevice, got {type(device).__name__}")
    mc = memory_config or DRAM_MEMORY_CONFIG
    check_placement("zeros", dims, layout, mc)
    out = Tensor._make(dims, dtype, layout, device=device, memory_config=mc)
    bufs = device.allocate(mc.buffer_type, dtype, layout, out._padded, "zeros")
    out._buffers = bufs
    filled = host._host[0]
    cq = current_cq_id(None)
    device.check_cq(cq, "zeros")
    device.program_cache.dispatch("zeros", [], [out])

    def fill():
        for b in bufs:
            b.data = filled.clone()

    device.enqueue(cq, "zeros (device fill)", fill, writes=bufs)
    return out
