"""The serving loop: vLLM's real AsyncScheduler driving the generator.

Two paths drive one runner:

- the served path: vLLM's real EngineCore (``vllm serve``) calls ``TTRunner.execute`` through
  the ``harness.vllm`` platform's worker, one step per ``execute_model``/``sample_tokens``;
- the in-process path: ``Engine`` below re-enacts EngineCore.step_with_batch_queue (async
  scheduling: step k+1 is scheduled and submitted before step k's output is processed)
  without processes or HTTP, because the 1000-seed sweeps need its speed.

``TTRunner`` plays the
Tenstorrent vLLM plugin's model runner: it places each request in a stable slot (a
request never moves once placed; a freed slot is reused by the next admission), runs
prefill chunks, and runs decode through the generator's per-bucket traces.

Host staleness, as in production: between batch changes the runner submits step k+1
before it has read step k, so the host token of a continuing request is one step stale
and the device's own buffers carry the batch. When the batch changes the runner first
reads the outstanding output (a batch change is where the host must know who finished)
and calls decode_forward with ``reset_batch=True``.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field
from typing import Callable

from .host_ints import int32_tensor, int64_tensor
from .plugin_batch import PluginBatch
from .protocol import SAMPLE_ON_DEVICE, SamplingParams, begin_read, finish_read, tokens_of


@dataclass(frozen=True)
class KvCacheSpec:
    """What the plugin hands the model class to allocate its paged KV cache: vLLM's spec of
    each attention layer, ``shape`` = ``(blocks, kv_heads, block_size, head_dim)``."""
    shape: tuple[int, int, int, int]
    dtype: object
    num_layers: int

    def per_layer(self) -> list[tuple]:
        """``allocate_kv_cache_per_layer``'s argument: ``(shape, dtype, tensor_idx)`` per layer."""
        return [(self.shape, self.dtype, i) for i in range(self.num_layers)]


def unguarded(call: str, step: int):
    """The runner's default guard: calls run as they come (the harness passes a deadline)."""
    return contextlib.nullcontext()


def start_generator(gen, kv: KvCacheSpec, *, max_batch_size: int, max_pages: int, sample_on_device: str | None,
                    trace_prefill: bool = True, decode_first: bool = False, guard: Callable = unguarded):
    """The plugin's start-up of a model class, in its order (``model_runner.py`` @ e3fc8494
    ``warmup_model``): the KV cache through the model (``allocate_kv_cache_per_layer`` when the
    model has it, else ``allocate_kv_cache``), then the two-phase warm-up: compile (both with
    ``enable_trace=False``), reset ``already_warmed_up_prefill``, then capture: prefill first
    when prefill is traced (``trace_mode`` "all", the plugin's default; ``trace_prefill``), then
    decode. ``decode_first`` is vllm-tt-plugin PR #122's phase-2 order (decode captured before
    prefill), shipped and then reverted by PR #126: a what-if here. ``guard``: the deadline on
    each call (the harness's). ``num_blocks`` of the decode
    warm-up is the page-table width every later call uses (``max_pages``; the plugin's
    ``max_num_blocks_per_req`` is ``min(cdiv(max_model_len, block_size), kv blocks)``: our tables
    stay ``max_context / block_size`` wide even when a seed's KV budget is smaller, so that a
    garbage position reads past the same row bytes whatever the budget). Returns the KV cache."""
    if sample_on_device not in SAMPLE_ON_DEVICE:
        raise ValueError(f"sample_on_device must be one of {SAMPLE_ON_DEVICE}, got {sample_on_device!r}")
    if callable(getattr(gen, "allocate_kv_cache_per_layer", None)):
        with guard("allocate_kv_cache_per_layer", 0):
            kv_cache = gen.allocate_kv_cache_per_layer(kv.per_layer())
    else:
        with guard("allocate_kv_cache", 0):
            kv_cache = gen.allocate_kv_cache(kv.shape, kv.dtype, kv.num_layers)
    prefill_kw = {"kv_cache": kv_cache, "can_sample_on_device": sample_on_device == "all"}
    decode_kw = {"kv_cache": kv_cache, "max_batch_size": max_batch_size, "num_blocks": max_pages,
                 "can_sample_on_device": sample_on_device in ("all", "decode_only")}
    with guard("warmup_model_prefill", 0):
        gen.warmup_model_prefill(enable_trace=False, **prefill_kw)
    with guard("warmup_model_decode", 0):
        gen.warmup_model_decode(enable_trace=False, **decode_kw)
    if hasattr(gen, "already_warmed_up_prefill"):
        gen.already_warmed_up_prefill = False
    capture = {"warmup_model_prefill": lambda: gen.warmup_model_prefill(enable_trace=True, **prefill_kw),
               "warmup_model_decode": lambda: gen.warmup_model_decode(enable_trace=True, **decode_kw)}
    order = ["warmup_model_decode"]
    if trace_prefill:
        order = [*order, "warmup_model_prefill"] if decode_first else ["warmup_model_prefill", *order]
    for call in order:
        with guard(call, 0):
            capture[call]()
    return kv_cache


