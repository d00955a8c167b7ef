"""A third generator, in the shape of tt-metal's shared tt_transformers ``Generator``.

Written to ``model/protocol.py`` (prefill_forward, decode_forward, read_decode_output,
process_decode_output_host) the way ``models/tt_transformers/tt/generator.py`` (50868c00) is
built, and driving the model ONLY through the tt_transformers model interface that
``model.tt_model.TtModelAdapter`` gives our models:

- prefill: per request ``prepare_inputs_prefill`` -> ``ttnn_prefill_forward`` ->
  ``process_output_prefill`` (the greedy token taken on the host), and the request's slot
  recorded in ``_slots_prefilled_since_decode`` (upstream's ``prefill_forward_text`` does so
  for every prefill call);
- decode: ``prepare_decode_inputs_host`` -> ``copy_host_to_device`` into the persistent
  device inputs of a captured decode trace whose body is ``ttnn_decode_forward`` with
  on-device sampling (argmax into the trace's own token input, ``plus_one`` on its
  positions); reads through ``process_output_decode``.

The async-ahead merge (upstream's "F1"): when the host inputs are to be reloaded because of
``reset_batch``, the first decode after a prefill (the mode switch), or a slot remap -- and
only when the trace about to run was already captured -- the generator reads shard 0 of
that trace's token and position inputs (blocking reads, as upstream's ``ttnn.to_torch`` of
``get_device_tensors(...)[0]``), gathers those rows by ``slot_remap``, and keeps the device
token and position on every row where ``dev_pos == host_pos`` or ``dev_pos == host_pos + 1``;
with the prefilled-slot fix on, rows of slots prefilled since the last decode take the host.
The set of prefilled slots is cleared after every ``decode_forward``. The decision itself is
``model.merge_rule.decide_merge``, so the arm's flags apply as they map:

- ``merge`` off: no keep, and the host inputs are restaged every step (upstream without
  ``supports_async_decode`` and without on-device sampling);
- ``prefilled_slots_fix``, ``merge_batch_guard``, ``position_clamp``: as in decide_merge;
- ``merge_from_last_run``: nothing to switch. The reads are blocking
  (they wait for all device work, as upstream's do), and the buffers read are those of the
  trace about to run, as upstream's.

Where this differs from upstream: one decode trace per batch bucket (``bucket_policy``, 1/2/4/8
rows as the Tenstorrent plugin runs them) instead of one trace of ``max_batch_size`` rows, with
every bucket's persistent inputs allocated (and written with padding rows) before the first
capture, so no persistent input lands in a live trace's freed intermediates; no eager compile
pass before a capture (ttsim has no program cache to warm, and an eager decode would advance
the hybrid's recurrent state a second time); the decode output is ``[B, 1]`` tokens as
``model/protocol.py`` asks, not upstream's ``(logits, log_probs)`` pair.

``slot_remap`` [max_slots] (row ``i`` reads state slot ``slot_remap[i]``): the device token and
position rows are gathered by it before the merge, and the model's per-slot state is gathered
once (``gather_slots``), so that afterwards row ``i``'s state lives in slot ``i`` and every
trace keeps reading slot ``r`` for row ``r``. A slot prefilled since the last decode is forced
to the host at the row its state moved to.

``RegressedTtTransformersStyleGenerator`` is the same code with the prefilled-slot forcing
deleted: the treatment arm's pinned slot-reuse seeds must fail with it.
"""

from __future__ import annotations

from dataclasses import asdict

import torch

import ttnn  # ttsim under the suite, the real ttnn with --hil (harness.loader)

from model.merge_events import MergeEvent, MergeInputs, MergeRow
from model.merge_rule import decide_merge
from model.tt_model import PAGE_TABLE_INPUT_IDX, SLOTS_INPUT_IDX, Mode, TtModelAdapter, copy_host_to_device

DECODE_BUCKETS = (1, 2, 4, 8)


def smallest_bucket(rows: int) -> int:
    for b in DECODE_BUCKETS:
        if rows <= b:
            return b
    raise ValueError(f"a decode batch of {rows} rows exceeds the largest bucket ({DECODE_BUCKETS[-1]})")


class DecodeOutput(list):
    """Upstream's decode output: one ``(tt_tokens, tt_log_probs)`` per data-parallel model (one
    here), plus the rows the caller passed and the rows the device ran (the bucket)."""

    def __init__(self, items, rows: int, bucket: int):
        super().__init__(items)
        self.rows = rows
        self.bucket = bucket


class HostOutput(DecodeOutput):
    """The host side of a decode output's read."""


