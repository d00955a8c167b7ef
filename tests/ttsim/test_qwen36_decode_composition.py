"""Composition check: one gated-delta-net decode step and one gated-attention decode step of a
tiny random-weight Qwen3.5-shaped layer, on a 1x1 (TP=1) and a 1x2 (TP=2) mesh, with the
sequence of ttnn calls production makes -- tt-metal's models/demos/blackhole/qwen36/tt/gdn/tp.py
(TPGatedDeltaNet.forward_decode, Blackhole branches: per-tap mac FIR, fp32 recurrence via
gated_attention_gated_deltanet's recurrent_gated_delta_rule_decode_ttnn), attention/tp.py
(TPAttention.forward_decode, paged, nlp decode heads, Blackhole's pad-then-reshard KV write and
unfused sigmoid gate, rope_tp.apply_partial_rope_decode) and tt_transformers' tt_all_reduce
(reduce_scatter_minimal_async on a 1xN mesh). The calls are written here from reading those files,
not copied; the reference is float64 torch on the same bf16 weights and inputs.
"""

import pytest
import torch
import torch.nn.functional as F

import ttsim as ttnn

DIM, B = 128, 2
NK, DK, NV, DV, KCONV = 2, 32, 4, 32, 4  # GDN: key heads, value heads (grouped 2:1), conv taps
NH, NKV, HD, ROPE = 4, 2, 64, 32  # attention: q heads, kv heads, head dim, partial rotary dims
BLOCK, PAGES = 32, 2  # paged KV cache: block size, pages per user
POS = [37, 50]  # each user's decode position (tokens 0..pos-1 are in the cache)


def _bf(x):
    return x.to(torch.bfloat16).float()


def _g(seed):
    return torch.Generator().manual_seed(seed)


# -- tt_transformers' TT_CCL and tt_all_reduce, as called by both layers ----------------------------

class _Ccl:
    """Double-buffered global semaphores, as tt_transformers' TT_CCL keeps them."""

    def __init__(self, mesh):
        g = mesh.compute_with_storage_grid_size()
        cores = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(g.x - 1, g.y - 1))})
        self.barrier = [ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(2)]
        self.rs = [[ttnn.create_global_semaphore(mesh, cores, 0) for _ in range(3)] for _ in range(2)]
        self.i = 0

    def cycle(self):
        self.i ^= 1
        return self.rs[self.i], self.barrier[self.i]


def _tt_all_reduce(x, mesh, ccl, dim=3):
    if list(mesh.shape) == [1, 1]:
        return x
    rs, barrier = ccl.cycle()
    return ttnn.experimental.reduce_scatter_minimal_async(
        x, persistent_output_buffers=None, dim=dim, multi_device_global_semaphore=rs, barrier_semaphore=barrier,
        num_links=1, memory_config=ttnn.DRAM_MEMORY_CONFIG, intermediate_memory_config=ttnn.DRAM_MEMORY_CONFIG,
        topology=ttnn.Topology.Linear, chunks_per_sync=10, num_workers_per_link=2, num_buffers_per_channel=2)


# -- weights: HF-layout torch tensors, then per-device blocks as production's loaders lay them out ----

def _gdn_weights(seed):
    g = _g(seed)
    key_dim, value_dim = NK * DK, NV * DV
    return dict(
        qkv=_bf(torch.randn(2 * key_dim + value_dim, DIM, generator=g) / DIM ** 0.5),
        z=_bf(torch.randn(value_dim, DIM, generator=g) / DIM ** 0.5),
        a=_bf(torch.randn(NV, DIM, generator=g) / DIM ** 0.5),
        b=_bf(torch.randn(NV, DIM, generator=g) / DIM ** 0.5),
        conv=_bf(torch.randn(2 * key_dim + value_dim, KCONV, generator=g) * 0.5),
        dt_bias=_bf(torch.randn(NV, generator=g)),
        A_log=_bf(torch.randn(NV, generator=g) * 0.5),
        norm=_bf(1 + 0.1 * torch.randn(DV, generator=g)),
        out=_bf(torch.randn(DIM, value_dim, generator=g) / value_dim ** 0.5))


