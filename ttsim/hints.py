"""The keyword rule: every keyword a ttsim op accepts either changes the result the way the
real op does (and a test exercises it), is refused with a TT_FATAL when set to what ttsim
cannot honour, or is listed here as a placement / performance / precision hint that cannot
change values in ttsim. Nothing is accepted and silently ignored.

tests/ttsim/test_keyword_rule.py walks every public op's parameters and fails on any that
is neither listed here nor passed by some test or model call.
"""

from __future__ import annotations

#: Keywords that are hints for every op that has them: where a result lives or how the
#: kernel is scheduled, never which values it holds.
ANY_OP: dict[str, str] = {
    "memory_config": "placement (DRAM/L1, interleaved/sharded) of the output; validated, values unchanged",
    "intermediate_memory_config": "placement of a CCL's intermediate buffer",
    "compute_kernel_config": "math fidelity / fp32 accumulation: ttsim always accumulates in fp32 "
                             "(card results stay within tt-metal's PCC/RMSE bars)",
    "program_config": "core grid and blocking of the kernel (SDPA: chunk sizes, which only reorder fp32 sums)",
    "core_grid": "which cores run the op",
    "sub_core_grids": "which cores run the op",
    "sub_device_id": "which sub-device's cores run the op",
    "subdevice_id": "which sub-device's cores run the op",
    "sub_device_ids": "which sub-devices a synchronisation covers (ttsim has one sub-device)",
    "global_cb": "a global circular buffer used by the prefetcher: data movement only",
    "prefetcher_pipes": "prefetcher routing: data movement only",
    "output_tile": "tile of the output's storage: 32x32 only (others are refused: tiny-tile matmul is broken on "
                   "Blackhole, tt-metal issue 22103), so the values are unchanged",
    "fast_and_approximate_mode": "precision hint: ttsim computes the accurate result (a card's "
                                 "approximation stays within tt-metal's bars)",
    "num_links": "ethernet links a CCL uses: bandwidth only",
    "topology": "ring or linear routing of a CCL: the reduced/gathered values are the same",
    "chunks_per_sync": "CCL pipelining granularity",
    "num_workers_per_link": "CCL worker cores per link",
    "num_buffers_per_channel": "CCL buffering depth",
    "use_l1_small_for_semaphores": "where CCL semaphores live",
    "enable_secondary_dm": "uses a second data-movement core: speed only",
    "use_multicore": "multi-core kernel selection: speed only",
    "dispatch_core_config": "which cores dispatch commands",
    "use_low_perf": "a slower kernel that uses less L1: speed only",
    "cache_dump_mode": "how a multi-host cache miss writes the file; ttsim is one host and writes it whole",
    "worker_l1_size": "size of worker L1 (0 = hardware default)",
    "use_2d_core_grid": "runs the distributed norm on a 2D core grid: which cores run the op",
}

_HELPER_TENSOR = "precomputed constant helper tensor for the card's kernel; ttsim builds its own"
_STABLE_SOFTMAX = {"numeric_stable": "subtracts the row max first: ttsim always does (fp32), the same values"}
_NAN_FLAG = "changes nothing in the host conversion of ttnn 0.81.1 (checked by conformance)"
_REGION_SIZES = {
    "l1_small_size": "size of the L1-small region (validated)",
    "trace_region_size": "size of the trace region (validated)",
}
_TILE_PADDING = {"pad_value": "fills tile padding only; logical values unchanged"}
_BARRIER = ("a semaphore the chips meet on before the op (checked: same mesh, reads 0): ordering only, as ttsim "
            "runs a collective as one command")

