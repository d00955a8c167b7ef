"""The generator: prefill, traced decode with on-device sampling, and the async-ahead merge.

It speaks the protocol the Tenstorrent plugin drives (model/protocol.py) and builds each
mechanism as upstream tt-metal does (``models/tt_transformers/tt/generator.py`` @ 50868c00,
F1; qwen36's per-width trace stores; docs/fidelity.md names each source):

- Decode runs as one captured trace per width (1/2/4/8 rows), every width captured in the
  plugin's decode warm-up (``warmup_model_decode(enable_trace=True)``) on F1's warm-up inputs
  (tokens 0, positions 0), width by width: qwen36's vLLM path uses "the standard pos-0 warmup
  capture" (``generator_interface.py`` @ 040a27c1), per width (``warmup_decode_buckets``,
  ``qwen36_vllm.py`` @ bdfbb052). A width's inputs are created (initialized) after the widths
  before it were captured, so they may sit where those traces write their intermediates, and
  their replays overwrite them (trace-buffer reuse, which qwen36 opts into; tt-metal #56474's
  first half): the route by which activation bytes reach a position buffer. What else the
  warm-up order puts behind which trace is the plugin's to decide (model/serving.py).
- Inside the trace argmax writes each sampled token into the trace's own token input and
  ``plus_one`` advances its positions: between reloads the device is authoritative. A model
  declaring ``_tt_vllm_always_refresh_decode_trace_inputs`` (the hybrid, as qwen36's model
  does) instead has every input restaged from the host at every step and its sample written to
  a buffer of its own (F1: ``reload_inputs``, ``_decode_token_feedback_buffer``); it takes no
  async decode.
- Prefill with ``enable_trace`` (the plugin's ``trace_mode`` "all") replays the model's chunk
  trace, captured in ``warmup_model_prefill(enable_trace=True)``, for each full chunk.
- A reload is a ``reset_batch`` or the first decode after a prefill (F1's mode switch). At a
  reload into a width that already has a trace, the merge reads that width's token and
  position inputs (a blocking read of shard 0), gathers them by ``slot_remap``, and keeps
  per row (every row: there is no activity mask) the device's token and position where
  ``dev_pos == host_pos`` or ``dev_pos == host_pos + 1``, else the host's; then every input
  is copied from the host. The fixes in :mod:`model.flags` guard that rule.
- The slots prefilled since the last decode are marked on every prefill call and all
  cleared after every decode; the fix forces the host on row ``slot`` (after the gather).
- The keep runs only for a model declaring ``supports_async_decode`` (``model_capabilities``),
  as F1's ``decode_forward`` since tt-metal #54565; ``async_keep_gate=False`` is the code before
  it (the named scenario ``upstream-54565``, harness/upstream_bugs.py).

Nothing here knows which seed or fault is in force: the defects come from what the buffers
really hold -- a width's inputs left from an older batch, another trace's intermediates.
The what-if knobs (``whatif_*``) switch on mechanisms beyond upstream, for the labelled
``what-if`` arm only.
"""

from __future__ import annotations

import functools
import warnings
from dataclasses import asdict, dataclass
from typing import Callable

import torch

from .flags import GeneratorFlags
from .host_ints import int32_bits, int32_tensor, int64_tensor
from .merge_events import MergeEvent, MergeInputs, MergeRow
from .merge_rule import MergeDecision, decide_merge, int_list
from .protocol import is_greedy
from .slot_remap import check_remap

BUCKETS = (1, 2, 4, 8)


def nearest_bucket(rows: int) -> int:
    for b in BUCKETS:
        if rows <= b:
            return b
    raise ValueError(f"a decode batch of {rows} rows exceeds the largest bucket ({BUCKETS[-1]})")


@functools.lru_cache(maxsize=64)
def _flag_dict(flags: GeneratorFlags) -> dict:
    """``asdict(flags)``, once per flag set (flags are frozen); callers copy it."""
    return asdict(flags)