class _Trace:
    """One bucket's decode trace: its persistent device inputs (upstream's trace_inputs_decode),
    its output, and the page table / slots the inputs hold."""

    def __init__(self, bucket: int, device_inputs):
        self.bucket = bucket
        self.inputs = device_inputs
        self.trace_id = None
        self.output = None
        self.page_table = None
        self.slots = None


class TtTransformersStyleGenerator:
    #: forces the host for slots prefilled since the last decode (with the arm's prefilled_slots_fix)
    FORCES_PREFILLED_SLOTS = True

    def __init__(self, model, tt, mesh_device, *, flags, max_context, max_pages, max_slots, enable_trace=True,
                 bucket_policy=None):
        if not isinstance(mesh_device, ttnn.MeshDevice):
            raise TypeError(f"expected a {ttnn.__name__}.MeshDevice, got {type(mesh_device).__name__}")
        self.model = [TtModelAdapter(model, tt, mesh_device, max_batch_size=max_slots, max_pages=max_pages)]
        self.model_args = [self.model[0].model_args]
        self.mesh_device = mesh_device
        self.flags = flags
        self.max_context = max_context
        self.max_pages = max_pages
        self.max_slots = max_slots
        self.enable_trace = enable_trace
        self.bucket_policy = bucket_policy or smallest_bucket
        self.mode = None
        self.on_merge = None  # the serving runner hooks this to tag and classify merges
        self.guard_rejects = 0
        self._traces: dict[int, _Trace] = {}
        self._last_bucket = None
        self._slots_prefilled_since_decode: set[int] = set()
        self._step = 0
        self._untraced_pending = []
        self.lifecycle: list[tuple] = []  # the plugin's start-up calls, in the order they came
        self.sample_on_device = True

    # -- the plugin's start-up (model/protocol.py) ---------------------------------------
    def allocate_kv_cache(self, kv_cache_shape, dtype, num_layers):
        """The models own their paged caches (the adapter accepts ``kv_cache`` and ignores it)."""
        self.lifecycle.append(("allocate_kv_cache", tuple(kv_cache_shape), num_layers))
        return []

    def warmup_model_prefill(self, enable_trace=False, kv_cache=None, can_sample_on_device=False, **kwargs):
        """Prefill is never traced and ttsim has no program cache to compile: nothing to do."""
        self.lifecycle.append(("warmup_model_prefill", enable_trace))

    def warmup_model_decode(self, enable_trace=False, kv_cache=None, max_batch_size=None, num_blocks=None,
                            can_sample_on_device=False, **kwargs):
        """The capture phase allocates every bucket's inputs and captures every decode trace
        (upstream's decode warm-up captures its trace), so nothing allocates during a capture
        later; the compile phase has nothing to compile."""
        self.lifecycle.append(("warmup_model_decode", enable_trace))
        self.sample_on_device = can_sample_on_device
        if enable_trace and can_sample_on_device and self.enable_trace:
            self.warm_up()

    # -- prefill ------------------------------------------------------------------------
    def prefill_forward(self, tokens, page_table=None, kv_cache=None, prompt_lens=None, empty_slots=None,
                        start_pos=None, sampling_params=None, enable_trace=False, **kwargs):
        """Prefill ``tokens[i, start_pos[i]:prompt_lens[i]]`` into slot ``empty_slots[i]``; returns the
        logits after each row's chunk [B, 1, vocab] (host sampling), or with ``sampling_params`` the
        greedy token per row [B] (model/protocol.py)."""
        self.mode = Mode.PREFILL
        model = self.model[0]
        model.switch_mode(Mode.PREFILL)
        n = tokens.shape[0]
        if empty_slots is None:
            empty_slots = list(range(n))
        slots = [int(s) for s in empty_slots]
        if len(slots) != n:
            raise ValueError(f"prefill_forward: {len(slots)} empty_slots for {n} requests")
        if page_table is None or page_table.shape[0] != n:
            raise ValueError(f"prefill_forward: page_table must hold one row per request ({n})")
        # upstream records every slot a prefill call touches, before prefilling
        self._slots_prefilled_since_decode.update(slots)
        ends = [int(v) for v in prompt_lens] if prompt_lens is not None else [tokens.shape[1]] * n
        starts = [int(v) for v in start_pos] if start_pos is not None else [0] * n
        firsts = []
        for i, slot in enumerate(slots):
            if not 0 <= slot < self.max_slots:
                raise ValueError(f"prefill_forward: slot {slot} is outside 0..{self.max_slots - 1}")
            if not 0 <= starts[i] < ends[i] <= tokens.shape[1]:
                raise ValueError(f"prefill_forward: row {i} asks for tokens [{starts[i]}, {ends[i]}) of "
                                 f"{tokens.shape[1]}")
            chunk = tokens[i:i + 1, starts[i]:ends[i]]
            x, _, _, pt, _, start = model.prepare_inputs_prefill(chunk, start_pos=starts[i],
                                                                  page_table=page_table[i:i + 1])
            logits = model.ttnn_prefill_forward(x, user_id=slot, page_table=pt, chunk_start_idx=start,
                                                kv_cache=kv_cache)
            firsts.append(model.process_output_prefill(logits, ends[i] - 1).reshape(1, -1))
            ttnn.deallocate(logits)  # the prefill tile, read
        logits = torch.stack(firsts)  # [B, 1, vocab]
        return logits if sampling_params is None else torch.argmax(logits[:, -1], dim=-1)

    # -- decode -------------------------------------------------------------------------
    def decode_forward(self, tokens, start_pos, page_table=None, kv_cache=None, enable_trace=True,
                       read_from_device=True, sampling_params=None, reset_batch=False, slot_remap=None, **kwargs):
        mode_switched = self.mode != Mode.DECODE
        self.mode = Mode.DECODE
        model = self.model[0]
        model.switch_mode(Mode.DECODE)
        if sampling_params is None:  # host sampling: logits back, untraced, no merge (upstream's)
            return self._decode_logits(tokens, start_pos, page_table, slot_remap, read_from_device)
        enable_trace = enable_trace and self.enable_trace
        rows = tokens.shape[0]
        host_tok = [int(t) for t in tokens.reshape(-1).tolist()]
        host_pos = [int(p) for p in start_pos.reshape(-1).tolist()]
        if len(host_pos) != rows:
            raise ValueError(f"decode_forward: {rows} tokens for {len(host_pos)} positions")
        active = [r for r, p in enumerate(host_pos) if p >= 0]
        if not active:
            raise ValueError("decode_forward: no active row (every start_pos is -1)")
        needed = max(active) + 1
        remapped = slot_remap is not None and self._remap_moves(slot_remap)
        if reset_batch or remapped or self._last_bucket is None or self._last_bucket < needed:
            bucket = self.bucket_policy(needed)  # the bucket is chosen when the batch is (re)set
        else:
            bucket = self._last_bucket
        if bucket < needed or bucket not in DECODE_BUCKETS:
            raise ValueError(f"decode_forward: bucket {bucket} cannot hold {needed} rows")
        host_tok = (host_tok + [0] * bucket)[:bucket]
        host_pos = (host_pos + [-1] * bucket)[:bucket]
        pt = torch.zeros(bucket, self.max_pages, dtype=torch.int32)
        if page_table is None:
            raise ValueError("decode_forward: page_table is required")
        given = page_table[:bucket].to(torch.int32)
        pt[:given.shape[0]] = given
        pt[[r for r in range(bucket) if host_pos[r] < 0]] = 0  # inactive rows are neutral
        slots = [r if p >= 0 else -1 for r, p in enumerate(host_pos)]

        if enable_trace:
            self._allocate_trace_inputs()
        trace = self._traces.get(bucket) if enable_trace else None
        captured = trace is not None and trace.trace_id is not None
        bucket_changed = bucket != self._last_bucket
        reload_inputs = (not enable_trace or not captured or not self.flags.merge or reset_batch or mode_switched
                         or remapped or bucket_changed)

        if remapped:
            # state moves once: afterwards row i's state lives in slot i
            model.gather_slots(self._remap_list(slot_remap))
        if (self.flags.merge and enable_trace and captured
                and (reset_batch or mode_switched or remapped or bucket_changed)):
            host_tok, host_pos = self._merge(trace, bucket, host_tok, host_pos, slot_remap if remapped else None)
        self._slots_prefilled_since_decode = set()

        if enable_trace:
            out = self._decode_forward_trace(trace, bucket, host_tok, host_pos, pt, slots, reload_inputs)
        else:
            out = self._decode_forward_no_trace(host_tok, host_pos, pt, slots)
        self._last_bucket = bucket if enable_trace else self._last_bucket
        self._step += 1
        result = DecodeOutput(out, rows, bucket)
        if read_from_device:
            host, events = self.read_decode_output(result, async_read=True)
            for event in events:
                ttnn.event_synchronize(event)
            return self.process_decode_output_host(host, is_tokens=True)
        return result

    def _decode_logits(self, tokens, start_pos, page_table, slot_remap, read_from_device):
        """Upstream without on-device sampling: an untraced step whose logits the caller samples."""
        rows = tokens.shape[0]
        host_pos = [int(p) for p in start_pos.reshape(-1).tolist()]
        if slot_remap is not None and self._remap_moves(slot_remap):
            self.model[0].gather_slots(self._remap_list(slot_remap))
        pt = page_table.to(torch.int32).clone()
        pt[[r for r in range(rows) if host_pos[r] < 0]] = 0
        slots = [r if p >= 0 else -1 for r, p in enumerate(host_pos)]
        self._slots_prefilled_since_decode = set()
        self._step += 1
        out = self._decode_forward_no_trace([int(t) for t in tokens.reshape(-1).tolist()], host_pos, pt, slots,
                                            sample=False)
        result = DecodeOutput(out, rows, rows)
        return self.process_decode_output_host(self.read_decode_output(result), is_tokens=False) \
            if read_from_device else result

    def _decode_forward_no_trace(self, host_tok, host_pos, pt, slots, sample=True):
        model = self.model[0]
        for t in self._untraced_pending:  # the previous untraced step's inputs, read by now
            model.release_decode_output(t[0])
            for x in t:
                if x is not None:
                    ttnn.deallocate(x)
        inputs = model.prepare_inputs_decode(torch.tensor(host_tok).reshape(-1, 1), torch.tensor(host_pos), pt,
                                             slots=slots)
        self._untraced_pending = [inputs]
        if not sample:
            logits = model.ttnn_decode_forward(*inputs[:4], slots=inputs[SLOTS_INPUT_IDX])
            self._untraced_pending.append((logits,))  # freed with the inputs, after the read
            return [(logits, None)]
        out = model.ttnn_decode_forward(*inputs[:4], sampling_on_device=True, slots=inputs[SLOTS_INPUT_IDX])
        return [out]

    def _decode_forward_trace(self, trace, bucket, host_tok, host_pos, pt, slots, reload_inputs):
        model = self.model[0]
        if trace.trace_id is None:
            self._capture_decode_trace(trace)
        slots_t = tuple(slots)
        if reload_inputs:
            host_inputs = model.prepare_decode_inputs_host(torch.tensor(host_tok).reshape(-1, 1),
                                                           torch.tensor(host_pos), pt, slots=slots)
            copy_host_to_device(host_inputs, device_tensors=trace.inputs, ttnn=ttnn)
            trace.page_table, trace.slots = pt.clone(), slots_t
        else:
            # the device's tokens and positions are ahead of the host's: refresh only the page
            # table (new KV blocks) and the slots, where they changed
            changed_pt = trace.page_table is None or not torch.equal(trace.page_table, pt)
            if changed_pt or trace.slots != slots_t:
                host_inputs = model.prepare_decode_inputs_host(torch.tensor(host_tok).reshape(-1, 1),
                                                               torch.tensor(host_pos), pt, slots=slots)
                if changed_pt:
                    ttnn.copy_host_to_device_tensor(host_inputs[PAGE_TABLE_INPUT_IDX],
                                                    trace.inputs[PAGE_TABLE_INPUT_IDX])
                if trace.slots != slots_t:
                    ttnn.copy_host_to_device_tensor(host_inputs[SLOTS_INPUT_IDX], trace.inputs[SLOTS_INPUT_IDX])
                trace.page_table, trace.slots = pt.clone(), slots_t
        ttnn.execute_trace(self.mesh_device, trace.trace_id, cq_id=0, blocking=False)
        return trace.output

    def _allocate_trace_inputs(self) -> None:
        """Every bucket's persistent decode inputs, allocated and written with padding rows
        before any trace is captured (upstream prepares decode inputs before its first capture)."""
        if self._traces:
            return
        model = self.model[0]
        for b in DECODE_BUCKETS:
            if b > self.max_slots:
                continue
            host = model.prepare_decode_inputs_host(torch.zeros(b, 1, dtype=torch.int64),
                                                    torch.full((b,), -1, dtype=torch.int64),
                                                    torch.zeros(b, self.max_pages, dtype=torch.int32))
            self._traces[b] = _Trace(b, copy_host_to_device(host, mesh_device=self.mesh_device, ttnn=ttnn))

    def _capture_decode_trace(self, trace: _Trace) -> None:
        model = self.model[0]
        model.bind_decode_trace_inputs(trace.inputs)
        trace.trace_id = ttnn.begin_trace_capture(self.mesh_device, cq_id=0)
        trace.output = [model.ttnn_decode_forward(*trace.inputs[:4], sampling_on_device=True,
                                                  slots=trace.inputs[SLOTS_INPUT_IDX])]
        ttnn.end_trace_capture(self.mesh_device, trace.trace_id, cq_id=0)

    # -- the merge ----------------------------------------------------------------------
    def _remap_list(self, slot_remap) -> list[int]:
        values = slot_remap.tolist() if hasattr(slot_remap, "tolist") else list(slot_remap)
        return [int(v) for v in values]

    def _remap_moves(self, slot_remap) -> bool:
        values = self._remap_list(slot_remap)
        if len(values) != self.max_slots:
            raise ValueError(f"decode_forward: slot_remap must hold {self.max_slots} entries, got {len(values)}")
        return values != list(range(self.max_slots))

    def _read_shard0(self, t) -> list[int]:
        return [int(v) for v in ttnn.to_torch(ttnn.get_device_tensors(t)[0]).reshape(-1).tolist()]

    def _merge(self, trace: _Trace, bucket: int, host_tok, host_pos, slot_remap):
        dev_tok = [t & 0xFFFFFFFF for t in self._read_shard0(trace.inputs[0])][:bucket]
        dev_pos = self._read_shard0(trace.inputs[1])[:bucket]
        prefilled = sorted(self._slots_prefilled_since_decode)
        if slot_remap is not None:
            remap = self._remap_list(slot_remap)
            full_tok = dev_tok + [0] * (self.max_slots - len(dev_tok))
            full_pos = dev_pos + [-1] * (self.max_slots - len(dev_pos))
            dev_tok = [full_tok[remap[r]] for r in range(bucket)]
            dev_pos = [full_pos[remap[r]] for r in range(bucket)]
            prefilled = [remap.index(s) for s in prefilled]  # where each prefilled slot's state went
        forced = [self.FORCES_PREFILLED_SLOTS and r in prefilled for r in range(bucket)]
        decision = decide_merge(self.flags, self.max_context, dev_tok, dev_pos, host_tok, host_pos, forced)
        self.guard_rejects += decision.guard_rejected
        if self.on_merge is not None:
            self.on_merge(self._event(bucket, dev_tok, dev_pos, host_tok, host_pos, forced, decision))
        return decision.merged(dev_tok, host_tok, host_pos)

    def _event(self, bucket, dev_tok, dev_pos, host_tok, host_pos, forced, d) -> MergeEvent:
        rows = [MergeRow(r, host_tok[r], host_pos[r], dev_tok[r], d.dev_pos[r], "device" if d.keep[r] else "host",
                         d.reasons[r], forced[r]) for r in range(bucket)]
        return MergeEvent(self._step, bucket, self._last_bucket, False, d.guard_rejected, rows,
                          MergeInputs(bucket, list(dev_tok), list(dev_pos), self.max_context, asdict(self.flags)))

    # -- reads --------------------------------------------------------------------------
    def read_decode_output(self, tt_out, async_read=False):
        """Enqueue the read of the sampled tokens: with ``async_read`` non-blocking, returning
        ``(host_outputs, read_events)``; else blocking, returning the host outputs."""
        if not async_read:
            return HostOutput([(tok.cpu(), lp) for tok, lp in tt_out], tt_out.rows, tt_out.bucket)
        host = HostOutput([(tok.cpu(blocking=False), lp) for tok, lp in tt_out], tt_out.rows, tt_out.bucket)
        return host, [ttnn.record_event(self.mesh_device, 0)]

    def process_decode_output_host(self, tt_out, is_tokens=False):
        """The sampled token per row [B, 1], or without on-device sampling the logits [B, 1, vocab]
        (the caller has waited on the read's events)."""
        if not is_tokens:
            return self.model[0].process_output_decode(tt_out[0][0], tt_out.rows, S=1)
        ran = min(tt_out.rows, tt_out.bucket)  # rows past the bucket were inactive: token 0
        toks = self.model[0].process_output_decode(tt_out[0][0], ran, S=1, is_tokens=True)
        return torch.cat([toks, torch.zeros(tt_out.rows - ran, dtype=toks.dtype)]).reshape(-1, 1)

    # -- optional beyond the protocol ---------------------------------------------------
    def warm_up(self) -> int:
        """Allocate every bucket's inputs and capture every decode trace now."""
        self._allocate_trace_inputs()
        for trace in self._traces.values():
            if trace.trace_id is None:
                self._capture_decode_trace(trace)
        return len(self._traces)

    def release(self) -> None:
        for trace in self._traces.values():
            if trace.trace_id is not None:
                ttnn.release_trace(self.mesh_device, trace.trace_id)
                trace.trace_id = None


class RegressedTtTransformersStyleGenerator(TtTransformersStyleGenerator):
    """The prefilled-slot forcing deleted: a reused slot keeps its previous occupant's token."""

    FORCES_PREFILLED_SLOTS = False
