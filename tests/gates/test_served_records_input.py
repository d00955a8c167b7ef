"""A served run's records folder is input: `ttsim serve-explain` and `ttsim serve-replay` read
every file and field before any work and refuse a bad one in one line naming the file, the line
and the field (exit 2), and neither writes anything then. A replay that fails or is stopped
leaves no records folder behind: it appears whole when the replay has finished."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from harness.commands import cli

RUN = Path(__file__).parent / "data" / "served-without-guard"


@pytest.fixture(autouse=True)
def runs_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TTSIM_RUNS_DIR", str(tmp_path / "runs"))


def _copy(tmp_path) -> Path:
    run = tmp_path / "run"
    shutil.copytree(RUN, run)
    return run


def _meta(run: Path, **change) -> None:
    meta = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**meta, **change}))


def _request(run: Path, line: int, drop: str | None = None, **change) -> None:
    lines = (run / "requests.jsonl").read_text().splitlines()
    rec = {**json.loads(lines[line - 1]), **change}
    rec.pop(drop, None)
    lines[line - 1] = json.dumps(rec)
    (run / "requests.jsonl").write_text("\n".join(lines) + "\n")


CASES = {
    "truncated run.json": (lambda r: (r / "run.json").write_text((r / "run.json").read_text()[:40]),
                           "run.json: not JSON"),
    "run.json an array": (lambda r: (r / "run.json").write_text("[1, 2]"),
                          "run.json: must be a JSON object, got a list"),
    "seed abc": (lambda r: _meta(r, seed="abc"), "run.json: field 'seed' must be a non-negative integer, got \"abc\""),
    "model nosuchmodel": (lambda r: _meta(r, model="nosuchmodel"),
                          "run.json: field 'model' must be one of markov, tiny, small, got \"nosuchmodel\""),
    "binary requests.jsonl": (lambda r: (r / "requests.jsonl").write_bytes(b"\x80\xff\x00\x9c" * 64),
                              "requests.jsonl: not UTF-8 text"),
    "a request without admitted": (lambda r: _request(r, 3, drop="admitted"),
                                   "requests.jsonl:3: field 'admitted' is missing"),
    "output_token_ids a string": (lambda r: _request(r, 2, output_token_ids="abc"),
                                  "requests.jsonl:2: field 'output_token_ids' must be a list of token ids, got \"abc\""),
    "a line that is not JSON": (lambda r: (r / "requests.jsonl").write_text(
        (r / "requests.jsonl").read_text() + '{"request": "x", "adm'), "requests.jsonl:65: not JSON"),
    "empty requests.jsonl": (lambda r: (r / "requests.jsonl").write_text(""),
                             "requests.jsonl: no finished request in this run"),
}


@pytest.mark.parametrize("command", [["serve-explain"], ["serve-explain", "REQ"], ["serve-replay"]],
                         ids=["explain", "explain-request", "replay"])
@pytest.mark.parametrize("case", list(CASES))
def test_bad_records_are_one_line_and_exit_2_before_any_work(case, command, tmp_path, capsys, monkeypatch):
    spoil, message = CASES[case]
    run = _copy(tmp_path)
    spoil(run)
    monkeypatch.setattr(cli, "_lazy", lambda module, name: lambda args: pytest.fail(f"bad records reached {module}"))
    argv = [command[0], str(run)] + (["cmpl-concurrent-req-12-0-91c67c6f"] if len(command) == 2 else [])
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("ttsim: error: ") and message in err, err
    assert not (tmp_path / "runs").exists()  # nothing written


def test_the_records_of_a_real_served_run_read_whole():
    from harness.served import load

    d, meta, reqs = load(str(RUN))
    assert meta["model"] == "markov" and len(reqs) == 64


def test_a_replay_that_fails_leaves_no_records_folder(tmp_path, monkeypatch, capsys):
    """The replay's records are staged: a replay stopped mid-way (here: the engine raises at a
    step) leaves neither its folder nor a half of it."""
    from model.serving import Engine

    calls = {"n": 0}
    real = Engine.step

    def failing(self):
        calls["n"] += 1
        if calls["n"] == 20:
            raise RuntimeError("device lost")
        return real(self)

    monkeypatch.setattr(Engine, "step", failing)
    with pytest.raises(RuntimeError, match="device lost"):
        cli.main(["serve-replay", str(RUN)])
    serve = tmp_path / "runs" / "serve"
    assert not serve.exists() or list(serve.iterdir()) == []