@dataclass
class MergeSite:
    """One merge's inputs as read (rows of ints, padded to the bucket): what the decision
    sees, and what its event reports."""
    step: int
    bucket: int
    previous_bucket: int | None
    fresh: bool
    source_bucket: int
    max_context: int
    dev_tok: list[int]
    dev_pos: list[int]
    host_tok: list[int]
    host_pos: list[int]
    recorded: list[bool]  # per row: is ROW r's slot marked prefilled since the last decode (F1)
    # per row: is the slot gathered to row r marked (the candidate fix marks_follow_remap);
    # None without a remap, where both are the same. Kept here, not chosen by the generator,
    # so arms differing only in that flag can share a run (harness.shared_arms)
    recorded_remapped: list[bool] | None = None

    def marks(self, flags: GeneratorFlags) -> list[bool]:
        """The prefilled marks the merge under ``flags`` forces the host on."""
        if flags.marks_follow_remap and self.recorded_remapped is not None:
            return self.recorded_remapped
        return self.recorded

    def decide(self, flags: GeneratorFlags) -> MergeDecision:
        return decide_merge(flags, self.max_context, self.dev_tok, self.dev_pos, self.host_tok, self.host_pos,
                            self.marks(flags))

    def event(self, d: MergeDecision, flags: GeneratorFlags) -> MergeEvent:
        cols = zip(self.host_tok, self.host_pos, self.dev_tok, d.dev_pos, d.keep, d.reasons, self.marks(flags))
        rows = [MergeRow(r, ht, hp, dt, dp, "device" if k else "host", why, rec)
                for r, (ht, hp, dt, dp, k, why, rec) in enumerate(cols)]
        return MergeEvent(self.step, self.bucket, self.previous_bucket, self.fresh, d.guard_rejected, rows,
                          MergeInputs(self.source_bucket, list(self.dev_tok), list(self.dev_pos),
                                      self.max_context, dict(_flag_dict(flags))))


def _rows(tokens) -> list[list[int]]:
    """Token rows as lists of ints: a [B, S] tensor (rows padded past their end) or lists."""
    return tokens.tolist() if hasattr(tokens, "tolist") else [list(r) for r in tokens]


class _DecodeTrace:
    """One width's decode: persistent input buffers and (once captured) a trace.

    As upstream (tt-metal ``generator.py`` ``_prepare_decode_trace_text``; qwen36's per-width
    trace stores), a width's inputs are created from host values (``from_torch(...,
    device=)``: initialized; the decode warm-up's zeros) and the trace is captured on them. A
    width created after other traces were captured gets its inputs wherever the allocator puts
    them, possibly over memory a live trace writes its intermediates to: qwen36 opts into that
    trace-buffer reuse, so another width's replay may overwrite these inputs (ttsim replays
    intermediates at their captured addresses). That is the route by which activation bytes
    reach a position buffer.

    ``host=None`` (what-if knob ``whatif_never_run_bucket``): ``allocate_tensor_on_device``
    instead, for every width before any capture.

    ``feedback``: argmax writes the sample into the trace's own token input (on-device token
    feedback); off for a model that restages its inputs every step
    (``_tt_vllm_always_refresh_decode_trace_inputs``), whose sample goes to a buffer of its own,
    as F1's ``_decode_token_feedback_buffer`` returns None for such a model.
    """

    def __init__(self, ttnn, device, model, bucket: int, max_pages: int, enable_trace: bool,
                 host: tuple | None = None, feedback: bool = True):
        self.ttnn, self.device, self.model = ttnn, device, model
        self.bucket = bucket
        self.enable_trace = enable_trace
        self.feedback = feedback
        rm = ttnn.ROW_MAJOR_LAYOUT
        if host is None:  # the what-if: uninitialized, as the first model had it
            alloc = ttnn.allocate_tensor_on_device
            self.tokens = alloc(ttnn.Shape([1, bucket]), ttnn.uint32, rm, device)
            self.positions = alloc(ttnn.Shape([bucket]), ttnn.int32, rm, device)
            self.page_table = alloc(ttnn.Shape([bucket, max_pages]), ttnn.int32, rm, device)
            self.slots = alloc(ttnn.Shape([bucket]), ttnn.int32, rm, device)
            self.page_table_host = self.slots_host = None  # what was last written: nothing yet
        else:
            tokens, positions, page_table, slots = host
            mapper = ttnn.ReplicateTensorToMesh(device)

            def put(values, shape, dtype):
                return ttnn.from_torch(values.reshape(shape), dtype=dtype, layout=rm, device=device,
                                       mesh_mapper=mapper)
            with warnings.catch_warnings():
                # upstream acknowledges these as corruptible (trace-buffer reuse opt-in); the
                # hazard is the mechanism, so the warning is expected here
                warnings.filterwarnings("ignore", message="Allocating device buffers is unsafe")
                self.tokens = put(int32_tensor(map(int32_bits, tokens)), (1, bucket), ttnn.uint32)
                self.positions = put(int32_tensor(positions), (bucket,), ttnn.int32)
                self.page_table = put(int32_tensor(page_table, rows=True), (bucket, max_pages), ttnn.int32)
                self.slots = put(int32_tensor(slots), (bucket,), ttnn.int32)
            self.page_table_host, self.slots_host = page_table, tuple(slots)
        self.sampled = self.tokens
        if not feedback:
            self.sampled = ttnn.from_torch(torch.zeros(1, bucket, dtype=torch.int32), dtype=ttnn.uint32, layout=rm,
                                           device=device, mesh_mapper=ttnn.ReplicateTensorToMesh(device))
        # host mirrors for the what-if asynchronous merge read (persistent host tensors)
        self.tok_mirror = ttnn.from_torch(torch.zeros(1, bucket, dtype=torch.int32), dtype=ttnn.uint32, layout=rm)
        self.pos_mirror = ttnn.from_torch(torch.zeros(bucket, dtype=torch.int32), dtype=ttnn.int32, layout=rm)
        self.executed = False
        self.trace_id = None
        self.logits = None

    def compile(self) -> None:
        """F1's compile pass before a capture (``_prepare_decode_trace_text``): the forward run
        eagerly on the inputs, its logits dropped (no sample, no position advance)."""
        self.ttnn.deallocate(self.model.decode(self.tokens, self.positions, self.page_table, self.slots))

    def capture(self) -> None:
        if self.enable_trace and self.trace_id is None:
            self.trace_id = self.ttnn.begin_trace_capture(self.device, cq_id=0)
            self.logits = self._body()
            self.ttnn.end_trace_capture(self.device, self.trace_id, cq_id=0)

    def _body(self):
        logits = self.model.decode(self.tokens, self.positions, self.page_table, self.slots)
        self.model.sample_on_device(logits, self.sampled)
        self.ttnn.plus_one(self.positions, skip_negative_entries=True)
        return logits

    def run(self) -> None:
        if self.trace_id is None:
            self.logits = self._body()
        else:
            self.ttnn.execute_trace(self.device, self.trace_id, cq_id=0, blocking=False)
        self.executed = True


