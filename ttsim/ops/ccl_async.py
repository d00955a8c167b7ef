"""The asynchronous ("minimal") collectives tt-metal's models call, and their global semaphores:
create_global_semaphore, experimental.all_gather_async, experimental.reduce_scatter_minimal_async,
experimental.all_gather_minimal_matmul_async, experimental.matmul_reduce_scatter_async, and
the MinimalMatmulConfig the fused all-gather + matmul takes.

Values are those of the synchronous collectives (ttsim/ops/ccl.py: chip groups by
``cluster_axis``, concatenation in chip order, fp32 sums rounded once). What makes them
"async" on a card is that the op is queued on every chip and its result lands when the queue
reaches it; in ttsim the command runs at that point of the queue too, so a host read
(``to_torch``) waits for it, and a persistent output buffer holds its previous contents until
then.

Global semaphores: each op counts arrivals on the semaphores it is handed and resets them to 0
when it finishes, so a semaphore must read 0 when an op starts (its ``initial_value``): ttsim
refuses one created with any other value, whose count would let receivers read before the data
lands. A semaphore belongs to the mesh it was created on. reduce_scatter_minimal_async takes
exactly three (tt-metal: "Expected {} semaphores but got {}"); the fused all-gather + matmul
needs a persistent gather buffer or a barrier semaphore (without either a chip that runs ahead
writes its next shard into a peer's buffer: a race on a card, refused here).
"""

from __future__ import annotations

import torch

from ..fabric import check_collective
from ..device import current_cq_id
from ..tensor import Tensor, _describe
from ..types import BufferType, CoreCoord, MemoryConfig, TTFatal
from .base import _allocate_output, chip_logical, require_device_tensor, storage
from .ccl import Topology, _dim, _float_input, _fp32_sum, _groups, _group_size, _per_chip


class GlobalSemaphore:
    """What ttnn.create_global_semaphore returns (0.81.1's ``global_semaphore``): one semaphore
    per chip of ``mesh_device``, on ``cores``, holding ``initial_value``."""

    def __init__(self, mesh_device, cores, initial_value: int, buffer_type: BufferType):
        self.mesh_device = mesh_device
        self.cores = cores
        self.value = int(initial_value)
        self.buffer_type = buffer_type

    def __repr__(self) -> str:
        return f"global_semaphore(value={self.value}, buffer_type={self.buffer_type!r})"


def create_global_semaphore(mesh_device, cores, initial_value: int, buffer_type: BufferType = BufferType.L1):
    """ttnn.create_global_semaphore(mesh_device, cores, initial_value, buffer_type=L1)."""
    from ..device import MeshDevice
    from ..grid import CoreRangeSet

    if not isinstance(mesh_device, MeshDevice):
        raise TypeError(f"create_global_semaphore: mesh_device must be a MeshDevice, got {type(mesh_device).__name__}")
    if not isinstance(cores, CoreRangeSet):
        raise TypeError(f"create_global_semaphore: cores must be a CoreRangeSet, got {type(cores).__name__}")
    if not isinstance(initial_value, int) or isinstance(initial_value, bool) or initial_value < 0:
        raise TypeError(f"create_global_semaphore: initial_value must be a non-negative int, got {initial_value!r}")
    if not isinstance(buffer_type, BufferType):
        raise TypeError(f"create_global_semaphore: buffer_type must be a BufferType, got {buffer_type!r}")
    mesh_device.check_open("create_global_semaphore")
    return GlobalSemaphore(mesh_device, cores, initial_value, buffer_type)