@dataclass
class _ReqState:
    req_id: str
    tokens: list[int]  # prompt + outputs the host knows
    computed: int = 0
    blocks: list[int] = field(default_factory=list)
    slot: int | None = None
    prefilled: bool = False
    upto: int = 0  # prompt tokens the model has actually prefilled
    fresh: bool = False  # prefilled, not decoded since: the host's record of the slot's state
    row: tuple | None = None  # (blocks, page-table row) memo of TTRunner._page_row


def host_view_class(log: dict[int, tuple[bool, bool]], expected: list[int], got: list[int]) -> str:
    """A wrong answer's defect class from what the runner itself saw (any generator, no records):
    the decode that yielded the first wrong token was the request's first decode after its
    prefill ("slot-reuse": the device kept state from the slot's previous occupant), another
    reload ("stale-position-buffer": device state from an older batch was kept), or a step
    between reloads ("device-state": the device's own buffers changed under the trace)."""
    first = next((i for i, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got)))
    if first not in log:  # the prefill's token, or an output no decode of this run yielded
        return "unattributed"
    fresh, reload = log[first]
    return "slot-reuse" if fresh else "stale-position-buffer" if reload else "device-state"


class TTRunner:
    """The model runner: slots, prefill chunks, traced decode through the generator.

    It makes the plugin's calls of model/protocol.py and no others, in the plugin's order:
    ``start()`` (KV cache, two-phase warm-up), then per step ``prefill_forward`` or
    ``decode_forward(read_from_device=False)`` with ``read_decode_output(async_read=True)``
    at once, ``ttnn.event_synchronize`` and ``process_decode_output_host`` when the output is
    needed. ``ttnn`` is the module the generator runs on (the runner waits on its events).
    """

    def __init__(self, generator, ttnn, *, max_slots: int, max_pages: int, prefill_chunk: int, kv: KvCacheSpec,
                 scratch: Callable[[], None] | None = None, on_merge: Callable | None = None,
                 plugin_layout: bool = False, sample_on_device: str | None = "decode_only",
                 trace_prefill: bool = True, decode_first: bool = False, guard: Callable = unguarded):
        self.gen = generator
        # the plugin's trace_mode: prefill traced ("all") or not ("decode_only"), and the order of
        # its capture phase (start_generator)
        self.trace_prefill, self.decode_first = trace_prefill, decode_first
        # a model class without async decode runs without vLLM's async scheduling on the plugin;
        # the runner reads every step's output first so that the host is fresh there too (the
        # served engine is scheduled async whatever the model declares)
        caps = getattr(generator, "model_capabilities", None) or {}
        self.host_fresh_every_step = caps.get("supports_async_decode", True) is False
        self.ttnn = ttnn
        # every call into the generator, and every wait on its events, runs in ``guard(call,
        # step)`` (the harness's deadline: harness/deadline.py); ``steps``: executed engine steps
        self.guard = guard
        self.steps = 0
        # the plugin's sample_on_device_mode: production samples decode on the device (the merge
        # and its defects exist only there) and prefill on the host
        self.sample_on_device = sample_on_device
        self.kv_spec = kv
        self.kv_cache = None  # the model's, from start()
        # ``plugin_layout`` (with the plugin's phased steps): the Tenstorrent plugin's decode
        # layout (model/plugin_batch.py). Rows are the persistent batch's, condensed, padded to
        # the capacity (``max_slots``, position -1); state slots follow the request and a decode
        # whose rows moved sends ``slot_remap``; ``reset_batch`` is set whenever the layout
        # changed since the last decode (sticky until a decode consumes it). Off: every
        # request keeps one stable slot as its row, rows up to the highest active slot, and a
        # reset when the set of decoding (slot, request) pairs differs from the last decode's.
        self.batch = PluginBatch(max_slots) if plugin_layout else None
        self._layout_changed = True
        self._row_ids: list[str | None] = []  # the request of each row of the decode in flight
        self._prefilled_since_decode = False
        self._last_table: tuple = ()
        # the generator's decode dialect (model/protocol.py): the reload commands, or reset_batch
        self._contract = getattr(generator, "decode_input_update_contract", 0) == 1
        # the runner owns the merge hook of a generator that reports merges (ours does): it
        # tags each merge row with the request holding that slot, then hands it to ``on_merge``
        self.on_merge = on_merge
        if hasattr(generator, "on_merge"):
            generator.on_merge = self._tag_merge
        self.prefill_chunk = prefill_chunk
        self.max_slots = max_slots
        self.max_pages = max_pages
        self.reqs: dict[str, _ReqState] = {}
        self.slots: list[str | None] = [None] * max_slots
        self._pending: deque = deque()  # unresolved decode outputs, oldest first
        self._last_batch: tuple = ()
        self.preemptions = 0
        # the host's view of every decode, for classifying a wrong answer without the
        # generator's records: request -> output index -> (first decode after its prefill,
        # a reload step); output 0 is the prefill's token
        self.decode_log: dict[str, dict[int, tuple[bool, bool]]] = {}
        self._prompt_lens: dict[str, int] = {}
        self.scratch = scratch  # knob hook: allocations between steps (allocator reuse patterns)
        # (request, prompt, outputs, decode log) of each request vLLM finishes (the served records)
        self.on_finish: Callable | None = None

    def start(self) -> None:
        """The plugin's start-up (KV cache, two-phase warm-up) before any request."""
        self.kv_cache = start_generator(self.gen, self.kv_spec, max_batch_size=self.max_slots, max_pages=self.max_pages,
                                        sample_on_device=self.sample_on_device, trace_prefill=self.trace_prefill,
                                        decode_first=self.decode_first, guard=self.guard)

    def _tag_merge(self, event) -> None:
        for row in event.rows:
            row.request_id = self._row_ids[row.slot] if row.slot < len(self._row_ids) else None
            st = self.reqs.get(row.request_id) if row.request_id is not None else None
            row.host_prefilled = st is not None and st.fresh
        if self.on_merge is not None:
            self.on_merge(event)

    # -- slot placement (the TT plugin's stable slots) ------------------------------------
    def _place(self, st: _ReqState) -> None:
        if st.slot is not None:
            return
        free = self.slots.index(None)
        self.slots[free] = st.req_id
        st.slot = free

    def _release(self, req_id: str) -> None:
        st = self.reqs.pop(req_id, None)
        if st is not None and st.slot is not None:
            self.slots[st.slot] = None

    def _finish(self, rid: str) -> None:
        """A request vLLM finished. With ``on_finish`` (a server: requests never end) it gets what
        the host saw of the request, which is then forgotten; else the decode log stays for the
        run's verdicts (harness.scenario)."""
        st = self.reqs.get(rid)
        if self.on_finish is not None:
            n = self._prompt_lens.pop(rid, None)
            log = self.decode_log.pop(rid, {})
            if st is not None and n is not None:
                self.on_finish(rid, st.tokens[:n], st.tokens[n:], log)
        self._release(rid)

    def _page_row(self, st: _ReqState) -> tuple[int, ...]:
        """The request's page-table row, ``max_pages`` ids (rebuilt only when its blocks change)."""
        blocks = tuple(st.blocks[: self.max_pages])
        if st.row is None or st.row[0] != blocks:
            st.row = (blocks, blocks + (0,) * (self.max_pages - len(blocks)))
        return st.row[1]

    # -- one engine step ------------------------------------------------------------------
    def execute(self, so) -> Callable[[], object]:
        """Run scheduler output ``so``; returns a callable producing its ModelRunnerOutput."""
        from vllm.v1.outputs import ModelRunnerOutput

        self.steps += 1
        for rid in sorted(so.finished_req_ids):
            self._finish(rid)
            self._layout_changed = True
        for rid in sorted(getattr(so, "preempted_req_ids", None) or ()):
            self._release(rid)
            self.preemptions += 1
            self._layout_changed = True
        for nr in so.scheduled_new_reqs:
            toks = nr.prefill_token_ids if getattr(nr, "prefill_token_ids", None) is not None else nr.prompt_token_ids
            st = _ReqState(nr.req_id, list(toks), nr.num_computed_tokens, list(nr.block_ids[0]))
            self._prompt_lens[nr.req_id] = len(toks)
            self.reqs[nr.req_id] = st
        c = so.scheduled_cached_reqs
        for i, rid in enumerate(c.req_ids):
            st = self.reqs.get(rid)
            if rid in c.resumed_req_ids:  # back from preemption: new blocks, full token list
                st = self.reqs.setdefault(rid, _ReqState(rid, []))
                st.blocks = list(c.new_block_ids[i][0])
                st.slot, st.prefilled, st.upto, st.fresh = None, False, 0, False
            elif c.new_block_ids[i] is not None:
                st.blocks.extend(c.new_block_ids[i][0])
            if rid in c.all_token_ids:
                # vLLM sends the whole list for a request it did not schedule last step; under async
                # scheduling it lacks the tokens still in flight, which the host already holds
                tokens = c.all_token_ids[rid]
                if rid in c.resumed_req_ids or len(tokens) >= len(st.tokens):
                    st.tokens = list(tokens)
            st.computed = c.num_computed_tokens[i]

        order = list(so.num_scheduled_tokens)  # scheduling order
        if self.batch is not None:
            self._layout_changed |= self.batch.update(
                so.finished_req_ids, so.num_scheduled_tokens, [nr.req_id for nr in so.scheduled_new_reqs],
                c.req_ids, self.reqs)
            order_rows = [rid for rid in self.batch.row_ids if rid in so.num_scheduled_tokens]
            prefills = [rid for rid in order_rows if not self.reqs[rid].prefilled]
            for rid, slot in zip(prefills, self.batch.prefill_slots(prefills, self.reqs) if prefills else ()):
                self.reqs[rid].slot = slot
        sampled: dict[str, list[int]] = {}
        decode_rows: list[_ReqState] = []
        for rid in (order if self.batch is None else order_rows):
            st = self.reqs[rid]
            n = so.num_scheduled_tokens[rid]
            if not st.prefilled:
                if self.batch is None:
                    self._place(st)
                end = st.computed + n
                sampled[rid] = self._prefill(st, end)
                st.computed = end
            else:
                decode_rows.append(st)

        mine = self._decode(decode_rows, sampled) if decode_rows else None
        if self.scratch is not None:
            self.scratch()

        def result():
            if mine is not None:
                self.resolve_pending(until=mine)
            toks = [sampled.get(rid, []) for rid in order]
            return ModelRunnerOutput(req_ids=order, req_id_to_index={r: i for i, r in enumerate(order)},
                                     sampled_token_ids=toks)

        return result

    def _prefill(self, st: _ReqState, end: int) -> list[int]:
        """Prefill up to ``end`` as the scheduler chunked it. The model continues a prompt only
        at multiples of its prefill chunk (chunked SDPA needs chunk starts on the chunk grid),
        so a non-final chunk is computed up to the last grid point it reaches; the rest joins
        the next chunk. The sampled token is reported when the scheduler's final chunk runs."""
        final = end == len(st.tokens)
        upto = end if final else end - end % self.prefill_chunk
        if upto <= st.upto:
            return []
        table = int32_tensor(self._page_row(st)).reshape(1, -1)
        tokens = int64_tensor(st.tokens[:upto]).reshape(1, upto)  # torch.tensor([...]) without its list walk
        sampled = self.sample_on_device == "all"
        kw = {"sampling_params": SamplingParams.greedy(1)} if sampled else {}
        with self.guard("prefill_forward", self.steps):
            out = self.gen.prefill_forward(tokens=tokens, page_table=table, kv_cache=self.kv_cache,
                                           enable_trace=self.trace_prefill, prompt_lens=int64_tensor((upto,)),
                                           start_pos=int64_tensor((st.upto,)), empty_slots=[st.slot], **kw)
        st.upto = upto
        self._prefilled_since_decode = True
        if not final:  # a chunk that does not end the prompt: its token is not an output
            return []
        first = tokens_of(out, 1, sampled=sampled, call=f"{type(self.gen).__name__}.prefill_forward")[0]
        st.tokens.append(first)
        st.prefilled = st.fresh = True
        return [first]

    def _decode(self, rows: list[_ReqState], sampled: dict[str, list[int]]) -> None:
        remap = None
        if self.batch is not None:  # the plugin's rows: condensed, state gathered to them
            remap = self.batch.decode_remap([st.req_id for st in rows])
            for st in rows:
                st.slot = self.batch.slot_of[st.req_id]  # the row its state now lives in
            reset = self._layout_changed
            width = self.max_slots
        else:
            batch = tuple(sorted((st.slot, st.req_id) for st in rows))
            reset = batch != self._last_batch
            self._last_batch = batch
            width = max(st.slot for st in rows) + 1
        self._layout_changed = False
        reload = reset or self._prefilled_since_decode
        for st in rows:  # the token this decode yields is output (position + 1 - prompt length)
            self.decode_log.setdefault(st.req_id, {})[st.computed + 1 - self._prompt_lens[st.req_id]] = (
                st.fresh, reload)
        if reload or self.sample_on_device is None or self.host_fresh_every_step:
            # the generator reloads (and merges) at a reset and at the first decode after a
            # prefill (F1's mode switch): the host must know every continuing row's last token.
            # Without on-device sampling no device buffer carries the token: the host feeds
            # every step, so it reads the previous step first
            self.resolve_pending()
        self._prefilled_since_decode = False
        tokens, positions = [0] * width, [-1] * width
        table = [(0,) * self.max_pages] * width  # rows of page ids
        self._row_ids = [None] * width
        for st in rows:
            tokens[st.slot] = st.tokens[-1]  # stale by one step unless resolved
            positions[st.slot] = st.computed
            table[st.slot] = self._page_row(st)
            self._row_ids[st.slot] = st.req_id
        device_sampling = self.sample_on_device is not None
        kw = {}
        if self._contract:
            # the reload commands (tt-metal decode_contract.py): the host is fresh here, so a
            # reload is host-authoritative; otherwise only a changed page table is copied
            table_changed = tuple(table) != self._last_table
            kw = {"reload_inputs": reset, "reload_page_table": not reset and table_changed,
                  "reload_sampling_params": reset, "reset_sampling_state": reset}
        if device_sampling:  # as the plugin: sampling_params and reset_batch only with device sampling
            kw["sampling_params"] = SamplingParams.greedy(width)
            if not self._contract:
                kw["reset_batch"] = reset
        if remap is not None:
            kw["slot_remap"] = int32_tensor(remap)
        self._last_table = tuple(table)
        with self.guard("decode_forward", self.steps):
            out = self.gen.decode_forward(tokens=int64_tensor(tokens).reshape(-1, 1),
                                          page_table=int32_tensor(table, rows=True), kv_cache=self.kv_cache,
                                          start_pos=int32_tensor(positions), enable_trace=True, read_from_device=False,
                                          **kw)
        with self.guard("read_decode_output", self.steps):
            read = begin_read(self.gen, out)  # enqueued now, waited on later
        # the plugin reads the active rows (front-packed in its layout), not the padding
        used = max(st.slot for st in rows) + 1
        self._pending.append((read, used, device_sampling, [(st.slot, st.req_id) for st in rows], sampled))
        for st in rows:
            st.computed += 1
            st.fresh = False
        return read

    def resolve_pending(self, until=None) -> None:
        """Read outstanding decode outputs, oldest first (up to ``until``, else all)."""
        while self._pending and (until is None or any(p[0] is until for p in self._pending)):
            (host, events), used, device_sampling, rows, sampled = self._pending.popleft()
            with self.guard("event_synchronize and process_decode_output_host", self.steps):
                toks = finish_read(self.gen, self.ttnn, host, events, used, sampled=device_sampling)
            for slot, rid in rows:
                tok = int(toks[slot])
                sampled[rid] = [tok]
                st = self.reqs.get(rid)
                if st is not None:
                    st.tokens.append(tok)


