"""The tiny Qwen3.6-style hybrid model, written only against the ttnn API.

It never imports ttsim or ttnn: the ttnn-like module and the mesh device are constructor
arguments, so the code that runs on the fake is the code that runs on cards.

Layout conventions (per chip; ``_c`` = this chip's share under TP):

* residual stream ``[1, 1, T, hidden]`` bf16 TILE (prefill: T tokens of one sequence;
  decode: T = B batch rows, one token each).
* Linear weights are stored ``[in, out]``. TP: q/k/v, in_proj_qkvz, in_proj_ba and MLP
  gate/up are split by output column (per head for attention/GDN), o_proj, out_proj and
  down_proj by input row; their partial sums are ``all_reduce``d. Embedding, norms and
  the LM head are replicated, so logits are replicated on every chip.
* Partial RoPE (HF rotate_half on the first ``head_dim // 4`` channels) is
  ``x * cos + (x @ R) * sin`` with full-width tables (cos = 1, sin = 0 past rotary_dim)
  and a signed permutation ``R``: one formula for prefill (table rows by position) and
  decode (rows gathered with ``ttnn.embedding`` at each row's position).
* Paged K/V cache per attention layer ``[num_blocks, kv_heads_c, block_size, head_dim]``.
  Chunked prefill writes K/V with ``paged_fill_cache`` through the page-table row
  sliced at the chunk's first page (``start % block_size == 0`` always holds since
  ``prefill_chunk`` is a multiple of ``block_size``), so a chunk at an offset fills its
  own pages from their slot 0. Both prefill paths fill the cache (decode reads it).
* Prefill attention, two paths (``sdpa_streaming``, production's ``QWEN36_SDPA_STREAMING``;
  see :mod:`model.settings`): streaming runs ``chunked_scaled_dot_product_attention`` at
  ``chunk_start_idx = start`` against the paged cache, so earlier chunks are read from
  their pages and never materialised (host memory O(chunk)); legacy materialises the
  earlier K/V (carried from the previous chunk of the same call, or read back from the
  pages for a continuation) and runs the full ``scaled_dot_product_attention`` with an
  explicit additive causal-offset mask ``[1, 1, t, start + t]`` (O(context)).
* GDN per-slot state: conv pool ``[1, 1, max_slots, (K-1) * conv_channels_c]`` (bf16,
  the last K-1 conv inputs, oldest first) and recurrent pool
  ``[max_slots, Hv_c, Dk, Dv]`` fp32. Decode gathers/scatters the conv state with a
  one-hot built on device from ``slots`` (rows with slot -1 have an all-zero one-hot
  row); the recurrent pool is updated in place by ``fused_recurrent_gated_delta_rule``
  with ``initial_state_block_idx=slots``. Decode attention rows at position -1 (never
  written by the SDPA decode kernel) are replaced by zeros before anything sums over rows.
* Intermediates are ``ttnn.deallocate``d at the end of prefill chunks and of decode
  (``free_intermediates``), as tt-metal models do; inside a trace capture that frees the
  trace's intermediates, so buffers allocated after capture may overlap them.
"""

from __future__ import annotations

import logging

import torch

from . import settings
from .config import ModelConfig
from .prefill_state import ChunkInputs, PrefillState
from .slot_remap import check_remap

log = logging.getLogger("model.qwen36")

#: Batch rows a decode call may have (one tile of rows).
MAX_DECODE_ROWS = 32
#: the q/k L2 norm's epsilon (production's ``l2_norm_ttnn`` default; model/reference.py's too)
L2_NORM_EPS = 1e-6


class _Scope:
    """Collects intermediates so they can be deallocated together (ttnn.deallocate)."""

    def __init__(self, ttnn):
        self.ttnn = ttnn
        self.items: list = []

    def __call__(self, t):
        self.items.append(t)
        return t

    def free(self, keep=()):
        keep_ids = {id(k) for k in keep}
        for t in self.items:
            if id(t) not in keep_ids:
                self.ttnn.deallocate(t)
        self.items.clear()


