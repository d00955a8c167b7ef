"""`ttsim arms --expect`: a CI verdict on a sweep's report.

``--expect control=fail,all=0,slots<=12,what-if<=1.5%``: one expectation per arm, each
``ARM=fail`` (at least one request failed: a negative control that must catch its defect),
``ARM=pass`` or ``ARM=0`` (no request failed), ``ARM<=N`` (at most N failed requests) or
``ARM<=R%`` (a failure rate of at most R percent). Every broken expectation is one line and
the command exits 1, so a CI job gates on the sweep itself.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from harness.base.errors import UsageError

_FORM = re.compile(r"^(?P<arm>[^=<\s]+)\s*(?:=\s*(?P<word>fail|pass|\d+)|<=\s*(?P<bound>\d+(?:\.\d+)?)(?P<pct>%?))$")


@dataclass(frozen=True)
class Expectation:
    arm: str
    text: str
    most: float | None = None  # the most failed requests allowed (None: at least one must fail)
    percent: bool = False

    def broken(self, failed: int, requests: int) -> str | None:
        """Why the arm's result breaks this expectation (one line), or None."""
        got = f"{failed} of {requests} requests failed"
        if self.most is None:
            return None if failed else f"expected {self.text}: no request failed (a negative control that caught nothing)"
        if self.percent:
            rate = 100.0 * failed / requests if requests else 0.0
            return None if rate <= self.most else f"expected {self.text}: {got} ({rate:.2f}%)"
        return None if failed <= self.most else f"expected {self.text}: {got}"


def parse(text: str, arms: list[str]) -> list[Expectation]:
    """The expectations of ``--expect`` for a sweep of ``arms``; UsageError names a bad one."""
    out: dict[str, Expectation] = {}
    for part in (p.strip() for p in text.split(",")):
        m = _FORM.match(part)
        if not m:
            raise UsageError(f"--expect {part!r}: write ARM=fail, ARM=pass, ARM=N or ARM<=N / ARM<=R% (comma-separated)")
        arm = m["arm"]
        if arm not in arms:
            raise UsageError(f"--expect {part!r}: arm {arm!r} is not in this sweep ({', '.join(arms)})")
        if arm in out:
            raise UsageError(f"--expect: arm {arm!r} expected twice")
        word, bound = m["word"], m["bound"]
        if word == "fail":
            out[arm] = Expectation(arm, part)
        elif word is not None:
            out[arm] = Expectation(arm, part, most=0 if word == "pass" else int(word))
        else:
            out[arm] = Expectation(arm, part, most=float(bound), percent=bool(m["pct"]))
    return list(out.values())


def check(report: dict, expectations: list[Expectation]) -> list[str]:
    """One line per expectation the report breaks (empty: the verdict is green)."""
    lines = []
    for e in expectations:
        s = report["arms"][e.arm]
        why = e.broken(s["failed_requests"], s["requests"])
        if why is not None:
            lines.append(f"ttsim arms: {e.arm}: {why}")
    return lines


def every_arm() -> tuple[str, ...]:
    """Every arm name a sweep can have (for checking an expectation's form before the arms are known)."""
    from model.flags import ARMS, AS_IS

    return (*ARMS, AS_IS)
