"""Collectives across the chips of a mesh: all_gather, all_reduce, reduce_scatter.

Each runs as ONE enqueued command that sees every chip's shard (``run_collective``).
Chips are grouped by ``cluster_axis`` on the mesh (row-major chip order): ``None`` means
one group of all chips, ``1`` the chips of each mesh row, ``0`` those of each column.
On a 1xN mesh (the TP=2 production mesh is 1x2) ``None`` and ``1`` are the same group.

Sums are taken in fp32 in chip order and rounded once to the output dtype; ttnn documents
all_reduce as reducing in BFLOAT16, which for the two chips of TP=2 is the same result
(one rounding of an exactly representable bf16 + bf16 sum).
"""

from __future__ import annotations

import enum

import torch

from ..tensor import Tensor, _describe
from ..types import INTEGER_TYPES, MemoryConfig, TTFatal
from .base import require_device_tensor, run_collective


class Topology(enum.Enum):
    """ttnn.Topology (accepted and ignored: ttsim moves shards without a fabric)."""

    Linear = 1
    Ring = 2
    Mesh = 3
    Torus = 4

    def __repr__(self) -> str:
        return f"Topology.{self.name}"

    __str__ = __repr__


def _groups(op: str, x: Tensor, cluster_axis) -> list[list[int]]:
    device = x._device
    n = len(x._buffers)
    if n != device.get_num_devices():
        raise TTFatal(f"{op}: input_tensor spans {n} of the {device.get_num_devices()} chips of {device!r}; "
                      f"collectives need a tensor on every chip")
    rows, cols = device.shape[0], device.shape[1]
    if cluster_axis is None:
        return [list(range(n))]
    if cluster_axis == 1:
        return [[r * cols + c for c in range(cols)] for r in range(rows)]
    if cluster_axis == 0:
        return [[r * cols + c for r in range(rows)] for c in range(cols)]
    raise TTFatal(f"{op}: cluster_axis must be None, 0 or 1 for a 2D mesh, got {cluster_axis!r}")


def _dim(op: str, x: Tensor, dim) -> int:
    rank = len(x._shape)
    if not isinstance(dim, int) or isinstance(dim, bool) or not -rank <= dim < rank:
        raise TTFatal(f"{op}: dim={dim!r} is out of range for input_tensor {_describe(x)}")
    return dim % rank


def _group_size(groups: list[list[int]]) -> int:
    return len(groups[0])


def _per_chip(groups: list[list[int]], n: int, fn) -> list[torch.Tensor]:
    """Run ``fn(members)`` per group; returns one result per chip (``fn`` gives one per member)."""
    out: list = [None] * n
    for g in groups:
        for chip, r in zip(g, fn(g)):
            out[chip] = r
    return out


def _fp32_sum(shards: list[torch.Tensor]) -> torch.Tensor:
    acc = shards[0].to(torch.float32).clone()
    for s in shards[1:]:
        acc = acc + s.to(torch.float32)
    return acc


def _no_output_tensor(op: str, name: str, t) -> None:
    if t is not None:
        raise TTFatal(f"{op}: {name}= is not modelled by ttsim; use the returned tensor")


def _float_input(op: str, x: Tensor) -> None:
    if x._dtype in INTEGER_TYPES:
        raise TTFatal(f"{op}: input_tensor must be BFLOAT16, BFLOAT8_B or FLOAT32, got {_describe(x)}")


def all_gather(
    input_tensor: Tensor,
    dim: int,
    *,
    cluster_axis: int | None = None,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    subdevice_id=None,
    sub_core_grids=None,
    num_links: int | None = None,
    topology=None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    use_l1_small_for_semaphores: bool = False,
) -> Tensor:
    """Every chip of a group gets the concatenation (in chip order) of the group's shards along ``dim``."""
    op = "all_gather"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    d = _dim(op, x, dim)
    groups = _groups(op, x, cluster_axis)
    _no_output_tensor(op, "output_tensor", output_tensor)
    shape = list(x._shape)
    shape[d] *= _group_size(groups)
    n = len(x._buffers)

    def math(shards):
        return _per_chip(groups, n, lambda g: [torch.cat([shards[i] for i in g], dim=d)] * len(g))

    return run_collective(op, [x], shape, x._dtype, x._layout, math, memory_config=memory_config)


def all_reduce(
    input_tensor: Tensor,
    *,
    cluster_axis: int | None = None,
    subdevice_id=None,
    memory_config: MemoryConfig | None = None,
    num_links: int | None = None,
    topology=None,
) -> Tensor:
    """Every chip of a group gets the elementwise sum of the group's shards (same shape)."""
    op = "all_reduce"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    _float_input(op, x)
    groups = _groups(op, x, cluster_axis)
    n = len(x._buffers)

    def math(shards):
        return _per_chip(groups, n, lambda g: [_fp32_sum([shards[i] for i in g])] * len(g))

    return run_collective(op, [x], x._shape, x._dtype, x._layout, math, memory_config=memory_config)


def reduce_scatter(
    input_tensor: Tensor,
    dim: int,
    *,
    cluster_axis: int | None = None,
    subdevice_id=None,
    memory_config: MemoryConfig | None = None,
    intermediate_memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
    num_links: int | None = None,
    topology=None,
    chunks_per_sync: int | None = None,
    num_workers_per_link: int | None = None,
    num_buffers_per_channel: int | None = None,
    compute_kernel_config=None,
    use_l1_small_for_semaphores: bool = False,
) -> Tensor:
    """Sum the group's shards, then the k-th chip of the group keeps the k-th slice along ``dim``."""
    op = "reduce_scatter"
    x = require_device_tensor(op, "input_tensor", input_tensor)
    _float_input(op, x)
    d = _dim(op, x, dim)
    groups = _groups(op, x, cluster_axis)
    _no_output_tensor(op, "output_tensor", output_tensor)
    k = _group_size(groups)
    if x._shape[d] % k:
        raise TTFatal(f"{op}: dim {d} of input_tensor {_describe(x)} ({x._shape[d]}) does not divide across "
                      f"the {k} chips of the group")
    shape = list(x._shape)
    shape[d] //= k
    n = len(x._buffers)

    def math(shards):
        return _per_chip(groups, n, lambda g: list(torch.chunk(_fp32_sum([shards[i] for i in g]), len(g), dim=d)))

    return run_collective(op, [x], shape, x._dtype, x._layout, math, memory_config=memory_config)