class Qwen36Model:
    def __init__(self, ttnn, mesh_device, config: ModelConfig, weights: dict, *, max_slots: int = 8,
                 num_blocks: int, dtype=None, sdpa_streaming: bool | None = None):
        """``sdpa_streaming``: the prefill attention path (None: read once from the
        environment, :func:`model.settings.sdpa_streaming`)."""
        self.ttnn = ttnn
        self.mesh_device = mesh_device
        self.config = config
        self.tp = int(mesh_device.get_num_devices())
        config.validate(self.tp)
        for name, v in (("max_slots", max_slots), ("num_blocks", num_blocks)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"Qwen36Model: {name} must be a positive int, got {v!r}")
        missing = [k for k in _expected_weight_names(config) if k not in weights]
        if missing:
            raise ValueError(f"Qwen36Model: weights is missing {len(missing)} tensors, e.g. {missing[:3]}")
        if sdpa_streaming is None:
            sdpa_streaming = settings.sdpa_streaming()
        if not isinstance(sdpa_streaming, bool):
            raise ValueError(f"Qwen36Model: sdpa_streaming must be a bool or None, got {sdpa_streaming!r}")
        self.sdpa_streaming = sdpa_streaming
        if sdpa_streaming:  # production's readiness probe looks for this line in the server log
            log.warning(settings.STREAMING_BANNER)
        self.max_slots = max_slots
        self.num_blocks = num_blocks
        self.dtype = ttnn.bfloat16 if dtype is None else dtype
        self.act_dtype = ttnn.bfloat16
        self.free_intermediates = True
        c, tp = config, self.tp
        self.nh_c = c.num_heads // tp
        self.nkv_c = c.num_kv_heads // tp
        self.hk_c = c.linear_num_key_heads // tp
        self.hv_c = c.linear_num_value_heads // tp
        self.nq_c = self.hk_c * c.linear_key_head_dim  # q (and k) channels per chip
        self.nv_c = self.hv_c * c.linear_value_head_dim
        self.conv_c = 2 * self.nq_c + self.nv_c
        self.sdpa_cfg = ttnn.SDPAProgramConfig(
            compute_with_storage_grid_size=mesh_device.compute_with_storage_grid_size(),
            q_chunk_size=c.sdpa_chunk, k_chunk_size=c.sdpa_chunk)
        self._load(weights)
        self._alloc_state()
        #: the prefill-only persistent state (model/prefill_state.py), allocated on first use
        self.prefill_state: PrefillState | None = None

    # ------------------------------------------------------------------ construction
    def _rep(self, t: torch.Tensor, dtype=None, layout=None):
        ttnn = self.ttnn
        return ttnn.from_torch(t.contiguous(), dtype=dtype or self.dtype, layout=layout or ttnn.TILE_LAYOUT,
                               device=self.mesh_device, mesh_mapper=ttnn.ReplicateTensorToMesh(self.mesh_device))

    def _shard(self, t: torch.Tensor, dim: int, dtype=None, layout=None):
        ttnn = self.ttnn
        return ttnn.from_torch(t.contiguous(), dtype=dtype or self.dtype, layout=layout or ttnn.TILE_LAYOUT,
                               device=self.mesh_device, mesh_mapper=ttnn.ShardTensorToMesh(self.mesh_device, dim))

    def _per_chip(self, blocks_fn, dim: int, dtype=None):
        """Shard the concatenation of per-chip blocks ``blocks_fn(chip)`` along ``dim``."""
        return self._shard(torch.cat([blocks_fn(ch) for ch in range(self.tp)], dim=dim), dim, dtype)

    def _load(self, w: dict) -> None:
        ttnn, c, tp = self.ttnn, self.config, self.tp
        f32 = ttnn.float32
        vec = lambda v: v.float().reshape(1, 1, 1, -1)  # noqa: E731
        self.embed = self._rep(w["embed_tokens"].float(), self.act_dtype, ttnn.ROW_MAJOR_LAYOUT)
        self.final_norm = self._rep(vec(1.0 + w["norm"].float()), self.act_dtype)
        self.lm_head = self._rep(w["lm_head"].float().T, self.dtype)
        self.layers = []
        hk, hv, dk, dv = c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim, \
            c.linear_value_head_dim
        for i in range(c.num_layers):
            p = f"layers.{i}."
            L = {
                "in_norm": self._rep(vec(1.0 + w[p + "input_layernorm"].float()), self.act_dtype),
                "post_norm": self._rep(vec(1.0 + w[p + "post_attention_layernorm"].float()), self.act_dtype),
                "gate": self._shard(w[p + "mlp.gate_proj"].float().T, -1),
                "up": self._shard(w[p + "mlp.up_proj"].float().T, -1),
                "down": self._shard(w[p + "mlp.down_proj"].float().T, -2),
            }
            if c.is_attention_layer(i):
                a = p + "self_attn."
                L["attn"] = True
                L["wq"] = self._shard(w[a + "q_proj"].float().T, -1)  # per head [query | gate]
                L["wk"] = self._shard(w[a + "k_proj"].float().T, -1)
                L["wv"] = self._shard(w[a + "v_proj"].float().T, -1)
                L["wo"] = self._shard(w[a + "o_proj"].float().T, -2)
                L["q_norm"] = self._rep(vec(1.0 + w[a + "q_norm"].float()), self.act_dtype)
                L["k_norm"] = self._rep(vec(1.0 + w[a + "k_norm"].float()), self.act_dtype)
            else:
                g = p + "linear_attn."
                L["attn"] = False
                wt = w[g + "in_proj_qkvz"].float().T  # [hidden, q | k | v | z]
                nq, nv = hk * dk, hv * dv
                cols = {"q": wt[:, :nq], "k": wt[:, nq:2 * nq], "v": wt[:, 2 * nq:2 * nq + nv],
                        "z": wt[:, 2 * nq + nv:]}
                qc, vc = self.nq_c, self.nv_c

                def qkvz_block(ch, cols=cols, qc=qc, vc=vc):
                    return torch.cat([cols["q"][:, ch * qc:(ch + 1) * qc], cols["k"][:, ch * qc:(ch + 1) * qc],
                                      cols["v"][:, ch * vc:(ch + 1) * vc], cols["z"][:, ch * vc:(ch + 1) * vc]], 1)

                L["wqkvz"] = self._per_chip(qkvz_block, -1)
                ba = w[g + "in_proj_ba"].float().T  # [hidden, b | a]
                hvc = self.hv_c
                L["wba"] = self._per_chip(lambda ch, ba=ba, hvc=hvc: torch.cat(
                    [ba[:, ch * hvc:(ch + 1) * hvc], ba[:, hv + ch * hvc:hv + (ch + 1) * hvc]], 1), -1)
                kern = w[g + "conv1d"].float()[:, 0, :].T  # [K, C], row j multiplies x[t - (K-1) + j]
                kq, kk, kv = kern[:, :nq], kern[:, nq:2 * nq], kern[:, 2 * nq:]

                def conv_block(ch, kq=kq, kk=kk, kv=kv, qc=qc, vc=vc):
                    return torch.cat([kq[:, ch * qc:(ch + 1) * qc], kk[:, ch * qc:(ch + 1) * qc],
                                      kv[:, ch * vc:(ch + 1) * vc]], 1)

                conv = torch.cat([conv_block(ch) for ch in range(tp)], 1)  # [K, tp * C_c]
                L["conv_w"] = self._shard(conv.reshape(1, 1, c.conv_kernel_size, -1), -1, self.act_dtype)
                L["conv_taps"] = [self._shard(conv[j].reshape(1, 1, 1, -1), -1, self.act_dtype)
                                  for j in range(c.conv_kernel_size)]
                L["neg_A"] = self._shard(vec(-torch.exp(w[g + "A_log"].float())), -1, f32)
                L["dt_bias"] = self._shard(vec(w[g + "dt_bias"].float()), -1, f32)
                L["gdn_norm"] = self._rep(vec(w[g + "norm"].float()), self.act_dtype)  # plain weight
                L["wout"] = self._shard(w[g + "out_proj"].float().T, -2)
            self.layers.append(L)
        # RoPE: full-width tables and the rotate_half matrix restricted to rotary_dim
        d, r = c.head_dim, c.rotary_dim
        inv = 1.0 / (c.rope_theta ** (torch.arange(0, r, 2, dtype=torch.float64) / r))
        ang = torch.arange(c.max_context, dtype=torch.float64)[:, None] * inv[None, :]
        emb = torch.cat([ang, ang], -1)
        cos = torch.ones(c.max_context, d, dtype=torch.float64)
        sin = torch.zeros(c.max_context, d, dtype=torch.float64)
        cos[:, :r], sin[:, :r] = emb.cos(), emb.sin()
        self.cos_table = self._rep(cos.float(), f32, ttnn.ROW_MAJOR_LAYOUT)
        self.sin_table = self._rep(sin.float(), f32, ttnn.ROW_MAJOR_LAYOUT)
        rot = torch.zeros(d, d)
        half = r // 2
        for j in range(half):
            rot[j + half, j] = -1.0  # out[j] = -x[j + half]
            rot[j, j + half] = 1.0  # out[j + half] = x[j]
        self.rot = self._rep(rot, self.act_dtype)
        # decode constants (data-independent; allocated once so decode can be traced)
        self.slot_ids = self._rep(torch.arange(self.max_slots, dtype=torch.float32).reshape(1, 1, 1, -1), f32)
        self.row_ids = self._rep(torch.arange(MAX_DECODE_ROWS, dtype=torch.float32).reshape(1, 1, -1, 1), f32)
        self.attn_zeros = self._rep(torch.zeros(MAX_DECODE_ROWS, self.nh_c * d), self.act_dtype,
                                    ttnn.ROW_MAJOR_LAYOUT)

    def _alloc_state(self) -> None:
        """Caches and GDN pools, zero-initialised through from_torch (never uninitialised)."""
        ttnn, c, tp = self.ttnn, self.config, self.tp
        self.k_cache, self.v_cache, self.conv_pool, self.state_pool = {}, {}, {}, {}
        for i in range(c.num_layers):
            if c.is_attention_layer(i):
                z = torch.zeros(self.num_blocks, c.num_kv_heads, c.block_size, c.head_dim)
                self.k_cache[i] = self._shard(z, 1, self.act_dtype)
                self.v_cache[i] = self._shard(z, 1, self.act_dtype)
            else:
                self.conv_pool[i] = self._shard(
                    torch.zeros(1, 1, self.max_slots, tp * (c.conv_kernel_size - 1) * self.conv_c), -1,
                    self.act_dtype)
                self.state_pool[i] = self._shard(
                    torch.zeros(self.max_slots, c.linear_num_value_heads, c.linear_key_head_dim,
                                c.linear_value_head_dim), 1, ttnn.float32)

    # ------------------------------------------------------------------ small helpers
    def _check_slot(self, slot) -> int:
        if isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < self.max_slots:
            raise ValueError(f"slot must be an int in [0, {self.max_slots}), got {slot!r}")
        return slot

    def _onehot_host(self, slot: int, shape) -> object:
        e = torch.zeros(shape)
        e.view(-1)[slot] = 1.0
        return e

    def _reduce(self, s, x):
        if self.tp == 1:
            return x
        return s(self.ttnn.all_reduce(x))

    def _rope(self, s, x, cos, sin):
        ttnn = self.ttnn
        rx = s(ttnn.matmul(x, self.rot))
        return s(ttnn.add(s(ttnn.multiply(x, cos)), s(ttnn.multiply(rx, sin))))

    def _mlp(self, s, L, x):
        ttnn = self.ttnn
        g = s(ttnn.silu(s(ttnn.linear(x, L["gate"]))))
        u = s(ttnn.linear(x, L["up"]))
        return self._reduce(s, s(ttnn.linear(s(ttnn.multiply(g, u)), L["down"])))

    def _norm(self, s, x, w):
        return s(self.ttnn.rms_norm(x, epsilon=self.config.rms_norm_eps, weight=w))

    def _block(self, s, i, x, mixer):
        """x + mixer(rmsnorm(x)); x + mlp(rmsnorm(x))."""
        ttnn, L = self.ttnn, self.layers[i]
        x = s(ttnn.add(x, mixer(self._norm(s, x, L["in_norm"]))))
        return s(ttnn.add(x, self._mlp(s, L, self._norm(s, x, L["post_norm"]))))

    def _gdn_heads(self, s, conv, rows, t):
        """conv [.., rows*t, C_c] (after SiLU) -> q, k [rows, t, Hv_c, Dk], v [rows, t, Hv_c, Dv]
        in ROW_MAJOR (no tile padding of the small head dim); q, k repeated to the value
        heads: value head j uses key head j // (Hv / Hk) (repeat_interleave)."""
        ttnn, c = self.ttnn, self.config
        dk, dv = c.linear_key_head_dim, c.linear_value_head_dim
        grp = self.hv_c // self.hk_c
        n = rows * t
        flat = s(ttnn.to_layout(s(ttnn.reshape(conv, [1, 1, n, self.conv_c])), ttnn.ROW_MAJOR_LAYOUT))

        def qk(lo):
            part = s(ttnn.slice(flat, [0, 0, 0, lo], [1, 1, n, lo + self.nq_c]))
            part = s(ttnn.reshape(self._l2_norm(s, part, n * self.hk_c, dk), [n, self.hk_c, 1, dk]))
            if grp > 1:
                part = s(ttnn.repeat(part, [1, 1, grp, 1]))
            return s(ttnn.reshape(part, [rows, t, self.hv_c, dk]))

        q, k = qk(0), qk(self.nq_c)
        v = s(ttnn.slice(flat, [0, 0, 0, 2 * self.nq_c], [1, 1, n, self.conv_c]))
        v = s(ttnn.reshape(v, [rows, t, self.hv_c, dv]))
        return q, k, v

    def _l2_norm(self, s, x, rows, d):
        """Each ``d``-wide head of ``x`` divided by its L2 norm, on the device, as production's
        qwen36 does before the delta rule (``l2_norm_ttnn``: ``rms_norm`` with ``epsilon / d``,
        times ``d ** -0.5``): ttnn 0.81.1's gated-delta-rule ops refuse ``use_qk_l2norm``.
        ``x`` [.., rows * d] ROW_MAJOR; returns [1, 1, rows, d] ROW_MAJOR."""
        ttnn = self.ttnn
        x = s(ttnn.to_layout(s(ttnn.reshape(x, [1, 1, rows, d])), ttnn.TILE_LAYOUT))
        x = s(ttnn.multiply(s(ttnn.rms_norm(x, epsilon=L2_NORM_EPS / d)), d ** -0.5))
        return s(ttnn.to_layout(x, ttnn.ROW_MAJOR_LAYOUT))

    def _gdn_gates(self, s, L, x, rows, t):
        ttnn = self.ttnn
        ba = s(ttnn.linear(x, L["wba"], dtype=ttnn.float32))  # [1, 1, n, 2 Hv_c]
        n = rows * t
        b = s(ttnn.slice(ba, [0, 0, 0, 0], [1, 1, n, self.hv_c]))
        a = s(ttnn.slice(ba, [0, 0, 0, self.hv_c], [1, 1, n, 2 * self.hv_c]))
        beta = s(ttnn.reshape(s(ttnn.sigmoid(b)), [rows, t, self.hv_c]))
        g = s(ttnn.multiply(s(ttnn.softplus(s(ttnn.add(a, L["dt_bias"])))), L["neg_A"]))
        g = s(ttnn.reshape(g, [rows, t, self.hv_c]))
        return g, beta

    def _gdn_out(self, s, L, o, z, rows, t):
        """Gated RMSNorm (plain weight) * silu(z), then out_proj (reduced across chips).
        ``o`` [rows, t, Hv_c, Dv] (any layout) is normalised as [1, 1, rows*t*Hv_c, Dv]."""
        ttnn, c = self.ttnn, self.config
        dv = c.linear_value_head_dim
        n = rows * t
        o = s(ttnn.reshape(o, [1, 1, n * self.hv_c, dv]))
        if o.layout != ttnn.TILE_LAYOUT:
            o = s(ttnn.to_layout(o, ttnn.TILE_LAYOUT))
        o = s(ttnn.rms_norm(o, epsilon=c.rms_norm_eps, weight=L["gdn_norm"]))
        z = s(ttnn.reshape(z, [1, 1, n * self.hv_c, dv]))
        o = s(ttnn.multiply(o, s(ttnn.silu(z))))
        o = s(ttnn.reshape(o, [1, 1, n, self.nv_c]))
        return self._reduce(s, s(ttnn.linear(o, L["wout"])))

    # ------------------------------------------------------------------ slots
    def reset_slot(self, slot: int) -> None:
        """Zero slot ``slot``'s conv and recurrent state in every GDN layer."""
        ttnn = self.ttnn
        slot = self._check_slot(slot)
        s = _Scope(ttnn)
        keep = self._rep(1.0 - self._onehot_host(slot, (1, 1, self.max_slots, 1)), ttnn.float32)
        keep_s = self._rep(1.0 - self._onehot_host(slot, (self.max_slots, 1, 1, 1)), ttnn.float32)
        for i in self.conv_pool:
            ttnn.copy(s(ttnn.multiply(self.conv_pool[i], keep)), self.conv_pool[i])
            ttnn.copy(s(ttnn.multiply(self.state_pool[i], keep_s)), self.state_pool[i])
        s.free()
        ttnn.deallocate(keep)
        ttnn.deallocate(keep_s)

    def gather_slots(self, remap) -> None:
        """Move per-slot state: new slot ``i`` takes old slot ``remap[i]``, in every GDN layer's
        conv pool and recurrent state pool (the paged K/V cache is addressed by page table, not
        by slot, so it stays). ``remap`` is a permutation of 0..max_slots-1 (a list of ints or a
        1-D int tensor); anything else is a ValueError naming the problem, before any device op.

        Only data movement (``slice`` of each old slot, ``concat`` in the new order, ``copy``
        back into the pool), no matmul or arithmetic, so every slot's bytes arrive unchanged;
        each chip moves its own shard (the pools are split across chips along their channels
        or heads, never along slots)."""
        ttnn = self.ttnn
        order = check_remap(remap, self.max_slots)
        for i in self.conv_pool:
            for pool, dim in ((self.conv_pool[i], 2), (self.state_pool[i], 0)):
                shape = [int(d) for d in pool.shape]
                parts = []
                for old in order:
                    start, end = [0] * len(shape), list(shape)
                    start[dim], end[dim] = old, old + 1
                    parts.append(ttnn.slice(pool, start, end))
                moved = ttnn.concat(parts, dim=dim)
                ttnn.copy(moved, pool)
                for t in (*parts, moved):
                    ttnn.deallocate(t)

    # ------------------------------------------------------------------ prefill
    # ------------------------------------------------------------------ prefill-only state
    #: the model's declaration to the generator, as upstream qwen36's model object makes it
    #: (``models/demos/qwen36/tt/model.py`` @ bdfbb052: "RoPE is host-recomputed each step, so
    #: refresh all decode trace inputs"): every decode restages its trace inputs from the host, and
    #: the sampled token is not fed back into them (model/generator.py honours it)
    _tt_vllm_always_refresh_decode_trace_inputs = True

    def bind_prefill_state(self) -> PrefillState:
        """The batch-1 prefill scratch and zero buffers, allocated on first use (upstream
        ``_bind_gdn_prefill_scratch`` -> ``_ensure_gdn_prefill_scratch``): by the prefill trace's
        warm-up when the plugin traces prefill, else by the first request."""
        if self.prefill_state is None:
            self.prefill_state = PrefillState(self)
        return self.prefill_state

    def capture_prefill_trace(self) -> int:
        """Bind the prefill state and capture one full ``prefill_chunk`` forward on persistent
        inputs against it (upstream ``capture_prefill_trace_chunked(..., capture_chunk_trace=True)``
        from ``warmup_model_prefill(enable_trace=True)``); later prefills replay it for each full
        chunk. Idempotent; returns the trace id. The captured body is the paged chunked-SDPA
        branch whatever ``sdpa_streaming`` says: a trace needs fixed shapes, and upstream's chunk
        trace is that branch (the concat path's K/V grows with every chunk)."""
        state = self.bind_prefill_state()
        if state.trace_id is not None:
            return state.trace_id
        ttnn, c = self.ttnn, self.config
        state.inputs = inputs = ChunkInputs(self)
        state.trace_id = ttnn.begin_trace_capture(self.mesh_device, cq_id=0)
        state.logits = self._chunk_forward(inputs.tokens, inputs.positions, inputs.page_table, inputs.full_page_table,
                                           c.prefill_chunk, start_tensor=inputs.start, want_logits=True)
        ttnn.end_trace_capture(self.mesh_device, state.trace_id, cq_id=0)
        return state.trace_id

    # ------------------------------------------------------------------ prefill
    def prefill(self, tokens, *, slot: int, page_table_row: torch.Tensor, start_pos: int = 0,
                traced: bool = False) -> torch.Tensor:
        """Prefill ``tokens`` (absolute positions ``start_pos ..``) of the request in ``slot``.

        Chunks of ``config.prefill_chunk``; K/V pages through ``page_table_row`` (int32
        ``[max_pages]``). The GDN layers run on the batch-1 prefill scratch
        (model/prefill_state.py): ``start_pos == 0`` resets it from the zero buffers (a fresh
        sequence), ``start_pos > 0`` (a multiple of ``prefill_chunk``) resumes it from the
        slot's state; at the end the scratch is published into the slot. ``traced``: a full
        chunk replays the captured chunk trace (:meth:`capture_prefill_trace`), the rest runs
        eagerly. Returns the last token's logits, float32 ``[vocab]`` on host.
        """
        ttnn, c = self.ttnn, self.config
        toks = self._check_tokens(tokens)
        slot = self._check_slot(slot)
        if isinstance(start_pos, bool) or not isinstance(start_pos, int) or start_pos < 0:
            raise ValueError(f"start_pos must be a non-negative int, got {start_pos!r}")
        if start_pos % c.prefill_chunk:
            raise ValueError(f"start_pos={start_pos} must be a multiple of prefill_chunk={c.prefill_chunk}")
        end = start_pos + len(toks)
        if end > c.max_context:
            raise ValueError(f"tokens: start_pos {start_pos} + {len(toks)} tokens exceeds max_context {c.max_context}")
        if not isinstance(page_table_row, torch.Tensor) or page_table_row.dim() != 1 \
                or page_table_row.is_floating_point():
            shape = tuple(page_table_row.shape) if isinstance(page_table_row, torch.Tensor) else type(page_table_row)
            raise ValueError(f"page_table_row must be a 1-D int32 torch.Tensor [max_pages], got {shape}")
        pages = -(-end // c.block_size)
        if page_table_row.numel() < pages:
            raise ValueError(f"page_table_row has {page_table_row.numel()} pages but positions up to {end - 1} "
                             f"need {pages} (block_size {c.block_size})")
        used = page_table_row[:pages]
        if bool(((used < 0) | (used >= self.num_blocks)).any()):
            raise ValueError(f"page_table_row entries for the first {pages} pages must be block ids in "
                             f"[0, {self.num_blocks}), got {used.tolist()}")
        pt_row = page_table_row.to(torch.int32)
        state = self.bind_prefill_state()
        state.begin(slot, fresh=start_pos == 0)
        # legacy: each attention layer's K/V of positions start_pos.. so far, carried chunk to chunk
        past = None if self.sdpa_streaming else {}
        logits = pt_full = None
        try:
            for cs in range(0, len(toks), c.prefill_chunk):
                chunk = toks[cs:cs + c.prefill_chunk]
                last = cs + c.prefill_chunk >= len(toks)
                if traced and state.trace_id is not None and len(chunk) == c.prefill_chunk:
                    logits = self._replay_chunk(state, chunk, pt_row, start_pos + cs, want_logits=last)
                    continue
                if pt_full is None:  # made after the replays: a replay rewrites the trace's freed scratch
                    pt_full = self._rep(pt_row.reshape(1, -1), ttnn.int32, ttnn.ROW_MAJOR_LAYOUT)
                logits = self._prefill_chunk(chunk, pt_row, pt_full, start_pos + cs, want_logits=last, past=past)
        finally:
            for kv in (past or {}).values():
                for t in kv:
                    ttnn.deallocate(t)
            if pt_full is not None:
                ttnn.deallocate(pt_full)
        state.publish(slot)
        return logits

    def _replay_chunk(self, state: PrefillState, chunk, pt_row, start, *, want_logits):
        """One full chunk through the captured chunk trace: its inputs restaged, then replayed."""
        ttnn = self.ttnn
        state.inputs.stage(self, chunk, pt_row, start)
        ttnn.execute_trace(self.mesh_device, state.trace_id, cq_id=0, blocking=False)
        return self._host_logits(state.logits) if want_logits else None

    def _host_logits(self, lg) -> torch.Tensor:
        """Device logits ``[1, 1, 1, vocab]`` as float32 ``[vocab]`` on the host (shard 0: replicated)."""
        return self.ttnn.to_torch(self.ttnn.get_device_tensors(lg)[0]).float().reshape(self.config.vocab_size)

    def _check_tokens(self, tokens) -> list[int]:
        if isinstance(tokens, torch.Tensor):
            if tokens.dim() != 1:
                raise ValueError(f"tokens must be a 1-D sequence of token ids, got a tensor of shape "
                                 f"{tuple(tokens.shape)}")
            tokens = tokens.tolist()
        try:
            toks = [int(t) for t in tokens]
        except (TypeError, ValueError):
            raise ValueError(f"tokens must be a 1-D sequence of int token ids, got {type(tokens).__name__}") from None
        if not toks:
            raise ValueError("tokens must be non-empty")
        bad = [t for t in toks if not 0 <= t < self.config.vocab_size]
        if bad:
            raise ValueError(f"tokens: id {bad[0]} is outside the vocab [0, {self.config.vocab_size})")
        return toks

    def _prefill_chunk(self, chunk, pt_row, pt_full, start, *, want_logits, past):
        """One chunk run eagerly: its inputs created for it, then :meth:`_chunk_forward`."""
        ttnn = self.ttnn
        t = len(chunk)
        s = _Scope(ttnn)
        ids = s(self._rep(torch.tensor([chunk], dtype=torch.int32), ttnn.uint32, ttnn.ROW_MAJOR_LAYOUT))
        pos = s(self._rep(torch.arange(start, start + t, dtype=torch.int32).reshape(1, t), ttnn.uint32,
                          ttnn.ROW_MAJOR_LAYOUT))
        pt_chunk = s(self._rep(self._chunk_pages(pt_row, start).reshape(1, -1).contiguous(), ttnn.int32,
                               ttnn.ROW_MAJOR_LAYOUT))
        lg = self._chunk_forward(ids, pos, pt_chunk, pt_full, t, start=start, pt_row=pt_row, past=past,
                                 want_logits=want_logits)
        out = None
        if lg is not None:
            out = self._host_logits(lg)
            ttnn.deallocate(lg)
        if self.free_intermediates:
            s.free()
        return out

    def _chunk_forward(self, ids, pos, pt_chunk, pt_full, t, *, start=None, start_tensor=None, pt_row=None,
                       past=None, want_logits):
        """``t`` tokens (``ids``/``pos`` uint32 ``[1, t]``) through every layer, the GDN layers on
        the prefill scratch (in place). The chunk's start is ``start`` (eager) or the device
        tensor ``start_tensor`` (the traced chunk; streaming SDPA only). Returns the last row's
        logits ``[1, 1, 1, vocab]`` on the device (``want_logits``), else None."""
        ttnn, c = self.ttnn, self.config
        state = self.prefill_state
        s = _Scope(ttnn)
        cos = s(ttnn.reshape(s(ttnn.embedding(pos, self.cos_table, layout=ttnn.TILE_LAYOUT)), [1, 1, t, c.head_dim]))
        sin = s(ttnn.reshape(s(ttnn.embedding(pos, self.sin_table, layout=ttnn.TILE_LAYOUT)), [1, 1, t, c.head_dim]))
        mask = None if past is None else self._causal_offset_mask(s, start, t)
        x = s(ttnn.embedding(ids, self.embed, layout=ttnn.TILE_LAYOUT))
        x = s(ttnn.reshape(x, [1, 1, t, c.hidden_size]))
        for i, L in enumerate(self.layers):
            if L["attn"]:
                mixer = lambda h, i=i: self._attn_prefill(s, i, h, t, cos, sin, pt_chunk, pt_full, start,  # noqa: E731
                                                          start_tensor, pt_row, past, mask)
            else:
                mixer = lambda h, i=i: self._gdn_prefill(s, i, h, t, state.conv[i], state.rec[i])  # noqa: E731
            x = self._block(s, i, x, mixer)
        lg = None
        if want_logits:
            xl = s(ttnn.slice(x, [0, 0, t - 1, 0], [1, 1, t, c.hidden_size]))
            lg = ttnn.linear(self._norm(s, xl, self.final_norm), self.lm_head)
        if self.free_intermediates:
            s.free(keep=[t for kv in (past or {}).values() for t in kv])  # the carried K/V outlives the chunk
        return lg

    def _split_heads(self, s, proj, t, nh, width, lo, d):
        """Columns [lo, lo + d) of each ``width``-wide head of ``proj`` [1, 1, t, nh*width]
        as [1, 1, t*nh, d] (TILE; heads follow their token)."""
        ttnn = self.ttnn
        flat = s(ttnn.reshape(proj, [1, 1, t * nh, width]))
        if width == d:
            return flat
        return s(ttnn.slice(flat, [0, 0, 0, lo], [1, 1, t * nh, lo + d]))

    def _to_head_major(self, s, x, t, nh, d):
        """[1, 1, t*nh, d] (token-major) -> [1, nh, t, d] TILE, via ROW_MAJOR (no head padding)."""
        ttnn = self.ttnn
        x = s(ttnn.reshape(s(ttnn.to_layout(x, ttnn.ROW_MAJOR_LAYOUT)), [1, t, nh, d]))
        return s(ttnn.to_layout(s(ttnn.permute(x, [0, 2, 1, 3])), ttnn.TILE_LAYOUT))

    def _attn_prefill(self, s, i, h, t, cos, sin, pt_chunk, pt_full, start, start_tensor, pt_row, past, mask):
        ttnn, c, L = self.ttnn, self.config, self.layers[i]
        d = c.head_dim
        qg = s(ttnn.linear(h, L["wq"]))
        q = self._norm(s, self._split_heads(s, qg, t, self.nh_c, 2 * d, 0, d), L["q_norm"])
        gate = self._split_heads(s, qg, t, self.nh_c, 2 * d, d, d)  # [1, 1, t*nh_c, d]
        k = self._norm(s, self._split_heads(s, s(ttnn.linear(h, L["wk"])), t, self.nkv_c, d, 0, d), L["k_norm"])
        v = self._split_heads(s, s(ttnn.linear(h, L["wv"])), t, self.nkv_c, d, 0, d)
        q = self._rope(s, self._to_head_major(s, q, t, self.nh_c, d), cos, sin)  # [1, nh_c, t, d]
        k = self._rope(s, self._to_head_major(s, k, t, self.nkv_c, d), cos, sin)
        v = self._to_head_major(s, v, t, self.nkv_c, d)
        ttnn.experimental.paged_fill_cache(self.k_cache[i], k, pt_chunk, batch_idx=0)
        ttnn.experimental.paged_fill_cache(self.v_cache[i], v, pt_chunk, batch_idx=0)
        if start_tensor is not None:  # the traced chunk: its start read on the device
            o = s(ttnn.transformer.chunked_scaled_dot_product_attention(
                q, self.k_cache[i], self.v_cache[i], pt_full, chunk_start_idx_tensor=start_tensor, scale=d ** -0.5,
                program_config=self.sdpa_cfg))
        elif past is None:  # streaming: earlier chunks are read from their pages by the kernel
            o = s(ttnn.transformer.chunked_scaled_dot_product_attention(
                q, self.k_cache[i], self.v_cache[i], pt_full, start, scale=d ** -0.5, program_config=self.sdpa_cfg))
        else:
            keys, values = self._legacy_kv(s, i, k, v, pt_row, start, past)
            o = s(ttnn.transformer.scaled_dot_product_attention(
                q, keys, values, attn_mask=mask, is_causal=False, scale=d ** -0.5, program_config=self.sdpa_cfg))
        o = s(ttnn.permute(s(ttnn.to_layout(o, ttnn.ROW_MAJOR_LAYOUT)), [0, 2, 1, 3]))  # [1, t, nh_c, d]
        o = s(ttnn.to_layout(s(ttnn.reshape(o, [1, 1, t * self.nh_c, d])), ttnn.TILE_LAYOUT))
        o = s(ttnn.multiply(o, s(ttnn.sigmoid(gate))))
        o = s(ttnn.reshape(o, [1, 1, t, self.nh_c * d]))
        return self._reduce(s, s(ttnn.linear(o, L["wo"])))

    def _chunk_pages(self, pt_row: torch.Tensor, start: int) -> torch.Tensor:
        """The page-table row from the chunk's first page: paged_fill_cache writes position 0 of
        its input to the first page it is given."""
        return pt_row[start // self.config.block_size:]

    def _causal_offset_mask(self, s, start, t):
        """Additive ``[1, 1, t, start + t]``: query row r (position start + r) sees keys <= start + r.
        Built explicitly because SDPA's ``is_causal`` aligns the diagonal at key 0, wrong past chunk 0."""
        # Built in bf16 (0 and -inf are exact there), so from_torch's rounding is a no-op, on a
        # tensor half the size (at 32k this mask is the largest host tensor of a chunk); only the
        # last t - 1 columns hold a triangle, every row sees keys 0 .. start.
        m = torch.empty((t, start + t), dtype=torch.bfloat16)
        m[:, :start + 1].zero_()
        m[:, start + 1:] = torch.full((t, t - 1), float("-inf"), dtype=torch.bfloat16).triu_()  # keys > start + r
        return s(self._rep(m.reshape(1, 1, t, start + t), self.act_dtype))

    def _legacy_kv(self, s, i, k, v, pt_row, start, past):
        """K/V of positions 0 .. start + t - 1, materialised as ``[1, nkv_c, start + t, d]``; carried in
        ``past`` for the next chunk. A continuation's first chunk reads the earlier ones from the pages."""
        ttnn = self.ttnn
        if start == 0:
            keys, values = k, v
        else:
            if i not in past:
                past[i] = (self._read_pages(s, self.k_cache[i], pt_row, start),
                           self._read_pages(s, self.v_cache[i], pt_row, start))
            pk, pv = past[i]
            keys, values = ttnn.concat([pk, k], dim=2), ttnn.concat([pv, v], dim=2)
            owned = {id(x) for x in s.items}
            for old in (pk, pv):
                if id(old) not in owned:  # carried from the previous chunk: no scope owns it any more
                    ttnn.deallocate(old)
        past[i] = (keys, values)
        return keys, values

    def _read_pages(self, s, cache, pt_row, n):
        """Positions 0 .. n-1 (n a multiple of block_size) of one paged cache as ``[1, nkv_c, n, d]``:
        one slice per run of consecutive block ids, then blocks laid end to end."""
        ttnn, c = self.ttnn, self.config
        bs, d = c.block_size, c.head_dim
        blocks = [int(b) for b in pt_row[:n // bs]]
        runs = []  # [first block, count]
        for b in blocks:
            if runs and runs[-1][0] + runs[-1][1] == b:
                runs[-1][1] += 1
            else:
                runs.append([b, 1])
        parts = []
        for b, cnt in runs:
            blk = s(ttnn.slice(cache, [b, 0, 0, 0], [b + cnt, self.nkv_c, bs, d]))  # [cnt, nkv_c, bs, d]
            blk = s(ttnn.permute(blk, [1, 0, 2, 3]))
            parts.append(s(ttnn.reshape(blk, [1, self.nkv_c, cnt * bs, d])))
        return parts[0] if len(parts) == 1 else s(ttnn.concat(parts, dim=2))

    def _gdn_prefill(self, s, i, h, t, conv_state, rec_state):
        """One GDN layer over ``t`` tokens of one sequence, reading and updating (in place, so a
        trace's baked addresses hold) the batch-1 scratch ``conv_state`` [1, 1, 1, (K-1) C_c] and
        ``rec_state`` [1, Hv_c, Dk, Dv]."""
        ttnn, c, L = self.ttnn, self.config, self.layers[i]
        km1 = c.conv_kernel_size - 1
        cc = self.conv_c
        qkvz = s(ttnn.linear(h, L["wqkvz"]))
        qkv = s(ttnn.slice(qkvz, [0, 0, 0, 0], [1, 1, t, cc]))
        z = s(ttnn.slice(qkvz, [0, 0, 0, cc], [1, 1, t, cc + self.nv_c]))
        prev = s(ttnn.reshape(conv_state, [1, 1, km1, cc]))
        xpad = s(ttnn.concat([prev, qkv], dim=2))  # [1, 1, K-1+t, C_c]
        conv = None
        for j, tap in enumerate(L["conv_taps"]):
            term = s(ttnn.multiply(s(ttnn.slice(xpad, [0, 0, j, 0], [1, 1, j + t, cc])), tap))
            conv = term if conv is None else s(ttnn.add(conv, term))
        conv = s(ttnn.silu(conv))
        ttnn.copy(s(ttnn.reshape(s(ttnn.slice(xpad, [0, 0, t, 0], [1, 1, t + km1, cc])), [1, 1, 1, km1 * cc])),
                  conv_state)
        q, k, v = self._gdn_heads(s, conv, 1, t)
        g, beta = self._gdn_gates(s, L, h, 1, t)
        o, final = ttnn.transformer.chunk_gated_delta_rule(q, k, v, g, beta, initial_state=rec_state,
                                                           output_final_state=True)
        s(o), s(final)
        if final.layout != ttnn.TILE_LAYOUT:
            final = s(ttnn.to_layout(final, ttnn.TILE_LAYOUT))
        ttnn.copy(final, rec_state)
        return self._gdn_out(s, L, o, z, 1, t)

    # ------------------------------------------------------------------ decode
    def decode(self, tokens, positions, page_table, slots):
        """One decode step for B rows; device-only and traceable.

        tokens uint32 ROW_MAJOR ``[1, B]``; positions int32 ``[B]`` (-1 = inactive row);
        page_table int32 ``[B, max_pages]``; slots int32 ``[B]`` (-1 = inactive).
        Returns logits ``[1, 1, B, vocab]`` bf16 TILE (replicated on every chip).
        """
        ttnn, c = self.ttnn, self.config
        b = self._check_decode_inputs(tokens, positions, page_table, slots)
        s = _Scope(ttnn)
        # per-row RoPE tables at max(pos, 0)
        pos_u = s(ttnn.typecast(s(ttnn.maximum(positions, 0)), ttnn.uint32))
        pos_u = s(ttnn.reshape(pos_u, [1, b]))
        cos = s(ttnn.reshape(s(ttnn.embedding(pos_u, self.cos_table, layout=ttnn.TILE_LAYOUT)), [1, b, 1, c.head_dim]))
        sin = s(ttnn.reshape(s(ttnn.embedding(pos_u, self.sin_table, layout=ttnn.TILE_LAYOUT)), [1, b, 1, c.head_dim]))
        # Rows at position -1 are skipped by the SDPA decode kernel, so their output rows hold
        # whatever the buffer held (possibly NaN/inf garbage). A later GDN layer's one-hot
        # conv-state scatter sums over ALL rows (0 * NaN = NaN would poison every slot), so
        # those rows are replaced by zeros: an embedding lookup picks row r (active) or row
        # B + r of [attn_out; zeros] (inactive) -- a select that NaN cannot leak through.
        pos_f = s(ttnn.to_layout(s(ttnn.reshape(s(ttnn.typecast(positions, ttnn.float32)), [1, 1, b, 1])),
                                 ttnn.TILE_LAYOUT))
        inactive = s(ttnn.eq(pos_f, -1.0))
        rows = s(ttnn.slice(self.row_ids, [0, 0, 0, 0], [1, 1, b, 1]))
        sel = s(ttnn.add(rows, s(ttnn.multiply(inactive, float(b)))))
        sel = s(ttnn.reshape(s(ttnn.to_layout(s(ttnn.typecast(sel, ttnn.uint32)), ttnn.ROW_MAJOR_LAYOUT)), [1, b]))
        # one-hot of slots [1, 1, B, max_slots] (all zero for slot -1)
        slot_f = s(ttnn.to_layout(s(ttnn.reshape(s(ttnn.typecast(slots, ttnn.float32)), [1, 1, b, 1])),
                                  ttnn.TILE_LAYOUT))
        onehot = s(ttnn.typecast(s(ttnn.eq(slot_f, self.slot_ids)), self.act_dtype))
        keep = s(ttnn.transpose(s(ttnn.sum(onehot, dim=2, keepdim=True)), -2, -1))  # [1, 1, max_slots, 1]
        keep = s(ttnn.neg(s(ttnn.subtract(keep, 1.0))))
        x = s(ttnn.embedding(tokens, self.embed, layout=ttnn.TILE_LAYOUT))
        x = s(ttnn.reshape(x, [1, 1, b, c.hidden_size]))
        for i, L in enumerate(self.layers):
            if L["attn"]:
                mixer = lambda h, i=i: self._attn_decode(s, i, h, b, cos, sin, positions, page_table, sel)  # noqa: E731
            else:
                mixer = lambda h, i=i: self._gdn_decode(s, i, h, b, slots, onehot, keep)  # noqa: E731
            x = self._block(s, i, x, mixer)
        logits = ttnn.linear(self._norm(s, x, self.final_norm), self.lm_head)
        if self.free_intermediates:
            s.free()
        return logits

    def _check_decode_inputs(self, tokens, positions, page_table, slots) -> int:
        ttnn = self.ttnn

        def shape(t):
            return tuple(int(d) for d in t.shape)

        for name, t in (("tokens", tokens), ("positions", positions), ("page_table", page_table), ("slots", slots)):
            if not isinstance(t, ttnn.Tensor):
                raise ValueError(f"decode: {name} must be a device ttnn.Tensor, got {type(t).__name__}")
        ts = shape(tokens)
        if len(ts) != 2 or ts[0] != 1:
            raise ValueError(f"decode: tokens must be [1, B], got shape {list(ts)}")
        b = ts[1]
        if not 1 <= b <= MAX_DECODE_ROWS:
            raise ValueError(f"decode: tokens batch B={b} must be in [1, {MAX_DECODE_ROWS}]")
        if tokens.dtype != ttnn.uint32 or tokens.layout != ttnn.ROW_MAJOR_LAYOUT:
            raise ValueError(f"decode: tokens must be uint32 ROW_MAJOR, got {tokens.dtype} {tokens.layout}")
        for name, t in (("positions", positions), ("slots", slots)):
            if shape(t) != (b,):
                raise ValueError(f"decode: {name} must be [B] = [{b}], got shape {list(shape(t))}")
            if t.dtype != ttnn.int32:
                raise ValueError(f"decode: {name} must be int32, got {t.dtype}")
        pts = shape(page_table)
        if len(pts) != 2 or pts[0] != b:
            raise ValueError(f"decode: page_table must be [B, max_pages] = [{b}, ...], got shape {list(pts)}")
        if page_table.dtype != ttnn.int32:
            raise ValueError(f"decode: page_table must be int32, got {page_table.dtype}")
        return b

    def _attn_decode(self, s, i, h, b, cos, sin, positions, page_table, sel):
        ttnn, c, L = self.ttnn, self.config, self.layers[i]
        d = c.head_dim
        qg = s(ttnn.linear(h, L["wq"]))
        q = self._norm(s, self._split_heads(s, qg, b, self.nh_c, 2 * d, 0, d), L["q_norm"])
        gate = self._split_heads(s, qg, b, self.nh_c, 2 * d, d, d)  # [1, 1, b*nh_c, d]
        k = self._norm(s, self._split_heads(s, s(ttnn.linear(h, L["wk"])), b, self.nkv_c, d, 0, d), L["k_norm"])
        v = s(ttnn.reshape(s(ttnn.linear(h, L["wv"])), [1, b, self.nkv_c, d]))
        q = self._rope(s, s(ttnn.reshape(q, [1, b, self.nh_c, d])), cos, sin)
        k = self._rope(s, s(ttnn.reshape(k, [1, b, self.nkv_c, d])), cos, sin)
        ttnn.experimental.paged_update_cache(self.k_cache[i], k, update_idxs_tensor=positions, page_table=page_table)
        ttnn.experimental.paged_update_cache(self.v_cache[i], v, update_idxs_tensor=positions, page_table=page_table)
        o = s(ttnn.transformer.paged_scaled_dot_product_attention_decode(
            q, self.k_cache[i], self.v_cache[i], page_table, cur_pos_tensor=positions, scale=d ** -0.5,
            program_config=self.sdpa_cfg))  # [1, b, nh_c, d]; rows at -1 hold stale memory
        w = self.nh_c * d
        o = s(ttnn.reshape(s(ttnn.to_layout(s(ttnn.reshape(o, [1, 1, b, w])), ttnn.ROW_MAJOR_LAYOUT)), [b, w]))
        zeros = s(ttnn.slice(self.attn_zeros, [0, 0], [b, w]))
        table = s(ttnn.concat([o, zeros], dim=0))  # rows 0..b-1 computed, b..2b-1 zero
        o = s(ttnn.reshape(s(ttnn.embedding(sel, table, layout=ttnn.TILE_LAYOUT)), [1, 1, b, w]))
        gate = s(ttnn.reshape(s(ttnn.sigmoid(gate)), [1, 1, b, w]))
        o = s(ttnn.multiply(o, gate))
        return self._reduce(s, s(ttnn.linear(o, L["wo"])))

    def _gdn_decode(self, s, i, h, b, slots, onehot, keep):
        ttnn, c, L = self.ttnn, self.config, self.layers[i]
        km1 = c.conv_kernel_size - 1
        cc = self.conv_c
        qkvz = s(ttnn.linear(h, L["wqkvz"]))
        qkv = s(ttnn.reshape(s(ttnn.slice(qkvz, [0, 0, 0, 0], [1, 1, b, cc])), [1, b, 1, cc]))
        z = s(ttnn.slice(qkvz, [0, 0, 0, cc], [1, 1, b, cc + self.nv_c]))
        pool = self.conv_pool[i]
        prev = s(ttnn.reshape(s(ttnn.matmul(onehot, pool)), [1, b, km1, cc]))  # gather by slot
        win = s(ttnn.concat([prev, qkv], dim=2))  # [1, b, K, C_c]
        conv = s(ttnn.sum(s(ttnn.multiply(win, L["conv_w"])), dim=2))  # [1, b, C_c]
        conv = s(ttnn.silu(conv))
        new_conv = s(ttnn.reshape(s(ttnn.slice(win, [0, 0, 1, 0], [1, b, km1 + 1, cc])), [1, 1, b, km1 * cc]))
        scat = s(ttnn.matmul(onehot, new_conv, transpose_a=True))  # [1, 1, max_slots, (K-1) C_c]
        ttnn.copy(s(ttnn.add(s(ttnn.multiply(pool, keep)), scat)), pool)
        q, k, v = self._gdn_heads(s, conv, b, 1)
        g, beta = self._gdn_gates(s, L, h, b, 1)
        o = s(ttnn.transformer.fused_recurrent_gated_delta_rule(
            q, k, v, g, beta, initial_state=self.state_pool[i], initial_state_block_idx=slots))
        return self._gdn_out(s, L, o, z, b, 1)

    # ------------------------------------------------------------------ sampling
    def sample_on_device(self, logits, out_tokens) -> None:
        """Greedy: argmax over the vocab written in place into ``out_tokens`` (uint32 [1, B])."""
        ttnn = self.ttnn
        shp = tuple(int(d) for d in logits.shape)
        if len(shp) != 4 or shp[:2] != (1, 1) or shp[3] != self.config.vocab_size:
            raise ValueError(f"sample_on_device: logits must be [1, 1, B, {self.config.vocab_size}], got {list(shp)}")
        b = shp[2]
        if tuple(int(d) for d in out_tokens.shape) != (1, b):
            raise ValueError(f"sample_on_device: out_tokens must be [1, {b}], got {list(out_tokens.shape)}")
        s = _Scope(ttnn)
        rm = s(ttnn.reshape(s(ttnn.to_layout(logits, ttnn.ROW_MAJOR_LAYOUT)), [1, b, self.config.vocab_size]))
        ttnn.argmax(rm, dim=-1, output_tensor=out_tokens)
        if self.free_intermediates:
            s.free()


def _expected_weight_names(c: ModelConfig) -> list[str]:
    names = ["embed_tokens", "norm", "lm_head"]
    for i in range(c.num_layers):
        p = f"layers.{i}."
        names += [p + "input_layernorm", p + "post_attention_layernorm", p + "mlp.gate_proj", p + "mlp.up_proj",
                  p + "mlp.down_proj"]
        if c.is_attention_layer(i):
            names += [p + "self_attn." + n for n in ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm")]
        else:
            names += [p + "linear_attn." + n for n in ("in_proj_qkvz", "in_proj_ba", "conv1d", "A_log", "dt_bias",
                                                       "norm", "out_proj")]
    return names
