"""The hybrid's prefill-only persistent state, as upstream's qwen36 keeps it.

Prefill runs batch 1 on its own Gated DeltaNet scratch, never on the per-slot pools decode
reads, and then publishes the finished state into the request's slot (tt-metal
``models/demos/qwen36/tt/model.py`` @ bdfbb052 and ``models/demos/blackhole/qwen36/tt/model.py``
@ 015056e6: ``_gdn_prefill_scratch``, ``_bind_gdn_prefill_scratch`` /
``_ensure_gdn_prefill_scratch``, ``_write_gdn_slot``). What is kept, per model:

- the batch-1 scratch: one conv window and one recurrent state per GDN layer, updated in place so
  a captured trace's baked addresses stay valid (never freed, only reset);
- one zero buffer per state shape (``_dn_zero_recurrent`` / ``_dn_zero_conv``): a new sequence
  resets the scratch by copying them in (``_reset_gdn_state_for_new_sequence``);
- the chunk trace's persistent inputs (``_chunk_token_buf``, ``_chunk_start_idx_tensor``,
  ``_chunk_page_table_buf``, ``_chunk_full_page_table_buf``; positions for the RoPE rows stand in
  for ``_chunk_cos_buf`` / ``_chunk_sin_buf``) and the one full-chunk trace captured on them
  (``capture_prefill_trace_chunked(..., capture_chunk_trace=True)``).

When each is allocated is upstream's: the scratch and zero buffers on first use (the first
bind), which is the prefill trace warm-up when the plugin traces prefill (``trace_mode`` "all",
captured before decode), else the first request, behind the decode traces the warm-up left live;
the chunk inputs and trace at that capture. Nothing here knows about traces other than its own:
whatever lands behind a live trace is overwritten by that trace's replays, as on a card.
"""

from __future__ import annotations

import torch


class PrefillState:
    """The batch-1 GDN scratch and zero buffers of ``model`` (a Qwen36Model), allocated now."""

    def __init__(self, model):
        self.model = model
        ttnn, c, tp = model.ttnn, model.config, model.tp
        width = tp * (c.conv_kernel_size - 1) * model.conv_c
        rec = (1, c.linear_num_value_heads, c.linear_key_head_dim, c.linear_value_head_dim)
        # the scratch first, then the zero buffers (upstream: _ensure_gdn_prefill_scratch, then
        # _init_dn_zero_buffers); every one initialised through from_torch
        self.conv = {i: model._shard(torch.zeros(1, 1, 1, width), -1, model.act_dtype) for i in model.conv_pool}
        self.rec = {i: model._shard(torch.zeros(rec), 1, ttnn.float32) for i in model.state_pool}
        self.zero_conv = model._shard(torch.zeros(1, 1, 1, width), -1, model.act_dtype)
        self.zero_rec = model._shard(torch.zeros(rec), 1, ttnn.float32)
        self.trace_id = None
        self.inputs = None  # the chunk trace's persistent inputs (ChunkInputs), from its capture
        self.logits = None  # the chunk trace's output: the chunk's last row, [1, 1, 1, vocab]

    # -- a prefill call: reset or resume the scratch, then publish it to the slot -------------
    def begin(self, slot: int, fresh: bool) -> None:
        """A new sequence starts from the zero buffers; a continuation from its slot's state."""
        ttnn = self.model.ttnn
        for i in self.conv:
            if fresh:
                ttnn.copy(self.zero_conv, self.conv[i])
                ttnn.copy(self.zero_rec, self.rec[i])
                continue
            for pool, scratch, dim in ((self.model.conv_pool[i], self.conv[i], 2),
                                       (self.model.state_pool[i], self.rec[i], 0)):
                shape = [int(d) for d in pool.shape]
                start, end = [0] * len(shape), list(shape)
                start[dim], end[dim] = slot, slot + 1
                row = ttnn.slice(pool, start, end)
                ttnn.copy(row, scratch)
                ttnn.deallocate(row)

    def publish(self, slot: int) -> None:
        """The finished scratch into slot ``slot`` of every GDN pool (upstream ``_write_gdn_slot``):
        ``pool * (1 - e_slot) + e_slot * scratch``, the other slots untouched."""
        model, ttnn = self.model, self.model.ttnn
        e_conv = model._rep(model._onehot_host(slot, (1, 1, model.max_slots, 1)), ttnn.float32)
        e_rec = model._rep(model._onehot_host(slot, (model.max_slots, 1, 1, 1)), ttnn.float32)
        tmp = []
        for i in self.conv:
            for pool, scratch, e in ((model.conv_pool[i], self.conv[i], e_conv), (model.state_pool[i], self.rec[i], e_rec)):
                keep = ttnn.neg(ttnn.subtract(e, 1.0))
                kept = ttnn.multiply(pool, keep)
                put = ttnn.multiply(e, scratch)
                upd = ttnn.add(kept, put)
                ttnn.copy(upd, pool)
                tmp += [keep, kept, put, upd]
        for t in (*tmp, e_conv, e_rec):
            ttnn.deallocate(t)


class ChunkInputs:
    """The chunk trace's persistent inputs, created (initialised) before its capture and refreshed
    from the host before every replay (``copy_host_to_device_tensor``)."""

    def __init__(self, model):
        ttnn, c = model.ttnn, model.config
        rm = ttnn.ROW_MAJOR_LAYOUT
        n = c.prefill_chunk
        self.tokens = model._rep(torch.zeros(1, n, dtype=torch.int32), ttnn.uint32, rm)
        self.positions = model._rep(torch.arange(n, dtype=torch.int32).reshape(1, n), ttnn.uint32, rm)
        self.page_table = model._rep(torch.zeros(1, n // c.block_size, dtype=torch.int32), ttnn.int32, rm)
        self.full_page_table = model._rep(torch.zeros(1, c.max_pages, dtype=torch.int32), ttnn.int32, rm)
        self.start = model._rep(torch.zeros(1, dtype=torch.int32), ttnn.int32, rm)

    def stage(self, model, chunk: list[int], pt_row: torch.Tensor, start: int) -> None:
        """The host's inputs of one full chunk at ``start`` into the buffers the trace reads."""
        ttnn, c = model.ttnn, model.config
        n = c.prefill_chunk
        row = torch.zeros(c.max_pages, dtype=torch.int32)
        given = pt_row[: c.max_pages].to(torch.int32)
        row[: given.numel()] = given
        host = (
            (torch.tensor([chunk], dtype=torch.int32), self.tokens, ttnn.uint32),
            (torch.arange(start, start + n, dtype=torch.int32).reshape(1, n), self.positions, ttnn.uint32),
            (model._chunk_pages(row, start)[: n // c.block_size].reshape(1, -1).contiguous(), self.page_table,
             ttnn.int32),
            (row.reshape(1, -1), self.full_page_table, ttnn.int32),
            (torch.tensor([start], dtype=torch.int32), self.start, ttnn.int32),
        )
        for values, device_tensor, dtype in host:
            ttnn.copy_host_to_device_tensor(ttnn.from_torch(values, dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT),
                                            device_tensor)