def _semaphores(op: str, name: str, sems, device, count: int | None = None) -> list[GlobalSemaphore]:
    items = [sems] if isinstance(sems, GlobalSemaphore) else list(sems) if isinstance(sems, (list, tuple)) else None
    if items is None or not all(isinstance(s, GlobalSemaphore) for s in items):
        raise TypeError(f"{op}: {name} must be global semaphores (ttnn.create_global_semaphore), got {sems!r}")
    if count is not None and len(items) != count:
        raise TTFatal(f"Expected {count} semaphores but got {len(items)}")
    if not items:
        raise TTFatal(f"{op}: {name} is empty")
    for s in items:
        if s.mesh_device is not device:
            raise TTFatal(f"{op}: {name} was created on {s.mesh_device!r}, the input is on {device!r}")
        if s.value != 0:
            raise TTFatal(f"{op}: {name} holds {s.value}, not 0: the op counts arrivals from 0 and resets to 0, so "
                          f"a semaphore created with initial_value={s.value} would let receivers read before the "
                          f"data lands (ttsim refuses; a card's output would be undefined)")
    return items


def _barrier(op: str, barrier_semaphore, device) -> None:
    if barrier_semaphore is not None:
        _semaphores(op, "barrier_semaphore", barrier_semaphore, device)


def _topology(op: str, topology) -> None:
    if not isinstance(topology, Topology):
        raise TypeError(f"{op}: topology must be a ttnn.Topology, got {topology!r}")


def _persistent(op: str, name: str, buf, x: Tensor, shape, dtype) -> Tensor:
    """A caller's persistent output buffer: same mesh, the result's shape, dtype and layout."""
    t = require_device_tensor(op, name, buf)
    if t._device is not x._device or len(t._buffers) != len(x._buffers):
        raise TTFatal(f"{op}: {name} is on {t._device!r}, the input on {x._device!r}")
    if list(t._shape) != list(shape) or t._dtype != dtype or t._layout != x._layout:
        raise TTFatal(f"{op}: {name} must be {list(shape)} {dtype!r} {x._layout!r} (the result), got {_describe(t)}")
    return t


def _collective(op: str, inputs: list[Tensor], out_shape, out_dtype, math, memory_config, output) -> Tensor:
    """run_collective, writing into ``output`` when given (a persistent buffer) instead of a new tensor."""
    first = inputs[0]
    check_collective(first._device, op)
    cq_id = current_cq_id(None)
    if output is None:
        out = _allocate_output(op, first, out_shape, out_dtype, first._layout, memory_config, cq_id)
    else:
        out = output
        out._device.check_cq(cq_id, op)
    in_bufs = [t._buffers for t in inputs]
    out_bufs = out._buffers

    def execute():
        per_input = [[chip_logical(b, t) for b in bufs] for bufs, t in zip(in_bufs, inputs)]
        results = math(*per_input)
        flat = [x for xs in per_input for x in xs]
        for ob, r in zip(out_bufs, results):
            ob.canon = None
            ob.data = storage(r, out_dtype, first._layout, flat)

    out._device.program_cache.dispatch(op, inputs, [out])
    out._device.enqueue(cq_id, op, execute, writes=out_bufs)
    return out


def _gather(op, x, d, groups, memory_config, output) -> Tensor:
    shape = list(x._shape)
    shape[d] *= _group_size(groups)
    if output is not None:
        output = _persistent(op, "persistent_output_buffer", output, x, shape, x._dtype)
    n = len(x._buffers)

    def math(shards):
        return _per_chip(groups, n, lambda g: [torch.cat([shards[i] for i in g], dim=d)] * len(g))

    return _collective(op, [x], shape, x._dtype, math, memory_config, output)