#: Op-specific hints, keyed by the op's path below ``ttsim`` (as EXTENSIONS is).
PER_OP: dict[str, dict[str, str]] = {
    "sigmoid": {"mode": "SigmoidMode accuracy choice: ttsim computes the accurate sigmoid in every mode"},
    "interleaved_to_sharded": {"keep_l1_aligned": "keeps shard pages L1-aligned: placement only"},
    "transformer.chunk_gated_delta_rule": {
        "wy_inverse": "algorithm for the chunk's WY inverse (AUTO/...): same values up to rounding",
        "eye": _HELPER_TENSOR,
        "tril": _HELPER_TENSOR,
        "ones": _HELPER_TENSOR,
        "masks": "precomputed constant helper tensors for the card's kernel; ttsim builds its own",
    },
    "experimental.nlp_create_qkv_heads_decode": {
        "overlap_qk_coregrid": "whether q's and k's output shards share cores: placement only"},
    "experimental.all_gather_async": {
        "use_optimal_ccl_for_llama": "selects Llama-tuned CCL kernels: speed only",
        "barrier_semaphore": _BARRIER},
    "experimental.reduce_scatter_minimal_async": {"barrier_semaphore": _BARRIER},
    "experimental.all_gather_minimal_matmul_async": {
        "config": "MinimalMatmulConfig: block sizes and grid of the matmul (the same fp32 sums)",
        "barrier_semaphore": _BARRIER,
        "force_transpose": "the kernel's internal operand order (True, the default, is the plain product; False "
                           "is refused)"},
    "experimental.matmul_reduce_scatter_async": {
        "barrier_semaphore": _BARRIER,
        "memory_config_mm": "placement of the matmul output",
        "memory_config_rs": "placement of the reduce-scatter output",
        "intermediate_memory_config_rs": "placement of the reduce-scatter's staging buffer"},
    "conv1d": {"compute_config": "math fidelity / fp32 accumulation: ttsim accumulates in fp32"},
    "softmax": _STABLE_SOFTMAX,
    "softmax_in_place": _STABLE_SOFTMAX,
    "scale_mask_softmax": _STABLE_SOFTMAX,
    "scale_mask_softmax_in_place": _STABLE_SOFTMAX,
    "from_torch": {"preserve_nan_values": _NAN_FLAG, "enable_bfloat_opt": _NAN_FLAG},
    "deallocate": {"force": "frees even if other views share the buffer; ttsim tensors never share"},
    "open_device": _REGION_SIZES,
    "open_mesh_device": _REGION_SIZES,
    "to_torch": {"device": "device used to untilize on a card; the host result is the same"},
    "reshape": {
        "pad_value": "fills tile padding only; logical values unchanged (ttsim's device padding reads as 0)",
        "reshape_tile_mode": "program-cache policy for the tile reshape map: speed only",
        "skip_padding_fill": "skips filling tile padding: logical values unchanged",
    },
    "set_fabric_config": {
        "reliability_mode": "how strictly the fabric initialises its links; collectives' values unchanged",
        "num_planes": "ethernet planes the fabric routes over: bandwidth only",
        "fabric_tensix_config": "whether tensix cores help move fabric traffic: speed only",
        "fabric_udm_mode": "fabric unified-datamovement mode: data movement only",
        "fabric_manager_mode": "who manages the fabric (host or firmware): control only",
        "router_config": "fabric router tuning: speed only",
    },
    "permute": _TILE_PADDING,
    "slice": _TILE_PADDING,
    "transpose": _TILE_PADDING,
}


def hint(op: str, param: str) -> str | None:
    """Why ``param`` of ``op`` cannot change values, or None if it must change them (or be refused)."""
    return PER_OP.get(op, {}).get(param) or ANY_OP.get(param)


# -- attributes of config objects ------------------------------------------------------
#: The same rule for the fields of config objects (program configs, compute-kernel configs,
#: memory configs): a field either changes values as on a card (some test passes it to the
#: constructor, to check the value or the refusal), or is listed here as a hint.
_GRID = "the core grid the kernel runs on"
_BLOCKING = "how the kernel blocks the matmul over cores and L1: the same fp32 sums"
_MATMUL_SCHEDULE = {
    "compute_with_storage_grid_size": _GRID,
    "in0_block_w": _BLOCKING,
    "out_subblock_h": _BLOCKING,
    "out_subblock_w": _BLOCKING,
    "out_block_h": _BLOCKING,
    "out_block_w": _BLOCKING,
    "per_core_M": _BLOCKING,
    "per_core_N": _BLOCKING,
    "allowed_worker_cores": _GRID,
    "fuse_batch": "folds a's batch into M: the same products",
    "transpose_mcast": "multicast direction of the 2D kernel: data movement only",
    "mcast_in0": "which operand the 1D kernel multicasts: data movement only",
    "gather_in0": "ring-gathers in0 across cores: data movement only",
    "hop_cores": "cores the in0 ring hops over: data movement only",
    "num_global_cb_receivers": "receivers of the prefetcher's global circular buffer: data movement only",
    "stream_in1": "streams in1 from DRAM instead of holding it in L1: data movement only",
    "num_workers_per_dram_bank": "worker cores reading each DRAM bank: data movement only",
}
_PRECISION = "precision / speed of the card's math: ttsim accumulates in fp32 (card results stay within tt-metal's bars)"