class Engine:
    """The in-process path (sweeps): EngineCore.step_with_batch_queue with a batch queue of 2
    (async scheduling), driving the same ``TTRunner`` the served path's worker drives.
    ``batch_queue=1``: each step's output is processed before the next is scheduled, as
    EngineCore.step without async scheduling (what the plugin falls back to for a model that
    does not declare ``supports_async_decode``): the host is never a step behind."""

    def __init__(self, scheduler, runner: TTRunner, batch_queue: int = 2):
        if batch_queue not in (1, 2):
            raise ValueError(f"batch_queue must be 1 (sync) or 2 (async scheduling), got {batch_queue!r}")
        self.s = scheduler
        self.runner = runner
        self.batch_queue = batch_queue
        self.queue: deque = deque()
        self.outputs: dict[str, list[int]] = {}
        self.finished: set[str] = set()
        self.steps = 0

    def add_request(self, request) -> None:
        self.s.add_request(request)

    def has_work(self) -> bool:
        return self.s.has_requests() or bool(self.queue)

    def step(self) -> None:
        if self.s.has_requests():
            so = self.s.schedule()
            self.steps += 1
            self.queue.appendleft((self.runner.execute(so), so))
            if len(self.queue) < self.batch_queue and (so.total_num_scheduled_tokens > 0 or self.s.has_requests()):
                return  # schedule k+1 before processing k
        elif not self.queue:
            return
        result, so = self.queue.pop()
        eco = self.s.update_from_output(so, result())
        for client in eco.values():
            for o in client.outputs:
                self.outputs.setdefault(o.request_id, []).extend(o.new_token_ids)
                if o.finish_reason is not None:
                    self.finished.add(o.request_id)