def all_gather_async(
    input_tensor: Tensor,
    persistent_output_buffer: Tensor | None = None,
    dim: int | None = None,
    multi_device_global_semaphore=None,
    *,
    num_links: int | None = None,
    memory_config: MemoryConfig | None = None,
    topology: Topology = Topology.Ring,
    subdevice_id=None,
    cluster_axis: int | None = None,
    use_optimal_ccl_for_llama: bool = False,
    use_broadcast: bool = False,
    barrier_semaphore=None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    sub_core_grids=None,
) -> Tensor:
    """Every chip of a group gets the group's shards concatenated along ``dim`` (in chip order),
    written into ``persistent_output_buffer`` when given. 0.81.1's positional first overload
    ``(input_tensor, dim, multi_device_global_semaphore)`` binds too."""
    op = "all_gather_async"
    if isinstance(persistent_output_buffer, int) and not isinstance(persistent_output_buffer, bool):
        # the (input_tensor, dim, multi_device_global_semaphore) overload, called positionally
        persistent_output_buffer, dim, multi_device_global_semaphore = None, persistent_output_buffer, dim
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if dim is None or multi_device_global_semaphore is None:
        raise TypeError(f"{op}: dim and multi_device_global_semaphore are required")
    d = _dim(op, x, dim)
    _topology(op, topology)
    _semaphores(op, "multi_device_global_semaphore", multi_device_global_semaphore, x._device)
    _barrier(op, barrier_semaphore, x._device)
    if use_broadcast:
        raise TTFatal(f"{op}: use_broadcast=True is not modelled by ttsim")
    return _gather(op, x, d, _groups(op, x, cluster_axis), memory_config, persistent_output_buffer)


def reduce_scatter_minimal_async(
    input_tensor: Tensor,
    persistent_output_buffers=None,
    dim: int | None = None,
    multi_device_global_semaphore=None,
    *,
    barrier_semaphore=None,
    num_links: int | None = None,
    memory_config: MemoryConfig | None = None,
    intermediate_memory_config: MemoryConfig | None = None,
    topology: Topology = Topology.Ring,
    subdevice_id=None,
    cluster_axis: int | None = None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    compute_kernel_config=None,
) -> Tensor:
    """Sum the group's shards (fp32, rounded once) and keep chip k's k-th slice along ``dim``.
    ``persistent_output_buffers`` is ``[intermediate, output]``: the result is written into the
    second (the first is the op's staging area, whose contents are the kernel's)."""
    op = "reduce_scatter_minimal_async"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    if dim is None or multi_device_global_semaphore is None:
        raise TypeError(f"{op}: dim and multi_device_global_semaphore are required")
    return _reduce_scatter(op, x, dim, multi_device_global_semaphore, barrier_semaphore, topology, cluster_axis,
                           memory_config, persistent_output_buffers)


def _reduce_scatter(op, x, dim, sems, barrier_semaphore, topology, cluster_axis, memory_config, buffers) -> Tensor:
    _float_input(op, x)
    d = _dim(op, x, dim)
    _topology(op, topology)
    _semaphores(op, "multi_device_global_semaphore", sems, x._device, count=3)
    _barrier(op, barrier_semaphore, x._device)
    groups = _groups(op, x, cluster_axis)
    k = _group_size(groups)
    if x._shape[d] % k:
        raise TTFatal(f"{op}: dim {d} of input_tensor {_describe(x)} ({x._shape[d]}) does not divide across "
                      f"the {k} chips of the group")
    shape = list(x._shape)
    shape[d] //= k
    output = None
    if buffers is not None:
        if not isinstance(buffers, (list, tuple)) or len(buffers) != 2:
            raise TTFatal(f"{op}: persistent_output_buffers must be [intermediate, output], got {buffers!r}")
        require_device_tensor(op, "persistent_output_buffers[0]", buffers[0])
        output = _persistent(op, "persistent_output_buffers[1]", buffers[1], x, shape, x._dtype)
    n = len(x._buffers)

    def math(shards):
        return _per_chip(groups, n, lambda g: list(torch.chunk(_fp32_sum([shards[i] for i in g]), len(g), dim=d)))

    return _collective(op, [x], shape, x._dtype, math, memory_config, output)


