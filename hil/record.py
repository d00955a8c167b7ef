"""The JSONL record of a hardware session: host, cards, ttnn version, git sha, per-test outcomes, PCCs.

One line per ``--hil`` session is appended to ``hil-sessions.jsonl`` in the directory the
caller names (the pytest plugin passes the project's runs folder: ``$TTSIM_RUNS_DIR``, else
``runs/`` in a checkout, git-ignored). While the session runs, the record-in-progress is kept in a
``.partial.json`` beside it after every test, so a session the watchdog has to kill still
leaves its line (``aborted`` says why).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "hil-sessions.jsonl"


def git_rev(root: Path = ROOT, *, short: bool = False, mark_dirty: bool = False) -> str:
    """The commit checked out at ``root`` (the project's one git-revision helper), "-dirty"
    appended when asked and tracked files differ; "unknown" outside a work tree."""
    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)

    try:
        rev = git("rev-parse", *(["--short"] if short else []), "HEAD")
        if rev.returncode != 0:
            return "unknown"
        dirty = mark_dirty and git("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return rev.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"



def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class SessionRecord:
    def __init__(self, header: dict, directory: Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.path = self.dir / NAME
        self.partial = self.dir / f"hil-session-{os.getpid()}.partial.json"
        self.data = {"host": socket.gethostname(), "git_sha": git_rev(), "started": _now(), **header, "tests": []}
        self._flush()

    def add(self, nodeid: str, outcome: str, duration: float, pcc: dict | None = None,
            message: str | None = None) -> None:
        entry = {"nodeid": nodeid, "outcome": outcome, "duration_s": round(duration, 3)}
        if pcc:
            entry["pcc"] = pcc
        if message:
            entry["message"] = message
        self.data["tests"].append(entry)
        self._flush()

    def _flush(self) -> None:
        tmp = self.partial.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, sort_keys=True))
        os.replace(tmp, self.partial)

    def finish(self, exitstatus: int, **extra) -> Path:
        self.data.update(extra, exitstatus=int(exitstatus), finished=_now())
        return _append(self.path, self.data, self.partial)


def finish_partial(partial: Path, aborted: str) -> Path | None:
    """Append a killed session's record (what it had so far, plus why it stopped)."""
    partial = Path(partial)
    try:
        data = json.loads(partial.read_text())
    except (OSError, ValueError):
        return None
    data.update(aborted=aborted, finished=_now())
    return _append(partial.parent / NAME, data, partial)


def _append(path: Path, data: dict, partial: Path) -> Path:
    with path.open("a") as f:
        f.write(json.dumps(data, sort_keys=True) + "\n")
    partial.unlink(missing_ok=True)
    return path
