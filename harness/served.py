"""A served run's records and ``ttsim serve-explain``: what the served worker decided, per request.

The worker (harness/vllm/worker.py) writes one folder per server run under the records
folder (``<runs>/serve/<start time>-<pid>``, named in the server log):

  run.json        the run: seed, model, fix flags, knobs, step policy
  merges.jsonl    every merge decision as it happens (model/merge_trace.py's format, which
                  ``ttsim replay --trace`` re-decides)
  requests.jsonl  one line per finished request, in finishing order: its engine id, its
                  admission index and engine step (the order and step the engine first scheduled
                  it in: under concurrent clients, the HTTP arrival schedule, which the clients'
                  timing decides; two runs whose schedules match give the same answers),
                  prompt and output token ids, the serial (oracle) answer where it is cheap (the
                  sweep model's, exact on the host), and a divergent request's defect class

The reading half (``ttsim serve-explain``: harness.commands.serve_explain) imports neither torch
nor vLLM unless a request's serial answer must be computed (the Qwen models': one run of the
prompt alone on a fresh device).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from harness.base.errors import UsageError
from harness.defects import classify, verdict_class

RUN, MERGES, REQUESTS = "run.json", "merges.jsonl", "requests.jsonl"
READY_PREFIX = "ttsim records:"  # the server log line that names the folder


def _append(path: Path, record: dict) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (json.dumps(record, sort_keys=True) + "\n").encode())
    finally:
        os.close(fd)


def text_of(ids) -> str:
    """The models' tokenizer is byte level (token id = UTF-8 byte; harness/engine/modeldir.py)."""
    return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")


def records_of(log_text: str) -> list[str]:
    """The records folders a server log names (``ttsim records: DIR``), in order."""
    prefix = READY_PREFIX + " "
    return [line.split(prefix, 1)[1].strip() for line in log_text.splitlines() if prefix in line]


def replay_commands(log_text: str) -> str:
    """What a failing test against a sim server prints so that its run can be read and replayed
    (every records folder the log names); empty when it names none."""
    return "\n".join(f"records: {d}\n  bin/ttsim serve-explain {d}\n  bin/ttsim serve-replay {d}"
                     for d in records_of(log_text))


def replay_line(directory: Path, arm: str | None) -> str:
    return f"bin/ttsim replay --trace {directory / MERGES}" + (f" --arm {arm}" if arm else "")


def _new_folder(parent: Path, name: str) -> Path:
    """``parent/name``, or ``name-2``, ``name-3``... when a run of the same second and process has it."""
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 1000):
        path = parent / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{parent / name}: 999 runs of one second and process")


class ServedRecords:
    """The served worker's recorder: ``on_merge`` (the runner's merge hook), ``admit`` (a new
    request scheduled), ``finish`` (the runner's ``on_finish``)."""

    def __init__(self, root: Path, *, seed: int, model: str, flags, knobs: str, step_policy: str,
                 mesh_cols: int = 1, sdpa_streaming: bool = False, generator: dict | None = None):
        from dataclasses import asdict

        from harness.replay import arm_of

        self.dir = _new_folder(Path(root) / "serve", f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}")
        self.arm = arm_of(flags)
        meta = {"seed": seed, "model": model, "arm": self.arm, "knobs": knobs, "step_policy": step_policy}
        # the rest of what the worker was started with: enough to build it again (harness.vllm.rerun)
        start = {"flags": asdict(flags), "mesh_cols": mesh_cols, "sdpa_streaming": sdpa_streaming,
                 "generator": generator}
        (self.dir / RUN).write_text(json.dumps({**meta, **start}, sort_keys=True, indent=1) + "\n")
        from model.merge_trace import MergeTraceWriter

        self.trace = MergeTraceWriter(str(self.dir / MERGES), **meta)
        self.trace.flush()
        self.merge = flags.merge
        self.blame: dict[str, str] = {}
        self.admitted: dict[str, tuple] = {}  # request -> (admission index, max_tokens, engine step)
        self.count = 0
        self.oracle = None
        if model == "markov":  # exact on the host, so cheap enough for every request
            from model.markov import greedy_reference

            self.oracle = greedy_reference

    def on_merge(self, event) -> None:
        self.trace(event)
        self.trace.flush()
        for row in event.kept_wrong():
            if row.request_id is not None:
                self.blame.setdefault(row.request_id, classify(event, row))

    def admit(self, request_id: str, max_tokens: int, step: int) -> None:
        if request_id not in self.admitted:
            self.admitted[request_id] = (self.count, max_tokens, step)
            self.count += 1

    def finish(self, request_id: str, prompt: list[int], outputs: list[int], decode_log: dict) -> None:
        index, max_tokens, step = self.admitted.pop(request_id, (None, len(outputs), None))
        got = list(outputs[:max_tokens])  # a decode already in flight when vLLM stopped is not an answer
        merge_defect = self.blame.pop(request_id, None)
        serial = self.oracle(tuple(prompt), max_tokens) if self.oracle is not None else None
        equal = None if serial is None else got == serial[:len(got)]
        defect = None
        if equal is False:
            defect = verdict_class(merge_defect=merge_defect, merge_on=self.merge, decode_log=decode_log,
                                   expected=serial, got=got)
        _append(self.dir / REQUESTS, {
            "request": request_id, "admitted": index, "admitted_step": step, "prompt_token_ids": list(prompt),
            "max_tokens": max_tokens,
            "output_token_ids": got, "serial": serial, "equal": equal, "defect": defect,
            "merge_defect": merge_defect, "merge_on": self.merge,
            "decode_log": [[k, *v] for k, v in sorted(decode_log.items())]})


