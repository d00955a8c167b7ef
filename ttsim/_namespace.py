"""The ttnn namespace ttsim presents: every name ``import ttsim as ttnn`` gives, and
:data:`EXTENSIONS`, what ttsim adds beyond ttnn. The package loads it at the first use of any
of these names (ttsim/__init__.py says why and what the names mirror).
"""

from .api import (
    GetNumAvailableDevices,
    GetNumPCIeDevices,
    begin_trace_capture,
    close_device,
    close_mesh_device,
    command_queue,
    end_trace_capture,
    event_synchronize,
    execute_trace,
    open_device,
    open_mesh_device,
    record_event,
    release_trace,
    synchronize_device,
    wait_for_event,
)
from .device import Event as MeshEvent
from .fabric import (
    DispatchCoreAxis,
    DispatchCoreConfig,
    DispatchCoreType,
    FabricConfig,
    FabricManagerMode,
    FabricReliabilityMode,
    FabricRouterConfig,
    FabricTensixConfig,
    FabricUDMMode,
    get_arch_name,
    get_fabric_config,
    set_fabric_config,
)
from .device import MeshDevice, device_knobs, digest_state
from .seed import DEFAULT_SEED, get_seed, set_seed
from .tensor import (
    ConcatMeshToTensor,
    ReplicateTensorToMesh,
    ShardTensor2dMesh,
    ShardTensorToMesh,
    Tensor,
    allocate_tensor_on_device,
    concat_mesh_to_tensor_composer,
    copy_device_to_host_tensor,
    copy_host_to_device_tensor,
    deallocate,
    from_device,
    from_torch,
    get_device_tensors,
    replicate_tensor_to_mesh_mapper,
    shard_tensor_to_mesh_mapper,
    to_device,
    to_torch,
)
from .types import (
    DRAM_MEMORY_CONFIG,
    L1_BLOCK_SHARDED_MEMORY_CONFIG,
    L1_HEIGHT_SHARDED_MEMORY_CONFIG,
    L1_MEMORY_CONFIG,
    L1_WIDTH_SHARDED_MEMORY_CONFIG,
    ROW_MAJOR_LAYOUT,
    TILE_LAYOUT,
    TILE_SIZE,
    Arch,
    BufferType,
    ChunkGdnWyInverse,
    CoreCoord,
    DataType,
    Layout,
    MathFidelity,
    MemoryConfig,
    MeshCoordinate,
    MeshShape,
    Shape,
    ShardOrientation,
    ShardStrategy,
    TensorMemoryLayout,
    TraceAllocationWarning,
    TTFatal,
    bfloat4_b,
    bfloat8_b,
    bfloat16,
    float32,
    int32,
    uint8,
    uint16,
    uint32,
)
from .ops.eltwise import (
    SigmoidMode,
    abs,
    add,
    add_,
    atan,
    ceil,
    celu,
    clamp,
    clip,
    cos,
    cosh,
    div,
    divide,
    elu,
    eq,
    erf,
    erfc,
    exp,
    exp2,
    expm1,
    floor,
    ge,
    gelu,
    gt,
    hardsigmoid,
    hardswish,
    hardtanh,
    isnan,
    le,
    leaky_relu,
    log,
    log1p,
    logical_not,
    lt,
    maximum,
    minimum,
    mish,
    mul,
    mul_,
    multiply,
    ne,
    neg,
    pow,
    rdiv,
    reciprocal,
    relu,
    relu6,
    rsqrt,
    rsub,
    selu,
    sigmoid,
    sign,
    silu,
    sin,
    sinh,
    softplus,
    softsign,
    sqrt,
    square,
    squared_difference,
    sub,
    sub_,
    subtract,
    tanh,
    threshold,
    where,
)
from .ops.matmul import linear, matmul
from .ops.ccl import Topology, all_gather, all_reduce, reduce_scatter
from .ops.ccl_async import MinimalMatmulConfig, create_global_semaphore
from .ops.embedding import EmbeddingsType, embedding
from .ops.normalization import (
    layer_norm,
    rms_norm,
    scale_mask_softmax,
    scale_mask_softmax_in_place,
    softmax,
    softmax_in_place,
)
from .ops.reduction import argmax, max, mean, plus_one, sum
from .ops.topk import topk
from .ops.shape import (
    TileReshapeMapMode,
    clone,
    concat,
    copy,
    pad,
    permute,
    repeat,
    reshape,
    slice,
    squeeze,
    transpose,
    unsqueeze,
    unsqueeze_to_4D,
)
from .creation import DumpTensorMode, as_tensor, zeros
from .comparison import pearson_correlation_coefficient
from .ops.ternary import addcmul, mac
from .ops.conv import Conv1dConfig, Conv2dL1FullSliceConfig, PaddingMode, conv1d, prepare_conv_weights
from .ops.split import chunk, repeat_interleave
from .ops.distributed_norm import rms_norm_post_all_gather, rms_norm_pre_all_gather
from .grid import CoreGrid, CoreRange, CoreRangeSet
from .ops.matmul_config import (
    MatmulMultiCoreReuseMultiCast1DProgramConfig,
    MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig,
    MatmulMultiCoreReuseMultiCastProgramConfig,
    MatmulMultiCoreReuseProgramConfig,
)
from .kernel_config import ThrottleLevel, WormholeComputeKernelConfig, init_device_compute_kernel_config
from .golden import get_golden_function
from .ops.kv_cache import fill_cache, update_cache
from .ops.activation import UnaryOpType, UnaryWithParam
from .ops.layout_ops import (
    Tile,
    interleaved_to_sharded,
    is_tensor_storage_on_device,
    sharded_to_interleaved,
    tilize,
    tilize_with_val_padding,
    tilize_with_zero_padding,
    to_layout,
    to_memory_config,
    typecast,
    untilize,
    untilize_with_unpadding,
)
from .sharding import (
    ShardSpec,
    create_sharded_memory_config,
    num_cores_to_corerangeset,
    num_cores_to_corerangeset_in_subcoregrids,
)
from . import experimental, tensor_ops, transformer  # noqa: F401 - tensor_ops attaches Tensor's operators
from .ops.attention import SDPAProgramConfig

Device = MeshDevice

#: Names ttsim exports that real ttnn 0.81.1 does not: simulation controls and debugging.
#: tests/ttsim/test_conformance.py fails on any other ttsim name real ttnn lacks, and on an
#: entry here that real ttnn does have. Keys are paths below ``ttsim`` (``"x"``, ``"transformer.x"``).
EXTENSIONS = {
    "DEFAULT_SEED": "the documented default of TTSIM_SEED",
    "get_seed": "the seed in force (TTSIM_SEED or set_seed)",
    "set_seed": "fix the seed for devices opened afterwards",
    "device_knobs": "context manager: seeded device knobs (readback_lag) for meshes opened inside it",
    "digest_state": "SHA-256 of all device memory and counters, for determinism checks",
    "TTFatal": "the exception type ttsim raises (ttnn raises RuntimeError; TTFatal subclasses it)",
    "TraceAllocationWarning": "warning category for allocation while a trace is live (ttnn logs it)",
    "EXTENSIONS": "this list",
}

import sys as _sys  # noqa: E402

from . import golden as _golden  # noqa: E402

_golden.install(_sys.modules[__name__])  # every op is imported by now
