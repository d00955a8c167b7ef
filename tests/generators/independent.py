"""An independently written generator for ttsim's suite, plus four regressed variants.

Written from the framework's documentation only, without reading ttsim's own generator
(``model/generator.py``), the other generators under ``tests/generators/``, the shared-arms
harness, or any test that contains a generator. Sources read:

- ``README.md``; ``docs/generators.md`` (the contract, the factory signature, ``ttsim_flags``,
  ``bucket_policy``, ``on_merge``); ``docs/fidelity.md`` (the ledger of mechanisms: per-width
  stores, in-trace sampling, ``plus_one``, the keep rule, marks, remap gather, bucket choice,
  when the merge runs); ``docs/arms.md``; ``docs/model.md``; ``docs/ttsim.md``;
  ``docs/ttnn-coverage.md``; ``docs/upstream.md``;
- ``../shared/DESIGN.md`` sections 1, 4, 8, 9 and 10 (production's merge and its three fixes);
- ``model/protocol.py`` (the plugin's calls), ``model/flags.py`` (the switches),
  ``model/merge_events.py`` (the records reported through ``on_merge``), ``model/merge_rule.py``
  (read, NOT called: the rule below is written here from DESIGN.md section 1 and the flag
  docstrings), the docstrings of ``model/serving.py``, and the public signatures and docstrings
  of ``model/qwen36.py`` and ``model/markov.py``;
- ttsim's public ttnn functions (``from_torch``, ``copy_host_to_device_tensor``, traces,
  events, ``plus_one``, ``get_device_tensors``) and their docstrings.

Mechanics (production's, as those documents describe them):

- one decode store per (width, sampling mode), widths 1/2/4/8; a width's persistent inputs
  (tokens ``[1, W]`` uint32, positions ``[W]`` int32, page table ``[W, pages]`` int32, state
  slots ``[W]`` int32, all ROW_MAJOR) are created from the host's values at that width's first
  decode, then its decode is captured as a trace;
- the traced body decodes, samples greedily ON DEVICE straight into the store's own token
  input, and advances the store's positions with ``plus_one(skip_negative_entries=True)``,
  so between reloads the device carries the batch and the (one step stale) host tokens are
  ignored; only the page table is refreshed from the host every step;
- a reload is ``reset_batch`` or the first decode after any prefill (the mode switch): the
  width is chosen there (``bucket_policy``); into a width that already has a store the merge
  reads that store's token and position inputs (blocking, shard 0), pads them to the padded
  batch (token 0, position -1), gathers them by ``slot_remap``, and keeps per row, on EVERY
  row, the device's token and position where ``dev_pos == host_pos or dev_pos == host_pos + 1``;
  else the host's;
- production's fixes, switched by ``flags``: the prefilled-slot marks (every ``empty_slots``
  entry of every prefill call, the whole set cleared after every decode; a marked row takes the
  host), the position clamp (device positions outside ``[0, max_context)`` become -1 before any
  comparison), the batch guard (``(dev_pos != -1) != (host_pos != -1)`` anywhere in the bucket
  sends every row to the host), and the merge itself (off: the host's tokens and positions
  are restaged at EVERY decode, the pre-merge behaviour of ``model/flags.py``).

The merge rule is written here (``IndependentGenerator._merge``), not ``model.merge_rule.decide_merge``.

Variants (the same code with one thing lost, each still declaring every flag it is handed):
``IndependentNoMarks``, ``IndependentNoGuard``, ``IndependentNoClamp``, ``IndependentNoMerge``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from model.flags import GeneratorFlags
from model.merge_events import MergeEvent, MergeInputs, MergeRow
from model.protocol import is_greedy

WIDTHS = (1, 2, 4, 8)


def _smallest_width(rows: int) -> int:
    """The smallest decode width holding ``rows`` rows."""
    for w in WIDTHS:
        if w >= rows:
            return w
    raise ValueError(f"{rows} decode rows do not fit the widest decode width {WIDTHS[-1]}")


def _ints(x) -> list[int]:
    """A 1-D sequence (torch tensor, list, tuple) as Python ints."""
    if x is None:
        return []
    if isinstance(x, torch.Tensor):
        return [int(v) for v in x.reshape(-1).tolist()]
    return [int(v) for v in x]


def _as_int32(values: list[int]) -> torch.Tensor:
    """Python ints as an int32 tensor, each wrapped to its low 32 bits (a garbage uint32 token
    kept from the device must be restaged bit for bit, not overflow)."""
    return torch.tensor([((v & 0xFFFFFFFF) ^ 0x80000000) - 0x80000000 for v in values], dtype=torch.int32)


@dataclass
class _DeviceOutput:
    """What ``decode_forward(read_from_device=False)`` hands the plugin: the store's output
    tensor on the device, still to be read. ``is_tokens``: sampled tokens, else logits."""
    tensor: object
    width: int
    is_tokens: bool
    rows: int  # the batch the plugin passed (its output has as many rows)


@dataclass
class _HostOutput:
    """A read in flight (``read_decode_output``): a host tensor that lands by the event."""
    tensor: object
    width: int
    is_tokens: bool
    rows: int  # the batch the plugin passed (its output has as many rows)


class _DecodeStore:
    """One width's persistent decode inputs and (when traced) its captured decode.

    The inputs live as long as the generator; a traced body reads them at their addresses on
    every replay, so the host only ever writes into them (``copy_host_to_device_tensor``)."""

    def __init__(self, gen: "IndependentGenerator", width: int, sampled: bool, tok, pos, pt, slots):
        self.gen, self.width, self.sampled = gen, width, sampled
        tt = gen.tt
        mesh, rm = gen.mesh_device, tt.ROW_MAJOR_LAYOUT
        # created FROM host values (initialized memory), as upstream's decode inputs are
        self.tokens = tt.from_torch(_as_int32(tok).reshape(1, width), dtype=tt.uint32, layout=rm, device=mesh)
        self.positions = tt.from_torch(_as_int32(pos), dtype=tt.int32, layout=rm, device=mesh)
        self.page_table = tt.from_torch(pt.to(torch.int32).contiguous(), dtype=tt.int32, layout=rm, device=mesh)
        self.slots = tt.from_torch(_as_int32(slots), dtype=tt.int32, layout=rm, device=mesh)
        self.trace_id = None
        self.logits = None  # the host-sampling body's output (kept alive with its trace)

    def _body(self):
        """One decode step on the device. Device sampling: argmax into the token INPUT, then
        the positions advance (pad rows at -1 stay -1). Host sampling: the logits are the output."""
        model, tt = self.gen.model, self.gen.tt
        logits = model.decode(self.tokens, self.positions, self.page_table, self.slots)
        if not self.sampled:
            return logits
        model.sample_on_device(logits, self.tokens)
        tt.deallocate(logits)
        tt.plus_one(self.positions, skip_negative_entries=True)
        return self.tokens

    def run(self, traced: bool):
        """Run one step; the first traced run captures the body, then replays it."""
        mesh, tt = self.gen.mesh_device, self.gen.tt
        if not traced:
            out = self._body()
            if not self.sampled:
                if self.logits is not None and self.logits is not out:
                    tt.deallocate(self.logits)
                self.logits = out
            return out
        if self.trace_id is None:
            self.trace_id = tt.begin_trace_capture(mesh, cq_id=0)
            out = self._body()
            tt.end_trace_capture(mesh, self.trace_id, cq_id=0)
            if not self.sampled:
                self.logits = out
        # non-blocking: the host goes on to submit the next step (async-ahead)
        tt.execute_trace(mesh, self.trace_id, cq_id=0, blocking=False)
        return self.tokens if self.sampled else self.logits

    def write(self, *, tok=None, pos=None, pt=None, slots=None):
        """Stage host values into the persistent inputs (only the ones given)."""
        tt = self.gen.tt
        rm = tt.ROW_MAJOR_LAYOUT
        if tok is not None:
            tt.copy_host_to_device_tensor(
                tt.from_torch(_as_int32(tok).reshape(1, self.width), dtype=tt.uint32, layout=rm), self.tokens)
        if pos is not None:
            tt.copy_host_to_device_tensor(tt.from_torch(_as_int32(pos), dtype=tt.int32, layout=rm),
                                            self.positions)
        if pt is not None:
            tt.copy_host_to_device_tensor(
                tt.from_torch(pt.to(torch.int32).contiguous(), dtype=tt.int32, layout=rm), self.page_table)
        if slots is not None:
            tt.copy_host_to_device_tensor(tt.from_torch(_as_int32(slots), dtype=tt.int32, layout=rm),
                                            self.slots)

    def read_state(self) -> tuple[list[int], list[int]]:
        """The device's token and position inputs, read BLOCKING from the first chip (the
        read waits for every queued step that writes them)."""
        tt = self.gen.tt
        tok = tt.to_torch(tt.get_device_tensors(self.tokens)[0])
        pos = tt.to_torch(tt.get_device_tensors(self.positions)[0])
        # tokens are uint32 on the device: read them back unsigned
        return [v & 0xFFFFFFFF for v in _ints(tok)], _ints(pos)


class IndependentGenerator:
    """A generator speaking model/protocol.py on ttsim's models, with production's merge and
    fixes. Built as ``IndependentGenerator(model, ttnn, mesh_device, *, flags, max_context,
    max_pages, max_slots, enable_trace=True, bucket_policy=None)`` (docs/generators.md)."""

    #: the switches this generator honours (docs/generators.md, "Flags")
    ttsim_flags = ("prefilled_slots_fix", "merge_batch_guard", "position_clamp", "merge")

    # What each variant loses (the regression switches; the flags still say "on").
    _records_marks = True
    _applies_guard = True
    _applies_clamp = True
    _keeps_device = True

    def __init__(self, model, ttnn_module, mesh_device, *, flags: GeneratorFlags | None = None, max_context: int,
                 max_pages: int, max_slots: int, enable_trace: bool = True, bucket_policy=None,
                 supports_async_decode: bool = True, async_keep_gate: bool = True):
        # The last two are not in docs/generators.md's signature; the suite's upstream-scenario
        # tests pass them (docs/fidelity.md, "the keep's async-decode gate"). A model without
        # async decode runs under synchronous scheduling (the plugin's rule) and, with the gate
        # (tt-metal #54565), never keeps device state at a reload.
        self.tt = ttnn_module  # the backend in use (ttsim, or real ttnn under --hil)
        self.model = model
        self.mesh_device = mesh_device
        self.flags = flags if flags is not None else GeneratorFlags()
        self.max_context = int(max_context)
        self.max_pages = int(max_pages)
        self.max_slots = int(max_slots)
        self.enable_trace = bool(enable_trace)
        self.bucket_policy = bucket_policy
        self.on_merge = None  # set by the runner when it wants our merge records
        #: the plugin keeps vLLM's async scheduling only for a model declaring this
        self.model_capabilities = {"supports_async_decode": bool(supports_async_decode)}
        self.async_keep_gate = bool(async_keep_gate)

        self._stores: dict[tuple[int, bool], _DecodeStore] = {}
        self._width: int | None = None  # the width that ran last
        self._prefilled_since_decode = False  # the mode switch: a prefill ran since the last decode
        self._marks: set[int] = set()  # slots prefilled since the last decode (the fix's record)
        self._step = 0

    # -- KV cache and warm-up: our models own their caches, and nothing needs compiling -----------
    def allocate_kv_cache(self, shape, dtype, num_layers):
        return []

    def warmup_model_prefill(self, enable_trace=False, kv_cache=None, can_sample_on_device=None, **_):
        return None

    def warmup_model_decode(self, enable_trace=False, kv_cache=None, max_batch_size=None, num_blocks=None,
                            can_sample_on_device=None, **_):
        # Each width's store is created at its first decode (from host values), as production's
        # per-width stores are; nothing is captured here.
        return None

    # -- prefill -------------------------------------------------------------------------------
    def prefill_forward(self, tokens, page_table, kv_cache=None, enable_trace=False, prompt_lens=None,
                        start_pos=None, empty_slots=None, sampling_params=None, **_):
        """Prefill ``tokens[i, start_pos[i]:prompt_lens[i]]`` into state slot ``empty_slots[i]``;
        logits ``[B, 1, vocab]`` (host sampling), or greedy tokens ``[B]`` with ``sampling_params``."""
        rows = tokens.shape[0]
        ends = _ints(prompt_lens) if prompt_lens is not None else [tokens.shape[1]] * rows
        starts = _ints(start_pos) if start_pos is not None else [0] * rows
        slots = _ints(empty_slots) if empty_slots is not None else list(range(rows))
        out = []
        for i in range(rows):
            seq = [int(t) for t in tokens[i, starts[i]:ends[i]].tolist()]
            logits = self.model.prefill(seq, slot=slots[i], page_table_row=page_table[i].to(torch.int32),
                                        start_pos=starts[i])
            out.append(logits.reshape(-1).to(torch.float32))
            if self._records_marks:
                self._marks.add(slots[i])  # every row, on every chunk
        self._prefilled_since_decode = True
        logits = torch.stack(out).unsqueeze(1)
        if sampling_params is not None:  # sample_on_device "all": greedy tokens
            return torch.argmax(logits[:, -1], dim=-1)
        return logits

    # -- decode --------------------------------------------------------------------------------
    def _choose_width(self, host_pos: list[int]) -> int:
        active = [i for i, p in enumerate(host_pos) if p >= 0]
        rows = active[-1] + 1 if active else 1  # the highest live row (rows may be unpacked)
        width = self.bucket_policy(rows) if self.bucket_policy is not None else _smallest_width(rows)
        if width not in WIDTHS or width < rows:
            width = _smallest_width(rows)
        return width

    def decode_forward(self, tokens, start_pos, page_table=None, kv_cache=None, sampling_params=None,
                       reset_batch=False, slot_remap=None, enable_trace=True, read_from_device=False, **_):
        # Positional order as tt-metal's Generator.decode_forward (tokens, start_pos, page_table,
        # kv_cache): the plugin passes keywords, but the suite's direct calls are positional.
        self._step += 1
        host_tok = _ints(tokens)
        host_pos = _ints(start_pos)
        pt = page_table if isinstance(page_table, torch.Tensor) else torch.tensor(page_table)
        if pt.dim() == 1:  # one row given as a flat page-table row
            pt = pt.unsqueeze(0)
        sampled = sampling_params is not None
        if sampled and not is_greedy(sampling_params):
            raise ValueError(f"{type(self).__name__} samples greedily only (temperature 0 or top-k 1), on the device")
        traced = self.enable_trace and bool(enable_trace)

        remap = _ints(slot_remap) if slot_remap is not None else None
        if remap is not None:
            # per-slot model state follows its request, exactly once; afterwards row i is slot i
            self.model.gather_slots(remap)

        reload = bool(reset_batch) or self._prefilled_since_decode or remap is not None or self._width is None
        if not sampled:
            reload = True  # host sampling: the host feeds every step, nothing lives on the device
        previous = self._width
        if reload:
            width = self._choose_width(host_pos)
        else:
            width = previous
            live = [i for i, p in enumerate(host_pos) if p >= 0]
            if live and live[-1] >= width:
                raise RuntimeError(f"{type(self).__name__}: row {live[-1]} is live but the batch did not change "
                                   f"(no reset_batch) and width {width} holds rows 0..{width - 1}")

        # the plugin pads decode to capacity; vLLM's stock (mixed) steps may send fewer rows:
        # rows past the batch are padding (token 0, position -1, a zero page-table row)
        short = max(0, width - len(host_pos))
        h_tok = (host_tok + [0] * short)[:width]
        h_pos = (host_pos + [-1] * short)[:width]
        h_pt = pt[:width].to(torch.int32)
        if short:
            h_pt = torch.cat([h_pt, torch.zeros(short, h_pt.shape[1], dtype=torch.int32)])
        h_slots = [i if p >= 0 else -1 for i, p in enumerate(h_pos)]
        store = self._stores.get((width, sampled))
        if store is None:
            # the width's first decode: its inputs are the host's values
            store = _DecodeStore(self, width, sampled, h_tok, h_pos, h_pt, h_slots)
            self._stores[(width, sampled)] = store
        elif not sampled:
            store.write(tok=h_tok, pos=h_pos, pt=h_pt, slots=h_slots)
        elif reload:
            tok, pos = self._merge(store, h_tok, h_pos, remap, previous)
            store.write(tok=tok, pos=pos, pt=h_pt, slots=h_slots)
        elif not self._merging():
            # the pre-merge generator: the host's tokens and positions every step, although
            # between reloads they are one step stale (the doubled output the merge stops)
            store.write(tok=h_tok, pos=h_pos, pt=h_pt)
        else:
            # between reloads the device's tokens and positions carry the batch; blocks may
            # still be added to a request's page-table row, so that is refreshed every step
            store.write(pt=h_pt)

        out = store.run(traced)
        self._width = width
        self._prefilled_since_decode = False
        self._marks.clear()  # the whole set, after every decode, merge or not

        result = _DeviceOutput(out, width, sampled, len(host_pos))
        if read_from_device:
            host, events = self.read_decode_output(result, async_read=False)
            for e in events:
                self.tt.event_synchronize(e)
            return self.process_decode_output_host(host, is_tokens=sampled)
        return result

    # -- the merge -----------------------------------------------------------------------------
    def _merging(self) -> bool:
        """Device state is kept at all (the ``merge`` switch; a regressed variant never keeps it)."""
        return self.flags.merge and self._keeps_device

    def _keep_gated_off(self) -> bool:
        """tt-metal #54565's gate: the keep runs only for a model declaring async decode."""
        return self.async_keep_gate and not self.model_capabilities["supports_async_decode"]

    def _merge(self, store: _DecodeStore, host_tok, host_pos, remap, previous) -> tuple[list[int], list[int]]:
        """The inputs a reload into an existing store writes: per row the device's token and
        position where the rule keeps them, else the host's. Reports the decision (on_merge)."""
        width, f = store.width, self.flags
        dev_tok, dev_pos = store.read_state()
        # pad the read to the padded batch: rows this store never had hold no device state
        pad = max(width, len(remap)) if remap is not None else width
        dev_tok = dev_tok + [0] * (pad - width)
        dev_pos = dev_pos + [-1] * (pad - width)
        if remap is not None:  # row i takes old slot remap[i]'s device state
            dev_tok = [dev_tok[s] for s in remap]
            dev_pos = [dev_pos[s] for s in remap]
        dev_tok, raw_pos = dev_tok[:width], dev_pos[:width]

        merging = self._merging()
        cmp_pos = list(raw_pos)
        if merging and f.position_clamp and self._applies_clamp:
            # garbage (e.g. two bf16 activations read as one int32) is no position at all
            cmp_pos = [p if 0 <= p < self.max_context else -1 for p in cmp_pos]
        host_live = [p >= 0 for p in host_pos]
        marked = [r in self._marks for r in range(width)]

        if not merging or self._keep_gated_off():
            keep = [False] * width
            reasons = ["inactive" if not a else ("no merge" if not merging else "no async decode: host")
                       for a in host_live]
        else:
            # upstream's keep, on every row (no activity mask)
            keep = [d == h or d == h + 1 for d, h in zip(cmp_pos, host_pos)]
            reasons = [("device ahead/equal" if k else "positions differ") if a
                       else ("pad row: device kept" if k and d >= 0 else "inactive")
                       for a, k, d in zip(host_live, keep, cmp_pos)]
            if f.prefilled_slots_fix:
                for r in range(width):
                    if marked[r]:
                        if keep[r]:
                            reasons[r] = "prefilled slot: host forced"
                        keep[r] = False
        rejected = False
        if merging and not self._keep_gated_off() and f.merge_batch_guard and self._applies_guard:
            if [p != -1 for p in cmp_pos] != [p != -1 for p in host_pos]:
                rejected = True  # the buffer's pattern belongs to another batch: all host
                keep = [False] * width
                reasons = ["guard: pattern mismatch" if a else "inactive" for a in host_live]

        tok = [d if k else h for k, d, h in zip(keep, dev_tok, host_tok)]
        pos = [d if k else h for k, d, h in zip(keep, cmp_pos, host_pos)]

        if self.on_merge is not None:
            rows = [MergeRow(slot=r, host_token=host_tok[r], host_pos=host_pos[r], dev_token=dev_tok[r],
                             dev_pos=cmp_pos[r], source="device" if keep[r] else "host", reason=reasons[r],
                             prefilled=marked[r]) for r in range(width)]
            self.on_merge(MergeEvent(step=self._step, bucket=width, previous_bucket=previous, fresh_trace=False,
                                     guard_rejected=rejected, rows=rows,
                                     inputs=MergeInputs(source_bucket=width, dev_tokens=list(dev_tok),
                                                        dev_positions=list(raw_pos), max_context=self.max_context,
                                                        flags=dataclasses.asdict(f))))
        return tok, pos

    # -- reading the output --------------------------------------------------------------------
    def read_decode_output(self, out, async_read=True):
        """Start reading a decode output (first chip) and record an event the host waits on."""
        if not isinstance(out, _DeviceOutput):
            return out, []
        tt = self.tt
        shard = tt.get_device_tensors(out.tensor)[0]
        host = shard.cpu(blocking=not async_read)
        events = [tt.record_event(self.mesh_device, 0)] if async_read else []
        return _HostOutput(host, out.width, out.is_tokens, out.rows), events

    def process_decode_output_host(self, host_output, is_tokens=True):
        """The read output as the plugin takes it, one row per row it passed: tokens ``[B, 1]``
        (the shape of its token input) or logits ``[B, 1, vocab]``. Rows past the width are
        padding (zeros) and are never read."""
        if isinstance(host_output, torch.Tensor):
            return host_output
        t = self.tt.to_torch(host_output.tensor)
        w, rows = host_output.width, host_output.rows
        if host_output.is_tokens:
            flat = t.reshape(-1)[:w].to(torch.int64) & 0xFFFFFFFF
            flat = torch.cat([flat, torch.zeros(max(0, rows - w), dtype=torch.int64)])[:rows]
            return flat.reshape(rows, 1)
        logits = t.reshape(w, -1).to(torch.float32)
        logits = torch.cat([logits, torch.zeros(max(0, rows - w), logits.shape[1])])[:rows]
        return logits.unsqueeze(1)


class IndependentNoMarks(IndependentGenerator):
    """Regressed: never records prefilled slots (so never forces them), though the flag is on."""
    _records_marks = False


class IndependentNoGuard(IndependentGenerator):
    """Regressed: the batch guard is never applied, though the flag is on."""
    _applies_guard = False


class IndependentNoClamp(IndependentGenerator):
    """Regressed: the position clamp is never applied, though the flag is on."""
    _applies_clamp = False


class IndependentNoMerge(IndependentGenerator):
    """Regressed: never keeps device state (the host's tokens and positions at every decode,
    the pre-merge behaviour), though the flag is on."""
    _keeps_device = False