class MinimalMatmulConfig:
    """ttnn.MinimalMatmulConfig: the block sizes and grid of the minimal matmul (blocking only)."""

    def __init__(self, *, M_block_size: int = 1, K_block_size: int = 1, N_block_size: int = 1,  # noqa: N803
                 subblock_h: int = 1, subblock_w: int = 1, compute_with_storage_grid_size=CoreCoord(1, 1)):
        for name, v in (("M_block_size", M_block_size), ("K_block_size", K_block_size),
                        ("N_block_size", N_block_size), ("subblock_h", subblock_h), ("subblock_w", subblock_w)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise TypeError(f"MinimalMatmulConfig: {name} must be a positive int, got {v!r}")
        grid = compute_with_storage_grid_size
        if isinstance(grid, tuple):
            grid = CoreCoord(*grid)
        self.M_block_size, self.K_block_size, self.N_block_size = M_block_size, K_block_size, N_block_size
        self.subblock_h, self.subblock_w = subblock_h, subblock_w
        self.compute_with_storage_grid_size = grid

    def __repr__(self) -> str:  # 0.81.1's text
        g = self.compute_with_storage_grid_size
        return (f"MinimalMatmulConfig(M_block_size={self.M_block_size},K_block_size={self.K_block_size},"
                f"N_block_size={self.N_block_size},subblock_h={self.subblock_h},subblock_w={self.subblock_w},"
                f"compute_with_storage_grid_size={g.x}-{g.y})")


def all_gather_minimal_matmul_async(
    input_tensor: Tensor,
    weight_tensor: Tensor,
    *,
    bias_tensor: Tensor | None = None,
    scalar: float | None = None,
    addcmul_input_tensor1: Tensor | None = None,
    addcmul_input_tensor2: Tensor | None = None,
    fused_activation=None,
    config: MinimalMatmulConfig | None = None,
    multi_device_global_semaphore,
    topology: Topology = Topology.Ring,
    memory_config: MemoryConfig | None = None,
    dtype=None,
    compute_kernel_config=None,
    persistent_output_buffer: Tensor | None = None,
    num_links: int = 1,
    cluster_axis: int | None = None,
    barrier_semaphore=None,
    force_transpose: bool = True,
    num_workers_per_link: int = 1,
    num_buffers_per_channel: int = 1,
    chunks: int = 1,
    dim: int = -1,
    fsdp_cluster_axis: int | None = None,
    fsdp_multi_device_global_semaphore=(),
    persistent_weight_buffer: Tensor | None = None,
    fsdp_topology=None,
    fuse_swiglu: bool = False,
    chunk_sizes=(),
) -> list[Tensor]:
    """All-gather the K-sharded ``input_tensor`` along ``dim`` (into ``persistent_output_buffer``
    when given), then ``gathered @ weight (+ bias)``, the fused activation, and with the ternary
    ``addcmul_input_tensor1 + scalar * out * addcmul_input_tensor2``; the output split along N
    into ``chunks`` (or ``chunk_sizes``) pieces, returned as a list (the gather intermediate is
    not returned, as 0.81.1's op strips it)."""
    from .activation import chain
    from .matmul import linear
    from .split import chunk as _chunk
    from .ternary import addcmul
    from .shape import slice as _slice

    op = "all_gather_minimal_matmul_async"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    w = require_device_tensor(op, "weight_tensor", weight_tensor)
    _topology(op, topology)
    _semaphores(op, "multi_device_global_semaphore", multi_device_global_semaphore, x._device)
    _barrier(op, barrier_semaphore, x._device)
    if fsdp_cluster_axis is not None or fsdp_multi_device_global_semaphore or persistent_weight_buffer is not None \
            or fsdp_topology is not None:
        raise TTFatal(f"{op}: the FSDP weight gather (fsdp_cluster_axis, fsdp_multi_device_global_semaphore, "
                      f"persistent_weight_buffer, fsdp_topology) is not modelled by ttsim")
    if fuse_swiglu:
        raise TTFatal(f"{op}: fuse_swiglu=True is not modelled by ttsim")
    if not force_transpose:
        raise TTFatal(f"{op}: force_transpose=False is not modelled by ttsim")
    if (addcmul_input_tensor1 is None) != (addcmul_input_tensor2 is None):
        raise TTFatal("Both addcmul_input_tensor1 and addcmul_input_tensor2 must be provided together.")
    if config is not None and not isinstance(config, MinimalMatmulConfig):
        raise TypeError(f"{op}: config must be a ttnn.MinimalMatmulConfig, got {config!r}")
    if persistent_output_buffer is None and barrier_semaphore is None:
        raise TTFatal(f"{op}: needs persistent_output_buffer or barrier_semaphore: without either a chip that runs "
                      f"ahead writes its next shard into a peer's gather buffer (a race on a card; ttsim refuses)")
    gathered = _gather(op, x, _dim(op, x, dim), _groups(op, x, cluster_axis), None, persistent_output_buffer)
    act = chain(op, "fused_activation", [fused_activation] if fused_activation is not None else None)
    out = linear(gathered, w, bias=bias_tensor, dtype=dtype, memory_config=memory_config)
    if act is not None:
        from .base import run_op

        out = run_op(op + " (fused activation)", [out], out._shape, out._dtype, out._layout, act,
                     memory_config=memory_config)
    if addcmul_input_tensor1 is not None:
        out = addcmul(addcmul_input_tensor1, out, addcmul_input_tensor2, value=1.0 if scalar is None else scalar,
                      memory_config=memory_config)
    n = out._shape[-1]
    sizes = [int(s) for s in chunk_sizes]
    if sizes:
        if sum(sizes) != n:
            raise TTFatal(f"chunk_sizes must sum to the output width N={n}, got {sum(sizes)}")
        pieces, lo = [], 0
        for s in sizes:
            start = [0] * len(out._shape)
            end = list(out._shape)
            start[-1], end[-1] = lo, lo + s
            pieces.append(_slice(out, start, end))
            lo += s
        return pieces
    if not isinstance(chunks, int) or chunks < 1:
        raise TTFatal(f"{op}: chunks must be a positive int, got {chunks!r}")
    return [out] if chunks == 1 else _chunk(out, chunks, -1)


def matmul_reduce_scatter_async(
    input_tensor: Tensor,
    weight_tensor: Tensor,
    persistent_intermediate_buffer: Tensor,
    persistent_output_buffer: Tensor,
    dim: int,
    multi_device_global_semaphore,
    reduce_scatter_core_grid_offset,
    *,
    barrier_semaphore=None,
    bias: Tensor | None = None,
    num_links: int | None = None,
    memory_config_rs: MemoryConfig | None = None,
    intermediate_memory_config_rs: MemoryConfig | None = None,
    topology: Topology = Topology.Ring,
    subdevice_id=None,
    memory_config_mm: MemoryConfig | None = None,
    transpose_a: bool = False,
    transpose_b: bool = False,
    dtype=None,
    program_config=None,
    activation: str | None = None,
    compute_kernel_config=None,
    core_grid=None,
) -> list[Tensor]:
    """``[mm, rs]``: ``mm = input @ weight (+ bias, activation)`` as ttnn.linear computes it, then
    the reduce-scatter of ``mm`` (as stored) along ``dim`` into ``persistent_output_buffer``."""
    from .matmul import linear

    op = "matmul_reduce_scatter_async"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    require_device_tensor(op, "persistent_intermediate_buffer", persistent_intermediate_buffer)
    mm = linear(x, weight_tensor, bias=bias, transpose_a=transpose_a, transpose_b=transpose_b,
                memory_config=memory_config_mm, dtype=dtype, program_config=program_config, activation=activation)
    rs = _reduce_scatter(op, mm, dim, multi_device_global_semaphore, barrier_semaphore, topology, None,
                         memory_config_rs, [persistent_intermediate_buffer, persistent_output_buffer])
    return [mm, rs]