def _qkv_rows_for(tp, d):
    """Rows of the fused [q | k | v] projection that device d owns (its key and value heads)."""
    nk, nv = NK // tp, NV // tp
    key_dim = NK * DK
    q = range(d * nk * DK, (d + 1) * nk * DK)
    k = range(key_dim + d * nk * DK, key_dim + (d + 1) * nk * DK)
    v = range(2 * key_dim + d * nv * DV, 2 * key_dim + (d + 1) * nv * DV)
    return [*q, *k, *v]


def _col(w_rows_per_device, mesh, dtype=ttnn.bfloat16):
    """Column-parallel weight: device d's rows, transposed to [in, out], device-major along out."""
    w = torch.cat(w_rows_per_device, dim=0).T.contiguous()
    return ttnn.from_torch(w, dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh,
                           mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1))


def _small(x, mesh, dtype=ttnn.bfloat16):
    """A per-channel vector sharded over the mesh as [1, 1, n/tp]."""
    return ttnn.from_torch(x.reshape(1, 1, -1), dtype=dtype, layout=ttnn.TILE_LAYOUT, device=mesh,
                           mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=-1))


def _replicate(x, mesh, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT):
    return ttnn.from_torch(x, dtype=dtype, layout=layout, device=mesh, mesh_mapper=ttnn.ReplicateTensorToMesh(mesh))


def _load_gdn(w, mesh, tp):
    nv, vdim = NV // tp, NV * DV // tp
    rows = [_qkv_rows_for(tp, d) for d in range(tp)]
    tw = {
        "qkvz": _col([torch.cat([w["qkv"][r], w["z"][d * vdim:(d + 1) * vdim]]) for d, r in enumerate(rows)], mesh),
        "ab": _col([torch.cat([w["a"][d * nv:(d + 1) * nv], w["b"][d * nv:(d + 1) * nv]]) for d in range(tp)], mesh),
        "out": ttnn.from_torch(w["out"].T.contiguous(), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh,
                               mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)),  # row-parallel
        "dt_bias": _small(w["dt_bias"], mesh),
        "norm_w": _replicate(w["norm"].reshape(1, 1, 1, DV), mesh),
        "conv_taps": [_small(torch.cat([w["conv"][r, j] for r in rows]), mesh) for j in range(KCONV)],
    }
    tw["neg_exp_A"] = ttnn.neg(ttnn.exp(_small(w["A_log"], mesh)))
    return tw


# -- gdn/tp.py's decode step ------------------------------------------------------------------------

def _softplus_add(a, bias):
    return ttnn.add(a, bias, activations=[ttnn.UnaryWithParam(ttnn.UnaryOpType.SOFTPLUS, 1.0, 20.0)])


def _l2_norm(x, eps=1e-6):  # gated_attention_gated_deltanet's l2_norm_ttnn (T <= 512: L1)
    mc = ttnn.L1_MEMORY_CONFIG
    norm_sq = ttnn.sum(ttnn.multiply(x, x, memory_config=mc), dim=-1, keepdim=True, memory_config=mc)
    return ttnn.multiply(x, ttnn.rsqrt(ttnn.add(norm_sq, eps, memory_config=mc), memory_config=mc), memory_config=mc)


