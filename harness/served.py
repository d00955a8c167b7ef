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
    request scheduled), ``finish`` (the runner's ``on_finish``). ``staged``: the folder is
    written under a hidden name and appears whole at :meth:`commit` (a replay's records: an
    interrupted or failed replay leaves nothing); a server's records appear at once, as the
    server log names them to a user who may read them while it runs."""

    def __init__(self, root: Path, *, seed: int, model: str, flags, knobs: str, step_policy: str,
                 mesh_cols: int = 1, sdpa_streaming: bool = False, generator: dict | None = None,
                 staged: bool = False):
        from dataclasses import asdict

        from harness.replay import arm_of

        self.name = f"{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{os.getpid()}"
        self.root = Path(root) / "serve"
        self.staged = staged
        self.dir = _new_folder(self.root, f".{self.name}.part" if staged else self.name)
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

    def commit(self) -> Path:
        """A staged folder under its own name (``name``, ``name-2``... as a server's); returns it."""
        if self.staged:
            final = _new_folder(self.root, self.name)
            final.rmdir()
            self.trace.flush()
            os.rename(self.dir, final)
            self.dir, self.staged = final, False
        return self.dir

    def discard(self) -> None:
        """A staged folder that will not be committed: removed whole."""
        if self.staged:
            import shutil

            shutil.rmtree(self.dir, ignore_errors=True)

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


def _int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _ints(v, nonempty: bool = False) -> bool:
    return isinstance(v, list) and all(_int(x) for x in v) and (bool(v) or not nonempty)


def _flags(v) -> bool:
    from dataclasses import fields

    from model.flags import GeneratorFlags

    return (isinstance(v, dict) and set(v) == {f.name for f in fields(GeneratorFlags)}
            and all(isinstance(x, bool) for x in v.values()))


def _generator(v) -> bool:
    return v is None or (isinstance(v, dict) and isinstance(v.get("spec"), str) and v["spec"] != ""
                         and (v.get("tt_metal") is None or isinstance(v["tt_metal"], str)))


def _run_fields():
    """run.json's fields: name -> (required, check, what it must be)."""
    from model.flags import ARMS

    from harness.base.spec import MODELS, STEP_POLICIES

    return {
        "seed": (True, lambda v: _int(v) and v >= 0, "a non-negative integer"),
        "model": (True, lambda v: v in MODELS, f"one of {', '.join(MODELS)}"),
        "arm": (True, lambda v: v is None or v in ARMS, "an arm name or null"),
        "knobs": (True, lambda v: v in ("swarm", "quiet"), "'swarm' or 'quiet'"),
        "step_policy": (True, lambda v: v in STEP_POLICIES, f"one of {', '.join(STEP_POLICIES)}"),
        "flags": (False, _flags, "every generator flag (model.flags.GeneratorFlags) as true/false"),
        "mesh_cols": (False, lambda v: v in (1, 2), "1 or 2"),
        "sdpa_streaming": (False, lambda v: isinstance(v, bool), "true or false"),
        "generator": (False, _generator, 'null or {"spec": "MODULE:ATTR", "tt_metal": null or a path}'),
        "replay_of": (False, lambda v: isinstance(v, str), "a path"),
    }


#: requests.jsonl's fields (every one required): name -> (check, what it must be)
REQUEST_FIELDS = {
    "request": (lambda v: isinstance(v, str) and v != "", "a request id"),
    "admitted": (lambda v: v is None or (_int(v) and v >= 0), "null or a non-negative integer"),
    "admitted_step": (lambda v: v is None or (_int(v) and v >= 0), "null or a non-negative integer"),
    "prompt_token_ids": (lambda v: _ints(v, nonempty=True), "a non-empty list of token ids"),
    "max_tokens": (lambda v: _int(v) and v > 0, "a positive integer"),
    "output_token_ids": (_ints, "a list of token ids"),
    "serial": (lambda v: v is None or _ints(v), "null or a list of token ids"),
    "equal": (lambda v: v is None or isinstance(v, bool), "null, true or false"),
    "defect": (lambda v: v is None or isinstance(v, str), "null or a defect class"),
    "merge_defect": (lambda v: v is None or isinstance(v, str), "null or a defect class"),
    "merge_on": (lambda v: isinstance(v, bool), "true or false"),
    "decode_log": (lambda v: isinstance(v, list) and all(isinstance(e, list) and len(e) == 3 and _int(e[0])
                                                          and isinstance(e[1], bool) and isinstance(e[2], bool)
                                                          for e in v), "a list of [output index, fresh, reload]"),
}


def _shown(v) -> str:
    text = json.dumps(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{path}: not UTF-8 text (not a records file ttsim wrote)") from None


def _check_run(path: Path) -> dict:
    try:
        meta = json.loads(_text(path))
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not JSON ({exc.msg} at line {exc.lineno}; a server killed mid-write?)") from None
    if not isinstance(meta, dict):
        raise UsageError(f"{path}: must be a JSON object, got a {type(meta).__name__}")
    for name, (required, ok, what) in _run_fields().items():
        if name not in meta:
            if required:
                raise UsageError(f"{path}: field {name!r} is missing")
            continue
        if not ok(meta[name]):
            raise UsageError(f"{path}: field {name!r} must be {what}, got {_shown(meta[name])}")
    return meta


def _check_request(path: Path, line: int, text: str) -> dict:
    try:
        rec = json.loads(text)
    except json.JSONDecodeError:
        raise UsageError(f"{path}:{line}: not JSON (a server killed mid-write?)") from None
    if not isinstance(rec, dict):
        raise UsageError(f"{path}:{line}: must be a JSON object, got a {type(rec).__name__}")
    for name, (ok, what) in REQUEST_FIELDS.items():
        if name not in rec:
            raise UsageError(f"{path}:{line}: field {name!r} is missing")
        if not ok(rec[name]):
            raise UsageError(f"{path}:{line}: field {name!r} must be {what}, got {_shown(rec[name])}")
    return rec


def load(directory: str) -> tuple[Path, dict, list[dict]]:
    """The run's meta and its finished requests, every field checked (a records folder is input):
    a UsageError names the file, the line and the field; a run with no finished request is
    refused too (serve-explain and serve-replay alike: there is nothing to read)."""
    d = Path(directory)
    if not d.is_dir():
        raise UsageError(f"served run folder {directory} does not exist (the server log names it: '{READY_PREFIX} ...')")
    if not (d / RUN).is_file():
        raise UsageError(f"{directory} is not a served run folder (no {RUN})")
    meta = _check_run(d / RUN)
    lines = _text(d / REQUESTS).splitlines() if (d / REQUESTS).is_file() else []
    reqs = [_check_request(d / REQUESTS, n, line) for n, line in enumerate(lines, 1)]
    if not reqs:
        raise UsageError(f"{d / REQUESTS}: no finished request in this run (nothing to explain or replay)")
    return d, meta, reqs


def schedule(directory: str) -> tuple[Path, dict, list[dict]]:
    """The run's folder, meta and finished requests in admission order, for ``ttsim
    serve-replay`` (harness.vllm.rerun); UsageError when the folder holds nothing to replay."""
    d, meta, reqs = load(directory)
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