# -- reading -------------------------------------------------------------------------------------

def aliases(request_id: str) -> set[str]:
    """The names a user may know a request by: vLLM's engine id ``<external>-<8 random>``, the
    external id (``cmpl-<id>-<choice>``), the response id (``cmpl-<id>``) and the id the client
    sent (``request_id`` in the body)."""
    names = {request_id}
    external, _, suffix = request_id.rpartition("-")
    if len(suffix) != 8 or not external:  # not vLLM's randomised id: the id is the external one
        return names
    names.add(external)
    stem, _, choice = external.rpartition("-")
    if choice.isdigit() and stem:
        names.add(stem)
        for prefix in ("cmpl-", "chatcmpl-"):
            if stem.startswith(prefix):
                names.add(stem[len(prefix):])
    return names


def load(directory: str) -> tuple[Path, dict, list[dict]]:
    """The run's meta and request records; a UsageError naming what is missing."""
    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"served run folder {directory} does not exist (the server log names it: '{READY_PREFIX} ...')")
    if not (d / RUN).is_file():
        raise UsageError(f"{directory} is not a served run folder (no {RUN})")
    meta = json.loads((d / RUN).read_text())
    reqs = []
    if (d / REQUESTS).is_file():
        for n, line in enumerate((d / REQUESTS).read_text().splitlines(), 1):
            try:
                reqs.append(json.loads(line))
            except json.JSONDecodeError:
                raise UsageError(f"{d / REQUESTS}:{n}: not JSON (a server killed mid-write?)") from None
    return d, meta, reqs


def schedule(directory: str) -> tuple[Path, dict, list[dict]]:
    """The run's folder, meta and finished requests in admission order, for ``ttsim
    serve-replay`` (harness.vllm.rerun); UsageError when the folder holds nothing to replay."""
    d, meta, reqs = load(directory)
    if not reqs:
        raise UsageError(f"{d / REQUESTS}: no finished request to replay")
    unscheduled = [r["request"] for r in reqs if r.get("admitted") is None or r.get("admitted_step") is None]
    if unscheduled:
        raise UsageError(f"{d / REQUESTS}: {len(unscheduled)} request(s) without an admission index and step "
                         f"(e.g. {unscheduled[0]}): this run's schedule cannot be replayed")
    if "flags" not in meta:
        raise UsageError(f"{d / RUN}: no flags recorded (a records folder from an older ttsim)")
    return d, meta, sorted(reqs, key=lambda r: r["admitted"])


def _serial(meta: dict, rec: dict, cache: dict) -> list[int]:
    """The request alone on a fresh device of the run's seed and model (harness.scenario)."""
    key = (tuple(rec["prompt_token_ids"]), rec["max_tokens"])
    if key not in cache:
        from harness.base.spec import RunSpec
        from harness.scenario import serial_answer
        from harness.system import System
        from harness.workloads import FaultKnobs, Request

        system = System(RunSpec(seed=meta["seed"], model=meta["model"]), FaultKnobs())
        try:
            cache[key] = serial_answer(system, Request(rec["request"], key[0], key[1]))
        finally:
            system.close()
    return cache[key]


def judge(meta: dict, rec: dict, cache: dict) -> dict:
    """``rec`` with its serial answer, verdict and defect class filled in where the worker left
    them open (a model whose serial answer costs a device run)."""
    if rec["equal"] is not None:
        return rec
    serial = _serial(meta, rec, cache)
    got = rec["output_token_ids"]
    equal = got == serial[:len(got)]
    log = {k: (fresh, reload) for k, fresh, reload in rec["decode_log"]}
    defect = None if equal else verdict_class(merge_defect=rec["merge_defect"], merge_on=rec["merge_on"],
                                              decode_log=log, expected=serial, got=got)
    return {**rec, "serial": serial, "equal": equal, "defect": defect}


def merges_touching(directory: Path, request_id: str) -> list[tuple[int, dict, int]]:
    """(line, merge record, row) of every merge with a row of ``request_id``."""
    from model.merge_trace import TraceError, read_trace

    try:
        runs = read_trace(str(directory / MERGES))
    except TraceError as exc:
        if str(exc).endswith("no merge records"):  # a run line only: nothing merged yet
            return []
        raise UsageError(str(exc)) from None
    found = []
    for run in runs:
        for rec, line in zip(run.merges, run.lines):
            for row, rid in enumerate(rec["request_ids"]):
                if rid == request_id:
                    found.append((line, rec, row))
    return found