@dataclass
class DecodeOutput:
    """What decode_forward hands back: the trace whose token buffer holds this step's samples."""

    trace: _DecodeTrace
    rows: int
    host: object = None
    event: object = None


#: the decode input-update contract's four commands (tt-metal models/common/decode_contract.py)
CONTRACT_COMMANDS = ("reload_inputs", "reload_page_table", "reload_sampling_params", "reset_sampling_state")


class Generator:
    #: what the model class declares to the plugin (tt-metal's ``model_capabilities``): with
    #: ``supports_async_decode`` the plugin keeps vLLM's async scheduling, so the host trails the
    #: device by a step and the merge's keep recovers the device's token; an instance's
    #: ``supports_async_decode=`` overrides it
    model_capabilities = {"supports_async_decode": True}
    #: 0: the legacy ``reset_batch`` protocol (what the plugin at e3fc8494 sends); 1: the reload
    #: commands (``decode_contract.py``). A subclass may declare it here, as tt-metal's
    #: generators do; ``decode_contract=`` overrides it per instance
    decode_input_update_contract = 0

    def __init__(
        self,
        model,
        ttnn,
        mesh_device,
        *,
        flags: GeneratorFlags,
        max_context: int,
        max_pages: int,
        max_slots: int = 8,
        enable_trace: bool = True,
        bucket_policy: Callable[[int], int] | None = None,
        on_merge: Callable[[MergeEvent], None] | None = None,
        decode_contract: int | None = None,
        supports_async_decode: bool | None = None,
        async_keep_gate: bool = True,
    ):
        if decode_contract is None:  # the class's declaration, a subclass's included
            decode_contract = type(self).decode_input_update_contract
        if decode_contract not in (0, 1):
            raise ValueError(f"decode_contract must be 0 (reset_batch) or 1 (reload commands), got {decode_contract!r}")
        self.decode_input_update_contract = decode_contract
        if supports_async_decode is not None:  # the instance's own declaration (as a subclass's would be)
            self.model_capabilities = {**type(self).model_capabilities, "supports_async_decode": supports_async_decode}
        # tt-metal #54565's fix: the keep runs only for a model declaring supports_async_decode
        # (without vLLM's lag there is no newer device token to recover, only a stale one to
        # adopt); False is the code before it, which kept for every model
        self.async_keep_gate = async_keep_gate
        # the model's declaration (qwen36's model object makes it; F1 reads it): every decode
        # restages its trace inputs from the host and the sample is not fed back into them. Such a
        # model cannot take async decode (a restaged one-step-stale host token is decoded twice),
        # which is why qwen36's wrapper declares supports_async_decode False with it
        self.refresh_inputs = bool(getattr(model, "_tt_vllm_always_refresh_decode_trace_inputs", False))
        if self.refresh_inputs and supports_async_decode is None:
            self.model_capabilities = {**type(self).model_capabilities, "supports_async_decode": False}
        self.model = model
        self.ttnn = ttnn
        self.mesh_device = mesh_device
        self.flags = flags
        self.max_context = max_context
        self.max_pages = max_pages
        self.max_slots = max_slots
        self.enable_trace = enable_trace
        self.bucket_policy = bucket_policy or nearest_bucket
        self.on_merge = on_merge
        self._traces: dict[int, _DecodeTrace] = {}
        self._last_bucket: int | None = None
        self._mode: str | None = None  # "prefill" / "decode": F1's mode, whose switch reloads
        # slots prefilled since the last decode (all cleared after each); the merge reads it only
        # with the fix on (production's Qwen path never consulted it); replays show it as a diagnostic
        self._slots_prefilled_since_decode: set[int] = set()
        self._step = 0
        self._last_read_event = None
        self.guard_rejects = 0
        #: reset by the plugin between its two warm-up phases (model/serving.py start_generator)
        self.already_warmed_up_prefill = False

    @property
    def _traces_prefill(self) -> bool:
        """The model traces its prefill (it has a chunk trace to capture)."""
        return callable(getattr(self.model, "capture_prefill_trace", None))

    @property
    def _async_decode(self) -> bool:
        return bool(self.model_capabilities.get("supports_async_decode", False))

    # -- the plugin's start-up (model/protocol.py) ---------------------------------------
    def allocate_kv_cache(self, kv_cache_shape, dtype, num_layers):
        """The plugin's KV-cache call. Our models own their paged caches (built with the model,
        as qwen36's vLLM wrapper keeps GDN and KV state model-bound), so this checks that vLLM's
        blocks fit them and hands back the model's caches (the plugin passes them back as
        ``kv_cache=``, which this generator accepts and does not read)."""
        blocks, _, block_size, _ = kv_cache_shape
        have = getattr(self.model, "num_blocks", None)
        if have is not None and blocks > have:
            raise ValueError(f"allocate_kv_cache: vLLM planned {blocks} KV blocks; the model's cache holds {have}")
        caches = getattr(self.model, "k_cache", None)
        return [] if caches is None else [[self.model.k_cache[i], self.model.v_cache[i]] for i in sorted(caches)]

    def warmup_model_prefill(self, enable_trace=False, kv_cache=None, can_sample_on_device=False, **kwargs) -> None:
        """Nothing without tracing (ttsim has no program cache; qwen36's compile-only prefill
        warm-up is a no-op too). With tracing, a model that traces its prefill binds its
        prefill-only state and captures its chunk trace now (qwen36_vllm.py @ 01c8afed /
        @ bdfbb052 ``warmup_model_prefill``); once, until the plugin resets
        ``already_warmed_up_prefill``."""
        if not (enable_trace and self.enable_trace) or self.already_warmed_up_prefill:
            return
        self.already_warmed_up_prefill = True
        if self._traces_prefill:
            self.model.capture_prefill_trace()

    def warmup_model_decode(self, enable_trace=False, kv_cache=None, max_batch_size=None, num_blocks=None,
                            can_sample_on_device=True, **kwargs) -> None:
        """With tracing, every width's decode trace is captured now, each on F1's warm-up inputs
        (``WarmupForwardMixin._create_decode_warmup_inputs``: tokens 0, positions 0, page
        table 0): its inputs created from them, a compile pass, the capture, one replay (F1's
        ``decode_forward`` replays once it has captured). Upstream: qwen36's vLLM path uses "the
        standard pos-0 warmup capture" (``generator_interface.py`` @ 040a27c1), per width
        (``warmup_decode_buckets``, qwen36_vllm.py @ bdfbb052; tt-metal #56474: width 1 staged
        first, widths 2/4/8 after its capture). Decode is sampled on the device only, as
        production's."""
        if not can_sample_on_device:
            raise ValueError("warmup_model_decode: this generator samples decode on the device "
                             "(sample_on_device_mode 'all' or 'decode_only')")
        if not (enable_trace and self.enable_trace):
            return
        widths = [b for b in reversed(BUCKETS) if max_batch_size is None or b <= max_batch_size]
        for bucket in widths:
            zero = (0,) * self.max_pages
            trace, created = self._store(bucket, [0] * bucket, [0] * bucket, (zero,) * bucket, tuple(range(bucket)))
            if self.flags.whatif_never_run_bucket:  # the what-if: captured, never staged nor run
                trace.capture()
                continue
            trace.compile()
            trace.capture()
            trace.run()

    # -- prefill ------------------------------------------------------------------------
    def prefill_forward(self, tokens, page_table=None, kv_cache=None, prompt_lens=None, empty_slots=None,
                        start_pos=None, sampling_params=None, enable_trace=False, **kwargs) -> torch.Tensor:
        """Prefill ``tokens[i, start_pos[i]:prompt_lens[i]]`` of each row into slot ``empty_slots[i]``
        (model/protocol.py). Returns the logits after each row's chunk [B, 1, vocab] for the
        caller to sample (upstream without ``sampling_params``), or with ``sampling_params``
        the greedy token per row [B]. Every row's slot is marked as prefilled since the last
        decode (tt-metal's prefill_forward_text does so on every chunk; a chunk that does not
        end its prompt yields an output nobody reads)."""
        if sampling_params is not None and not is_greedy(sampling_params):
            raise ValueError("prefill_forward: this generator samples greedily only (temperature 0 or top_k 1)")
        rows = _rows(tokens)
        n = len(rows)
        if empty_slots is None or len(empty_slots) != n:
            raise ValueError(f"prefill_forward: empty_slots must name one slot per request ({n}), got {empty_slots!r}")
        if page_table is None or len(page_table) != n:
            raise ValueError(f"prefill_forward: page_table must hold one row per request ({n})")
        ends = int_list(prompt_lens) if prompt_lens is not None else [len(r) for r in rows]
        starts = int_list(start_pos) if start_pos is not None else [0] * n
        out: list[torch.Tensor] = []
        for i in range(n):
            slot = int(empty_slots[i])
            if not 0 <= slot < self.max_slots:
                raise ValueError(f"prefill_forward: slot {slot} is outside 0..{self.max_slots - 1}")
            if not 0 <= starts[i] < ends[i] <= len(rows[i]):
                raise ValueError(f"prefill_forward: row {i} asks for tokens [{starts[i]}, {ends[i]}) of "
                                 f"{len(rows[i])}")
            if starts[i] == 0:
                self.model.reset_slot(slot)
            traced = {"traced": True} if enable_trace and self.enable_trace and self._traces_prefill else {}
            logits = self.model.prefill(rows[i][starts[i]:ends[i]], slot=slot, page_table_row=page_table[i],
                                        start_pos=starts[i], **traced)
            out.append(logits.reshape(1, -1))
            self._slots_prefilled_since_decode.add(slot)
        self._mode = "prefill"
        logits = torch.stack(out)  # [B, 1, vocab]
        return torch.argmax(logits[:, -1], dim=-1) if sampling_params is not None else logits

    # -- decode -------------------------------------------------------------------------
    def decode_forward(self, tokens, start_pos, page_table, kv_cache=None, enable_trace=True,
                       read_from_device=True, sampling_params=None, reset_batch=None,
                       slot_remap=None, **commands) -> DecodeOutput:
        """One decode step; row ``r`` holds state slot ``r`` (position -1 = a padding row).

        ``tokens`` [B, 1] / ``start_pos`` [B] are the host's view; the device's own buffers win
        between reloads. ``slot_remap`` [max_slots] (row ``i`` takes slot ``remap[i]``'s state)
        is applied once, to the model's per-slot state and to the device rows the merge reads,
        so that afterwards row ``i`` is slot ``i``. Returns a DecodeOutput, or with
        ``read_from_device`` the sampled tokens [B, 1] (model/protocol.py).

        With ``decode_input_update_contract = 1`` it takes the reload commands instead of
        ``reset_batch`` (model/protocol.py, tt-metal ``models/common/decode_contract.py``).
        """
        if sampling_params is None:
            raise ValueError("decode_forward: this generator samples decode on the device; the plugin passes "
                             "sampling_params with on-device sampling (sample_on_device_mode 'all' or 'decode_only')")
        if not is_greedy(sampling_params):
            raise ValueError("decode_forward: this generator samples greedily only (temperature 0 or top_k 1)")
        staging = self._staging(reset_batch, commands)
        reset_batch = bool(reset_batch)
        # the host's rows as plain ints: a batch is at most 8 rows, and torch ops on tensors
        # that small cost more than the bookkeeping itself
        host_pos, host_tok = int_list(start_pos), [t[0] if isinstance(t, list) else t for t in int_list(tokens)]
        active = [r for r, p in enumerate(host_pos) if p >= 0]
        if not active:
            raise ValueError("decode_forward: no active row (every start_pos is -1)")
        remap = self._check_remap(slot_remap)
        mode_switched = self._mode != "decode"  # the first decode after a prefill (F1)
        self._mode = "decode"
        # under the contract the caller owns the reload policy: no forced reloads of our own
        reload = (reset_batch or mode_switched or self.refresh_inputs) if staging is None else staging == "all"
        needed = max(active) + 1
        # upstream's width: the smallest bucket holding every valid row (qwen36's per-width
        # stores; rows front-packed there, so the highest valid row + 1). Between reloads the
        # rows cannot change, so the policy (which may force a bigger bucket, a seeded knob)
        # is asked at reloads only
        bucket = self.bucket_policy(needed) if reload or self._last_bucket is None else self._last_bucket
        if bucket < needed or bucket not in BUCKETS:
            raise ValueError(f"decode_forward: bucket {bucket} cannot hold {needed} rows"
                             + ("" if reload else " (the rows changed without a reload: reset_batch or reload_inputs)"))
        host_tok, host_pos = self._pad(host_tok, bucket, 0), self._pad(host_pos, bucket, -1)
        given = int_list(page_table)  # one row of page ids per host row ([rows, max_pages])
        if any(len(row) != self.max_pages for row in given[:bucket]):
            raise ValueError(f"decode_forward: page_table rows must hold max_pages={self.max_pages} page ids")
        zero = (0,) * self.max_pages  # padding rows and rows past the host's are neutral
        pt = tuple(zero if host_pos[r] < 0 or r >= len(given) else tuple(given[r]) for r in range(bucket))
        slots = tuple(r if host_pos[r] >= 0 else -1 for r in range(bucket))
        if remap is not None:
            self.model.gather_slots(remap)  # the state follows its request, once

        trace, created = self._store(bucket, host_tok, host_pos, pt, slots)
        fresh = not trace.executed
        keeps = self.flags.merge and (self._async_decode or not self.async_keep_gate)
        merge_runs = (staging is None and keeps and (reset_batch or mode_switched)
                      and (not created or self.flags.whatif_never_run_bucket))
        if staging is not None:
            self._stage_commanded(trace, staging, created, remap, host_tok, host_pos, pt, slots)
        elif not self.flags.merge:
            self._write_tokens(trace, host_tok, host_pos)  # the pre-merge behaviour: host inputs always
        elif merge_runs:
            tok, pos = self._merge(trace, bucket, fresh, host_tok, host_pos, remap)
            self._write_tokens(trace, tok, pos)
        elif reload and not created and (not keeps or self.refresh_inputs):
            # #54565: no keep, the host's inputs at a reload; a refreshing model's every step
            self._write_tokens(trace, host_tok, host_pos)
        # (a width created by this decode runs on the host inputs it was created from)
        if staging is None:
            self._write_tables(trace, pt, slots, force=reload and not created)
        trace.capture()
        trace.run()
        self._last_bucket = bucket
        # F1: the whole set is cleared after every decode, merge or not
        self._slots_prefilled_since_decode.clear()
        self._step += 1
        out = DecodeOutput(trace, bucket)
        if read_from_device:
            host, events = self.read_decode_output(out, async_read=True)
            for event in events:
                self.ttnn.event_synchronize(event)
            return self.process_decode_output_host(host, is_tokens=True)
        return out

    def read_decode_output(self, out: DecodeOutput, async_read: bool = False):
        """Enqueue the read of this step's sampled tokens: with ``async_read`` non-blocking,
        returning ``(host_output, [event])``; else blocking, returning the host output."""
        out.host = out.trace.sampled.cpu(blocking=not async_read)
        out.event = self.ttnn.record_event(self.mesh_device, 0) if async_read else None
        self._last_read_event = out.event
        return (out, [out.event]) if async_read else out

    def process_decode_output_host(self, out: DecodeOutput, is_tokens: bool = True) -> torch.Tensor:
        """The sampled token per row [B, 1] (the caller has waited on the read's events)."""
        if not is_tokens:
            raise ValueError("process_decode_output_host: this generator samples on the device (is_tokens=True)")
        if out.host is None:
            self.read_decode_output(out, async_read=False)
        if out.event is not None:
            self.ttnn.event_synchronize(out.event)
        return int64_tensor(self._host_ints(out.host)[: out.rows]).reshape(-1, 1)

    # -- internals ----------------------------------------------------------------------
    @staticmethod
    def _pad(x: list[int], n: int, fill: int) -> list[int]:
        return x[:n] + [fill] * (n - min(n, len(x)))

    def _chip0(self, t):
        """Chip 0's shard of a mesh tensor (``t`` itself on one chip): the shard the reads read."""
        return self.ttnn.get_device_tensors(t)[0] if self.mesh_device.get_num_devices() > 1 else t

    def _host_ints(self, t) -> list[int]:
        """A tensor's values (chip 0's shard of a mesh tensor), flattened, as ints."""
        return self.ttnn.to_torch(self._chip0(t)).reshape(-1).tolist()

    def _staging(self, reset_batch, commands: dict) -> str | None:
        """None for the legacy ``reset_batch`` protocol; else what the reload commands ask to
        copy into the trace inputs: "all", "page_table_only" or "none" (decode_contract.py)."""
        if self.decode_input_update_contract != 1:
            if commands:
                raise TypeError(f"decode_forward: unexpected argument(s) {', '.join(sorted(commands))} "
                                f"(this generator speaks reset_batch; decode_input_update_contract = 0)")
            return None
        if reset_batch is not None:
            raise ValueError("decode_forward: reset_batch is not part of the decode input-update contract; send "
                             "reload_inputs / reload_page_table / reload_sampling_params / reset_sampling_state")
        unknown = sorted(set(commands) - set(CONTRACT_COMMANDS))
        missing = [c for c in CONTRACT_COMMANDS if c not in commands]
        if unknown or missing:
            raise TypeError(f"decode_forward: the contract takes exactly {', '.join(CONTRACT_COMMANDS)}; "
                            + (f"unexpected {', '.join(unknown)}" if unknown else f"missing {', '.join(missing)}"))
        if commands["reload_inputs"] and commands["reload_page_table"]:
            raise ValueError("decode_forward: reload_page_table is the page-table-only copy and is meaningless with "
                             "reload_inputs=True, which already restages page tables")
        # greedy on-device sampling holds no sampling state: the two sampling commands have nothing to do
        return "all" if commands["reload_inputs"] else "page_table_only" if commands["reload_page_table"] else "none"

    def _stage_commanded(self, trace, staging: str, created: bool, remap, host_tok, host_pos, pt, slots) -> None:
        """The contract's copy: everything from the host ("all"), else the device's token and
        position state kept (moved by ``slot_remap`` exactly once) with, for
        "page_table_only", the page table and slot map from the host."""
        if staging == "all":
            if not created:
                self._write_tokens(trace, host_tok, host_pos)
                self._write_tables(trace, pt, slots, force=True)
            return
        if remap is not None:
            self._write_tokens(trace, *self._gathered(*self._read_device_state(trace, trace.bucket), remap,
                                                      trace.bucket))
        if staging == "page_table_only":
            self._write_tables(trace, pt, slots, force=True)

    def _check_remap(self, slot_remap) -> list[int] | None:
        """``slot_remap`` as ints (the models' one check), or None for the identity (the plugin
        sends None then)."""
        if slot_remap is None:
            return None
        remap = check_remap(slot_remap, self.max_slots)
        return None if remap == list(range(self.max_slots)) else remap

    @staticmethod
    def _gathered(tok: list[int], pos: list[int], remap: list[int], rows: int) -> tuple[list[int], list[int]]:
        """Device rows gathered by the remap (row ``i`` takes slot ``remap[i]``); a slot past the
        rows read holds no device state (token 0, position -1)."""
        picks = remap[:rows]
        return ([tok[s] if s < len(tok) else 0 for s in picks], [pos[s] if s < len(pos) else -1 for s in picks])

    def _store(self, bucket: int, host_tok, host_pos, pt, slots) -> tuple[_DecodeTrace, bool]:
        """The width's trace store, and whether this call created it (from the host's inputs)."""
        if self.flags.whatif_never_run_bucket and not self._traces:
            self._allocate_inputs()
        if bucket in self._traces:
            return self._traces[bucket], False
        self._traces[bucket] = _DecodeTrace(self.ttnn, self.mesh_device, self.model, bucket, self.max_pages,
                                            self.enable_trace, host=(host_tok, host_pos, pt, slots),
                                            feedback=not self.refresh_inputs)
        return self._traces[bucket], True

    def _upload(self, values: torch.Tensor, like, dtype) -> None:
        """Write int32 ``values`` into device tensor ``like`` (same number of elements)."""
        ttnn = self.ttnn
        host = ttnn.from_torch(values.reshape(tuple(like.shape)), dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT)
        ttnn.copy_host_to_device_tensor(host, like)

    def _write_tables(self, trace: _DecodeTrace, page_table: tuple, slots: tuple, force: bool) -> None:
        """The page table and slot map: on a reload (upstream copies every host input then),
        else where the host's differ from what was last written."""
        if force or trace.page_table_host != page_table:
            self._upload(int32_tensor(page_table, rows=True), trace.page_table, self.ttnn.int32)
            trace.page_table_host = page_table
        if force or trace.slots_host != slots:
            self._upload(int32_tensor(slots), trace.slots, self.ttnn.int32)
            trace.slots_host = slots

    def _write_tokens(self, trace: _DecodeTrace, tokens: list[int], positions: list[int]) -> None:
        # staged as int32 bit patterns: a uint32 token of 2**31 or more wraps, as production's
        # int32 staging does
        self._upload(int32_tensor(map(int32_bits, tokens)), trace.tokens, self.ttnn.uint32)
        self._upload(int32_tensor(map(int32_bits, positions)), trace.positions, self.ttnn.int32)

    def _read_device_state(self, trace: _DecodeTrace, bucket: int) -> tuple[list[int], list[int]]:
        """The trace's token/position inputs as the merge reads them.

        Upstream: a blocking ``to_torch`` of shard 0 of each, which waits for the queued device
        work. What-if ``whatif_async_merge_read``: non-blocking copies into host mirrors,
        synchronised on the last decode output read's event, which covers the device work but
        not these copies; with a lagging queue a mirror still holds an older read."""
        ttnn = self.ttnn
        if self.flags.whatif_async_merge_read:
            ttnn.copy_device_to_host_tensor(trace.tokens, trace.tok_mirror, blocking=False)
            ttnn.copy_device_to_host_tensor(trace.positions, trace.pos_mirror, blocking=False)
            if self._last_read_event is not None:
                ttnn.event_synchronize(self._last_read_event)
            tok_src, pos_src = trace.tok_mirror, trace.pos_mirror
        else:
            tok_src, pos_src = trace.tokens, trace.positions
        return self._device_rows(self._host_ints(tok_src), self._host_ints(pos_src), bucket)

    @staticmethod
    def _device_rows(tok: list[int], pos: list[int], bucket: int) -> tuple[list[int], list[int]]:
        """The first ``bucket`` rows of the token and position inputs as read (tokens as uint32)."""
        return [t & 0xFFFFFFFF for t in tok[:bucket]], pos[:bucket]

    def _merge(self, trace, bucket, fresh, host_tok, host_pos, remap) -> tuple[list[int], list[int]]:
        """The production merge of device and host inputs, with the switchable fixes."""
        site = self._site(self._merge_source(trace, self.flags), bucket, fresh, host_tok, host_pos, remap)
        return self._decide(site).merged(site.dev_tok, host_tok, host_pos)

    def _merge_source(self, trace: _DecodeTrace, flags: GeneratorFlags) -> _DecodeTrace:
        """The trace whose inputs the merge reads: upstream reads the inputs of the trace it is
        about to run (qwen36 binds the target width's store first; after a width change they
        hold that width's last batch); the candidate fix merge_from_last_run, the last run's."""
        if flags.merge_from_last_run and self._last_bucket is not None:
            return self._traces[self._last_bucket]
        return trace

    def _site(self, source: _DecodeTrace, bucket, fresh, host_tok, host_pos, remap, dev=None) -> MergeSite:
        """What one merge decides on: ``source``'s device rows (read now, or ``dev`` as read),
        gathered by the remap and padded to the bucket, the host's rows and the prefilled marks."""
        dev_tok, dev_pos = self._read_device_state(source, bucket) if dev is None else dev
        if remap is not None:
            dev_tok, dev_pos = self._gathered(dev_tok, dev_pos, remap, bucket)  # F1: before the rule
        missing = bucket - len(dev_tok)  # rows the source trace never had: no device state
        dev_tok, dev_pos = dev_tok + [0] * missing, dev_pos + [-1] * missing
        # F1 forces the host on ROW ``slot`` for each marked slot, after the gather; the
        # candidate fix forces the row the slot's state was gathered to (MergeSite.marks)
        marked = self._slots_prefilled_since_decode
        recorded = [r in marked for r in range(bucket)]
        remapped = None if remap is None else [remap[r] in marked for r in range(bucket)]
        return MergeSite(self._step, bucket, self._last_bucket, fresh, source.bucket, self.max_context,
                         dev_tok, dev_pos, host_tok, host_pos, recorded, remapped)

    def _decide(self, site: MergeSite) -> MergeDecision:
        """Decide under this generator's flags; count a guard rejection and report the event.
        (The hook a sweep's shared-arms generator overrides to decide several arms at once.)"""
        d = site.decide(self.flags)
        self.guard_rejects += d.guard_rejected
        if self.on_merge is not None:
            self.on_merge(site.event(d, self.flags))
        return d

    def _allocate_inputs(self) -> None:
        """What-if ``whatif_never_run_bucket``: every width's inputs, uninitialized, at once (_store
        calls it before the first width exists)."""
        for bucket in BUCKETS:
            self._traces[bucket] = _DecodeTrace(self.ttnn, self.mesh_device, self.model, bucket,
                                                self.max_pages, self.enable_trace, feedback=not self.refresh_inputs)

    def release(self) -> None:
        """Release every captured trace (a served model's shutdown); the buffers stay allocated."""
        for trace in self._traces.values():
            if trace.trace_id is not None:
                self.ttnn.release_trace(self.mesh_device, trace.trace_id)
                trace.trace_id = None