def _schedule(*fields: str) -> dict[str, str]:
    return {f: _MATMUL_SCHEDULE[f] for f in fields}


_REUSE = ("compute_with_storage_grid_size", "in0_block_w", "out_subblock_h", "out_subblock_w", "per_core_M",
          "per_core_N", "allowed_worker_cores")
_MCAST = _REUSE + ("out_block_h", "out_block_w", "fuse_batch")

_MINIMAL_BLOCKS = "block size of the minimal matmul: the same fp32 sums"
#: not hints, never listed: fused_activation (modelled), untilize_out (refused); SDPA's chunk sizes (modelled)
CONFIG_FIELDS: dict[str, dict[str, str]] = {
    "MatmulMultiCoreReuseProgramConfig": _schedule(*_REUSE),
    "MatmulMultiCoreReuseMultiCastProgramConfig": _schedule(*_MCAST, "transpose_mcast"),
    "MatmulMultiCoreReuseMultiCast1DProgramConfig": _schedule(*_MCAST, "mcast_in0", "gather_in0", "hop_cores",
                                                              "num_global_cb_receivers", "stream_in1"),
    "MatmulMultiCoreReuseMultiCastDRAMShardedProgramConfig": _schedule("in0_block_w", "per_core_M", "per_core_N",
                                                                       "num_workers_per_dram_bank"),
    "MinimalMatmulConfig": {"M_block_size": _MINIMAL_BLOCKS, "K_block_size": _MINIMAL_BLOCKS,
                            "N_block_size": _MINIMAL_BLOCKS, "subblock_h": _MINIMAL_BLOCKS,
                            "subblock_w": _MINIMAL_BLOCKS, "compute_with_storage_grid_size": _GRID},
    "Conv1dConfig": {
        "reallocate_halo_output": "moves the halo output to defragment L1: placement only",
        "config_tensors_in_dram": "where the conv's config tensors live: placement only",
        "act_block_h_override": "activation block height of the conv kernel: the same fp32 sums",
        "act_block_w_div": "activation block width split: the same fp32 sums",
        "reshard_if_not_optimal": "lets the op reshard its input: placement only",
        "override_sharding_config": "uses core_grid / shard_layout as given: placement only",
        "shard_layout": "how the conv shards its work (height/width/block): placement only",
        "core_grid": "which cores run the conv",
        "transpose_shards": "shard orientation: placement only",
        "enable_act_double_buffer": "double-buffers the activation: speed only",
        "enable_weights_double_buffer": "double-buffers the weights: speed only",
        "full_inner_dim": "keeps the full inner dim per core: the same fp32 sums",
        "enable_kernel_stride_folding": "folds the stride into the kernel: the same products",
        "enable_activation_reuse": "reuses activation rows between image rows: speed only",
        "force_split_reader": "splits the reader over two data-movement cores: speed only",
        "override_output_sharding_config": "output placement as given: placement only",
    },
    "SDPAProgramConfig": {
        "compute_with_storage_grid_size": _GRID,
        "sub_core_grids": _GRID,
        "exp_approx_mode": _PRECISION,
        "max_cores_per_head_batch": "how many cores share one head's work: the same sums",
        "max_k_splits": "splits a decode row's keys over cores (flash-decode): the same online softmax",
        "matmul_math_fidelity": _PRECISION,
        "segmented_accumulation": "accumulates chunk partials in segments: the same fp32 sums",
    },
    "WormholeComputeKernelConfig": {
        "math_fidelity": _PRECISION,
        "math_approx_mode": _PRECISION,
        "fp32_dest_acc_en": _PRECISION,
        "packer_l1_acc": _PRECISION,
        "dst_full_sync_en": "synchronisation of the destination registers: speed only",
        "throttle_level": "throttles the math engine (power): speed only",
    },
    "MemoryConfig": {
        "memory_layout": "placement (interleaved / sharded) of a tensor",
        "buffer_type": "placement (DRAM / L1) of a tensor",
        "shard_spec": "placement of a sharded tensor's shards on cores",
    },
    "DispatchCoreConfig": {
        "type": "which cores dispatch commands",
        "axis": "which cores dispatch commands",
        "fabric_tensix_config": "whether tensix cores help move fabric traffic: speed only",
    },
}


def config_hint(cls: str, field: str) -> str | None:
    """Why ``field`` of config class ``cls`` cannot change values, or None if it must change them."""
    return CONFIG_FIELDS.get(cls, {}).get(field)