def _recurrent_decode(q, k, v, beta, g, scale, h, device):
    """recurrent_gated_delta_rule_decode_ttnn(high_precision=True): fp32 decay, read, write, query."""
    bsz, hh, kd, vd = q.shape[0], q.shape[2], q.shape[3], v.shape[3]
    q, k, v, beta, g = (ttnn.typecast(t, ttnn.float32) for t in (q, k, v, beta, g))
    q, k = _l2_norm(q), _l2_norm(k)
    q = ttnn.multiply(q, scale, memory_config=ttnn.L1_MEMORY_CONFIG)
    q_row = ttnn.reshape(q, [bsz, hh, 1, kd], memory_config=ttnn.DRAM_MEMORY_CONFIG)
    k_row = ttnn.reshape(k, [bsz, hh, 1, kd], memory_config=ttnn.DRAM_MEMORY_CONFIG)
    v_t = ttnn.reshape(v, [bsz, hh, vd], memory_config=ttnn.L1_MEMORY_CONFIG)
    beta_t = ttnn.reshape(beta, [bsz, hh], memory_config=ttnn.L1_MEMORY_CONFIG)
    g_t = ttnn.reshape(g, [bsz, hh], memory_config=ttnn.L1_MEMORY_CONFIG)
    decay_t = ttnn.exp(g_t, memory_config=ttnn.L1_MEMORY_CONFIG)
    h = ttnn.to_memory_config(h, ttnn.DRAM_MEMORY_CONFIG)
    cfg = ttnn.WormholeComputeKernelConfig(math_fidelity=ttnn.MathFidelity.HiFi2, math_approx_mode=False,
                                           fp32_dest_acc_en=True, packer_l1_acc=True)
    grid = device.compute_with_storage_grid_size()
    prog = ttnn.MatmulMultiCoreReuseProgramConfig(compute_with_storage_grid_size=grid, in0_block_w=kd // 32,
                                                  out_subblock_h=1, out_subblock_w=min(2, vd // 32), per_core_M=1,
                                                  per_core_N=vd // 32)
    h = ttnn.multiply(h, ttnn.reshape(decay_t, [bsz, hh, 1, 1], memory_config=ttnn.L1_MEMORY_CONFIG))
    v_read = ttnn.reshape(ttnn.matmul(k_row, h, memory_config=None, program_config=prog, compute_kernel_config=cfg),
                          [bsz, hh, vd], memory_config=None)
    delta = ttnn.subtract(v_t, v_read, memory_config=None)
    # fused_decay_and_write_ttnn(apply_decay=False): h + beta * (k outer delta)
    k_col = ttnn.to_memory_config(ttnn.reshape(ttnn.reshape(k_row, [bsz, hh, kd]), [bsz, hh, kd, 1]),
                                  ttnn.DRAM_MEMORY_CONFIG)
    d_row = ttnn.to_memory_config(ttnn.reshape(delta, [bsz, hh, 1, vd]), ttnn.DRAM_MEMORY_CONFIG)
    outer = ttnn.matmul(k_col, d_row, memory_config=None, program_config=None, compute_kernel_config=cfg)
    outer = ttnn.multiply(outer, ttnn.reshape(beta_t, [bsz, hh, 1, 1], memory_config=ttnn.L1_MEMORY_CONFIG))
    h = ttnn.add(h, outer)
    o = ttnn.matmul(q_row, h, memory_config=None, program_config=prog, compute_kernel_config=cfg)
    return ttnn.reshape(o, [bsz, 1, hh, vd], memory_config=None), h


def _gdn_decode(x, tw, conv_states, rec_state, mesh, ccl, tp):
    nk, nv = NK // tp, NV // tp
    kd, qz = nk * DK, (2 * NK * DK + NV * DV) // tp
    az, vdim = qz + NV * DV // tp, NV * DV // tp
    L1 = ttnn.L1_MEMORY_CONFIG
    cfg = ttnn.init_device_compute_kernel_config(mesh.arch(), math_fidelity=ttnn.MathFidelity.HiFi2,
                                                 fp32_dest_acc_en=True, packer_l1_acc=True)
    x = ttnn.reshape(x, (1, x.shape[-2], x.shape[-1]))
    bsz = x.shape[-2]
    qkvz = ttnn.linear(x, tw["qkvz"], compute_kernel_config=cfg, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    qkv = ttnn.slice(qkvz, (0, 0, 0), (1, bsz, qz))
    z = ttnn.slice(qkvz, (0, 0, qz), (1, bsz, az))
    ab = ttnn.linear(x, tw["ab"], compute_kernel_config=cfg, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    a = ttnn.slice(ab, (0, 0, 0), (1, bsz, nv))
    b = ttnn.slice(ab, (0, 0, nv), (1, bsz, 2 * nv))
    st = conv_states
    for j in range(KCONV - 1):  # the shift register moves in place (fixed addresses for the trace)
        ttnn.copy(st[j + 1], st[j])
    ttnn.copy(qkv, st[KCONV - 1])
    conv = ttnn.multiply(st[0], tw["conv_taps"][0], memory_config=L1)  # Blackhole: the per-tap chain
    for j in range(1, KCONV):
        conv = ttnn.mac(st[j], tw["conv_taps"][j], conv)
    conv = ttnn.silu(conv, memory_config=L1)
    q = ttnn.reshape(ttnn.slice(conv, (0, 0, 0), (1, bsz, kd)), (bsz, nk, DK))
    k = ttnn.reshape(ttnn.slice(conv, (0, 0, kd), (1, bsz, 2 * kd)), (bsz, nk, DK))
    v = ttnn.reshape(ttnn.slice(conv, (0, 0, 2 * kd), (1, bsz, qz)), (bsz, nv, DV))
    q = ttnn.repeat_interleave(q, nv // nk, dim=1)
    k = ttnn.repeat_interleave(k, nv // nk, dim=1)
    q = ttnn.reshape(q, (bsz, 1, nv, DK), memory_config=L1)
    k = ttnn.reshape(k, (bsz, 1, nv, DK), memory_config=L1)
    v = ttnn.reshape(v, (bsz, 1, nv, DV), memory_config=L1)
    beta = ttnn.reshape(ttnn.sigmoid(b, memory_config=L1), (bsz, 1, nv))
    g = ttnn.multiply(tw["neg_exp_A"], _softplus_add(a, tw["dt_bias"]), memory_config=L1)
    g = ttnn.reshape(g, (bsz, 1, nv))
    o, new_rec = _recurrent_decode(q, k, v, beta, g, DK ** -0.5, rec_state, mesh)
    if new_rec.memory_config().buffer_type != ttnn.BufferType.DRAM:
        new_rec = ttnn.to_memory_config(new_rec, ttnn.DRAM_MEMORY_CONFIG)
    out_n = ttnn.rms_norm(ttnn.reshape(o, (bsz, nv, DV)), weight=tw["norm_w"], epsilon=1e-6, memory_config=L1)
    out_f = ttnn.reshape(out_n, (1, bsz, vdim))
    gated = ttnn.multiply(out_f, ttnn.silu(z, memory_config=L1), memory_config=L1)
    partial = ttnn.linear(gated, tw["out"], compute_kernel_config=cfg, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    partial = ttnn.reshape(partial, (1, 1, bsz, partial.shape[-1]))
    return _tt_all_reduce(partial, mesh, ccl), new_rec


def _gdn_reference(x, w, hist, state):
    """float64 HF Qwen3-Next gated delta net, one decode token per user."""
    x, hist, state = x.double(), hist.double(), state.double()
    w = {n: t.double() for n, t in w.items()}
    qkv = x @ w["qkv"].T  # [B, qkv]
    window = torch.cat([hist, qkv[:, None]], dim=1)  # [B, K, qkv]: the K-1 past inputs and this one
    conv = F.silu((window * w["conv"].T[None]).sum(1))
    key_dim = NK * DK
    q = conv[:, :key_dim].reshape(B, NK, DK)
    k = conv[:, key_dim:2 * key_dim].reshape(B, NK, DK)
    v = conv[:, 2 * key_dim:].reshape(B, NV, DV)
    q = q / q.norm(dim=-1, keepdim=True) * DK ** -0.5
    k = k / k.norm(dim=-1, keepdim=True)
    q, k = q.repeat_interleave(NV // NK, 1), k.repeat_interleave(NV // NK, 1)
    beta = torch.sigmoid(x @ w["b"].T)
    g = -w["A_log"].exp() * F.softplus(x @ w["a"].T + w["dt_bias"])
    s = state * g.exp()[..., None, None]
    delta = (v - torch.einsum("bhkv,bhk->bhv", s, k)) * beta[..., None]
    s = s + k[..., :, None] * delta[..., None, :]
    o = torch.einsum("bhkv,bhk->bhv", s, q)
    o = o * torch.rsqrt(o.square().mean(-1, keepdim=True) + 1e-6) * w["norm"]
    o = o.reshape(B, NV * DV) * F.silu(x @ w["z"].T)
    return o @ w["out"].T, s


# -- attention/tp.py's decode step --------------------------------------------------------------------

def _attn_weights(seed):
    g = _g(seed)
    return dict(
        qg=_bf(torch.randn(NH * 2 * HD, DIM, generator=g) / DIM ** 0.5),  # per head [q_h | gate_h]
        k=_bf(torch.randn(NKV * HD, DIM, generator=g) / DIM ** 0.5),
        v=_bf(torch.randn(NKV * HD, DIM, generator=g) / DIM ** 0.5),
        o=_bf(torch.randn(DIM, NH * HD, generator=g) / (NH * HD) ** 0.5),
        q_norm=_bf(0.1 * torch.randn(HD, generator=g)), k_norm=_bf(0.1 * torch.randn(HD, generator=g)))


def _load_attn(w, mesh, tp):
    nh, nkv = NH // tp, NKV // tp
    return {
        "wqkv": _col([w["qg"][d * nh * 2 * HD:(d + 1) * nh * 2 * HD] for d in range(tp)], mesh),
        "wk": _col([w["k"][d * nkv * HD:(d + 1) * nkv * HD] for d in range(tp)], mesh),
        "wv": _col([w["v"][d * nkv * HD:(d + 1) * nkv * HD] for d in range(tp)], mesh),
        "wo": ttnn.from_torch(w["o"].T.contiguous(), dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh,
                              mesh_mapper=ttnn.ShardTensorToMesh(mesh, dim=0)),
        "q_norm": _replicate((w["q_norm"] + 1.0).reshape(1, 1, 1, HD), mesh),  # HF zero-centred (1 + w)
        "k_norm": _replicate((w["k_norm"] + 1.0).reshape(1, 1, 1, HD), mesh),
    }


def _partial_rope_decode(x, cos, sin, n_heads, bsz):  # rope_tp.apply_partial_rope_decode
    hd = x.shape[-1]
    x_rope = ttnn.slice(x, (0, 0, 0, 0), (1, bsz, n_heads, ROPE))
    x_pass = ttnn.slice(x, (0, 0, 0, ROPE), (1, bsz, n_heads, hd))
    r1 = ttnn.slice(x_rope, (0, 0, 0, 0), (1, bsz, n_heads, ROPE // 2))
    r2 = ttnn.slice(x_rope, (0, 0, 0, ROPE // 2), (1, bsz, n_heads, ROPE))
    x_rot = ttnn.concat([ttnn.neg(r2), r1], dim=-1)
    roped = ttnn.add(ttnn.multiply(x_rope, cos), ttnn.multiply(x_rot, sin))
    roped = ttnn.to_memory_config(roped, ttnn.DRAM_MEMORY_CONFIG)
    x_pass = ttnn.to_memory_config(x_pass, ttnn.DRAM_MEMORY_CONFIG)
    return ttnn.concat([roped, x_pass], dim=-1)


def _height_shard(bsz, mesh):
    """One user per core, a grid-width-aligned rectangle (create_sharded_memory_config, (TILE, HD) shards)."""
    gx = min(bsz, mesh.compute_with_storage_grid_size().x)
    grid = ttnn.CoreRangeSet({ttnn.CoreRange(ttnn.CoreCoord(0, 0), ttnn.CoreCoord(gx - 1, bsz // gx - 1))})
    return ttnn.create_sharded_memory_config(shape=(ttnn.TILE_SIZE, HD), core_grid=grid,
                                             strategy=ttnn.ShardStrategy.HEIGHT,
                                             orientation=ttnn.ShardOrientation.ROW_MAJOR,
                                             use_height_and_width_as_shard_shape=True)


def _attn_decode(x, tw, keys, values, cur_pos, page_table, cos, sin, mesh, ccl, tp):
    nh, nkv = NH // tp, NKV // tp
    L1 = ttnn.L1_MEMORY_CONFIG
    bsz = x.shape[-2]
    cfg = ttnn.init_device_compute_kernel_config(mesh.arch(), math_fidelity=ttnn.MathFidelity.HiFi2,
                                                 fp32_dest_acc_en=True, packer_l1_acc=True)
    qg, kp, vp = (ttnn.linear(x, tw[n], compute_kernel_config=cfg, memory_config=ttnn.DRAM_MEMORY_CONFIG)
                  for n in ("wqkv", "wk", "wv"))
    # _make_heads_decode (interleaved [q; gate] weight): split, re-flatten, one fused head split
    qg_r = ttnn.reshape(qg, (1, bsz, nh, 2 * HD), memory_config=L1)
    q_part = ttnn.slice(qg_r, (0, 0, 0, 0), (1, bsz, nh, HD), memory_config=L1)
    gate_part = ttnn.slice(qg_r, (0, 0, 0, HD), (1, bsz, nh, 2 * HD), memory_config=L1)
    q_flat = ttnn.reshape(q_part, (1, 1, bsz, nh * HD), memory_config=L1)
    gate = ttnn.reshape(gate_part, (1, 1, bsz, nh * HD), memory_config=L1)
    qkv = ttnn.concat([q_flat, kp, vp], dim=-1, memory_config=L1)
    q, k, v = ttnn.experimental.nlp_create_qkv_heads_decode(qkv, num_heads=nh, num_kv_heads=nkv,
                                                           memory_config=ttnn.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    q, k, v = (ttnn.sharded_to_interleaved(t, L1) for t in (q, k, v))
    gate = ttnn.reshape(gate, (1, bsz, nh, HD), memory_config=L1)  # Blackhole: the gate is not kept flat
    # _qk_norm, Blackhole: rms_norm then the (1 + w) scale as a multiply
    q = ttnn.multiply(ttnn.rms_norm(q, epsilon=1e-6, memory_config=L1), tw["q_norm"], memory_config=L1)
    k = ttnn.multiply(ttnn.rms_norm(k, epsilon=1e-6, memory_config=L1), tw["k_norm"], memory_config=L1)
    q = _partial_rope_decode(q, cos, sin, nh, bsz)
    k = _partial_rope_decode(k, cos, sin, nkv, bsz)
    grid = mesh.compute_with_storage_grid_size()
    sdpa_cfg = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=(grid.x, grid.y), exp_approx_mode=False,
                                      q_chunk_size=0, k_chunk_size=0)
    kv_cfg = _height_shard(bsz, mesh)
    # Blackhole's KV write: pad the heads to a tile, reshard one user per core, write both caches
    k_sh = ttnn.to_memory_config(ttnn.pad(k, [1, bsz, 32, HD], [0, 0, 0, 0], 0.0, memory_config=L1), kv_cfg)
    v_sh = ttnn.to_memory_config(ttnn.pad(v, [1, bsz, 32, HD], [0, 0, 0, 0], 0.0, memory_config=L1), kv_cfg)
    ttnn.experimental.paged_update_cache(keys, k_sh, update_idxs_tensor=cur_pos, page_table=page_table)
    ttnn.experimental.paged_update_cache(values, v_sh, update_idxs_tensor=cur_pos, page_table=page_table)
    attn = ttnn.transformer.paged_scaled_dot_product_attention_decode(
        q, keys, values, page_table_tensor=page_table, cur_pos_tensor=cur_pos, scale=HD ** -0.5,
        program_config=sdpa_cfg, memory_config=L1)
    gated = ttnn.multiply(attn, ttnn.sigmoid(gate, memory_config=L1), memory_config=L1)  # Blackhole: unfused
    # _concat_heads_decode
    out = ttnn.experimental.nlp_concat_heads_decode(ttnn.to_memory_config(gated, _height_shard(bsz, mesh)),
                                                    num_heads=nh)
    out = ttnn.sharded_to_interleaved(out, L1)
    if out.shape[-2] != bsz:
        out = ttnn.slice(out, (0, 0, 0, 0), (1, 1, bsz, nh * HD), memory_config=L1)
    out = ttnn.reshape(out, (1, bsz, nh * HD), memory_config=L1)
    partial = ttnn.linear(out, tw["wo"], compute_kernel_config=cfg, memory_config=ttnn.DRAM_MEMORY_CONFIG)
    return _tt_all_reduce(ttnn.reshape(partial, (1, 1, bsz, partial.shape[-1])), mesh, ccl)


def _rope_ref(x, cos, sin):
    r, rest = x[..., :ROPE], x[..., ROPE:]
    rot = torch.cat([-r[..., ROPE // 2:], r[..., :ROPE // 2]], dim=-1)
    return torch.cat([r * cos + rot * sin, rest], dim=-1)


def _attn_reference(x, w, past_k, past_v, cos, sin):
    """float64 Qwen3.5 gated attention, one decode token per user; past_k/v [B, NKV, S, HD] hold
    positions 0..pos-1 (already normed and rotated)."""
    x = x.double()
    w = {n: t.double() for n, t in w.items()}
    qg = (x @ w["qg"].T).reshape(B, NH, 2 * HD)
    q, gate = qg[..., :HD], qg[..., HD:]
    k = (x @ w["k"].T).reshape(B, NKV, HD)
    v = (x @ w["v"].T).reshape(B, NKV, HD)

    def norm(t, wt):
        return t * torch.rsqrt(t.square().mean(-1, keepdim=True) + 1e-6) * (1 + wt)

    q = _rope_ref(norm(q, w["q_norm"]), cos[:, None], sin[:, None])
    k = _rope_ref(norm(k, w["k_norm"]), cos[:, None], sin[:, None])
    out = torch.empty(B, NH, HD, dtype=torch.float64)
    for u in range(B):
        ks = torch.cat([past_k[u, :, :POS[u]].double(), k[u][:, None]], dim=1)  # [NKV, pos+1, HD]
        vs = torch.cat([past_v[u, :, :POS[u]].double(), v[u][:, None]], dim=1)
        for h in range(NH):
            kv = h // (NH // NKV)
            p = torch.softmax(ks[kv] @ q[u, h] * HD ** -0.5, dim=0)
            out[u, h] = p @ vs[kv]
    out = (out * torch.sigmoid(gate)).reshape(B, NH * HD)
    return out @ w["o"].T


# -- the test -----------------------------------------------------------------------------------------

def _compose(t, mesh, dim=3):
    return ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(mesh, dim=dim))


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_gdn_decode_step_with_qwen36s_calls_matches_float64(mesh_device):
    tp = mesh_device.get_num_devices()
    w = _gdn_weights(1)
    g = _g(2)
    x = _bf(torch.randn(B, DIM, generator=g))
    hist = _bf(torch.randn(B, KCONV - 1, 2 * NK * DK + NV * DV, generator=g))  # the K-1 past conv inputs
    state = torch.randn(B, NV, DK, DV, generator=g) * 0.1
    tw = _load_gdn(w, mesh_device, tp)
    rows = [_qkv_rows_for(tp, d) for d in range(tp)]
    # conv_states[0] is the shifted-out slot; [1..K-1] hold the past inputs (device-major channels)
    hist_dev = torch.cat([hist[..., r] for r in rows], dim=-1)
    conv_states = [ttnn.from_torch(torch.zeros(1, B, hist_dev.shape[-1]) if j == 0 else hist_dev[:, j - 1][None],
                                   dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh_device,
                                   mesh_mapper=ttnn.ShardTensorToMesh(mesh_device, dim=-1)) for j in range(KCONV)]
    rec = ttnn.from_torch(state, dtype=ttnn.float32, layout=ttnn.TILE_LAYOUT, device=mesh_device,
                          mesh_mapper=ttnn.ShardTensorToMesh(mesh_device, dim=1))
    tx = _replicate(x.reshape(1, 1, B, DIM), mesh_device)
    out, new_rec = _gdn_decode(tx, tw, conv_states, rec, mesh_device, _Ccl(mesh_device), tp)
    want, want_state = _gdn_reference(x, w, hist, state)
    got = _compose(out, mesh_device).reshape(B, DIM)  # reduce-scattered along dim 3 at TP=2
    pcc = ttnn.pearson_correlation_coefficient(want, got.double())
    assert pcc >= 0.99, pcc
    got_state = _compose(new_rec, mesh_device, dim=1)
    assert ttnn.pearson_correlation_coefficient(want_state, got_state.double()) >= 0.999
    # the conv window shifted in place: slot K-1 now holds this token's projection
    assert list(_compose(conv_states[-1], mesh_device, dim=-1).shape) == [1, B, hist_dev.shape[-1]]


@pytest.mark.parametrize("mesh_device", [1, 2], indirect=True, ids=["tp1", "tp2"])
def test_attention_decode_step_with_qwen36s_calls_matches_float64(mesh_device):
    tp = mesh_device.get_num_devices()
    w = _attn_weights(3)
    g = _g(4)
    x = _bf(torch.randn(B, DIM, generator=g))
    s = BLOCK * PAGES
    past_k = _bf(torch.randn(B, NKV, s, HD, generator=g))
    past_v = _bf(torch.randn(B, NKV, s, HD, generator=g))
    # paged cache: user u's page p at block perm[u * PAGES + p]
    perm = torch.randperm(B * PAGES, generator=g)
    blocks_k = torch.zeros(B * PAGES, NKV, BLOCK, HD)
    blocks_v = torch.zeros(B * PAGES, NKV, BLOCK, HD)
    for u in range(B):
        for p in range(PAGES):
            blocks_k[perm[u * PAGES + p]] = past_k[u, :, p * BLOCK:(p + 1) * BLOCK]
            blocks_v[perm[u * PAGES + p]] = past_v[u, :, p * BLOCK:(p + 1) * BLOCK]
    kv_mapper = ttnn.ShardTensorToMesh(mesh_device, dim=1)
    keys = ttnn.from_torch(blocks_k, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh_device,
                           mesh_mapper=kv_mapper)
    values = ttnn.from_torch(blocks_v, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=mesh_device,
                             mesh_mapper=kv_mapper)
    page_table = _replicate(perm.reshape(B, PAGES).to(torch.int32), mesh_device, ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
    cur_pos = _replicate(torch.tensor(POS, dtype=torch.int32), mesh_device, ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, ROPE, 2).float() / ROPE))
    ang = torch.tensor(POS, dtype=torch.float32)[:, None] * inv_freq[None]
    cos, sin = _bf(torch.cat([ang, ang], -1).cos()), _bf(torch.cat([ang, ang], -1).sin())
    tcos = _replicate(cos.reshape(1, B, 1, ROPE), mesh_device)
    tsin = _replicate(sin.reshape(1, B, 1, ROPE), mesh_device)
    tx = _replicate(x.reshape(1, 1, B, DIM), mesh_device)
    out = _attn_decode(tx, _load_attn(w, mesh_device, tp), keys, values, cur_pos, page_table, tcos, tsin,
                       mesh_device, _Ccl(mesh_device), tp)
    want = _attn_reference(x, w, past_k, past_v, cos.double(), sin.double())
    got = _compose(out, mesh_device).reshape(B, DIM)
    pcc = ttnn.pearson_correlation_coefficient(want, got.double())
    assert pcc >= 0.99, pcc
    # the step wrote this token's K into the cache at each user's position (page POS // BLOCK)
    cache = _compose(keys, mesh_device, dim=1)
    for u in range(B):
        row = cache[perm[u * PAGES + POS[u] // BLOCK], :, POS[u] % BLOCK]
        assert row.abs().sum() > 0 and not torch.equal(row, blocks_k[perm[u * PAGES + POS[u] // BLOCK], :,
                                                                          POS[u] % BLOCK].to(torch.bfloat16))
