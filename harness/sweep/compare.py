"""``ttsim arms compare SIM.json HW.json``: the simulator's fidelity, arm by arm.

Reads two ``ttsim arms --json`` reports (typically one from ttsim, one from cards with --hil),
recomputes each arm's failure rate and 95% Wilson interval from its counts, prints them side
by side and says whether the intervals overlap. Exit 0 when every shared arm overlaps, 1 when
any does not, 2 when a file is not an arms report.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from harness.base.stats import wilson


class ReportError(ValueError):
    """A file that is not a readable arms report (names the file and the problem)."""


@dataclass
class ArmRates:
    failed: int
    requests: int

    @property
    def rate(self) -> float:
        return self.failed / self.requests if self.requests else 0.0

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.failed, self.requests)


def load(path: str) -> tuple[str, dict[str, ArmRates]]:
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as exc:
        raise ReportError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise ReportError(f"{path} is not JSON: {exc}") from None
    arms = data.get("arms") if isinstance(data, dict) else None
    if not isinstance(arms, dict) or not arms:
        raise ReportError(f"{path} is not an arms report (no 'arms' object; write one with `ttsim arms --json PATH`)")
    out = {}
    for name, a in arms.items():
        try:
            failed, requests = int(a["failed_requests"]), int(a["requests"])
        except (KeyError, TypeError, ValueError):
            raise ReportError(f"{path}: arm {name!r} lacks integer failed_requests/requests") from None
        if requests < 0 or not 0 <= failed <= requests:
            raise ReportError(f"{path}: arm {name!r} has {failed} failed of {requests} requests")
        out[name] = ArmRates(failed, requests)
    return str(data.get("backend", "ttsim")), out


def overlap(a: tuple[float, float], b: tuple[float, float]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def compare(path_a: str, path_b: str, out=print) -> int:
    backend_a, a = load(path_a)
    backend_b, b = load(path_b)
    shared = [arm for arm in a if arm in b]
    la, lb = f"{backend_a} ({path_a})", f"{backend_b} ({path_b})"
    out(f"A = {la}\nB = {lb}")
    out(f"{'arm':<12} {'A failed/requests':>18} {'A rate':>8}  {'A 95% Wilson':<17} "
        f"{'B failed/requests':>18} {'B rate':>8}  {'B 95% Wilson':<17}  overlap")
    differ = []
    for arm in shared:
        ra, rb = a[arm], b[arm]
        ia, ib = ra.interval, rb.interval
        ok = overlap(ia, ib)
        if not ok:
            differ.append(arm)
        out(f"{arm:<12} {f'{ra.failed}/{ra.requests}':>18} {ra.rate:>8.4f}  [{ia[0]:.4f}, {ia[1]:.4f}] "
            f"{f'{rb.failed}/{rb.requests}':>18} {rb.rate:>8.4f}  [{ib[0]:.4f}, {ib[1]:.4f}]  {'yes' if ok else 'NO'}")
    for arm in a:
        if arm not in b:
            out(f"{arm:<12} only in A")
    for arm in b:
        if arm not in a:
            out(f"{arm:<12} only in B")
    if not shared:
        out("verdict: no arm in common; nothing to compare")
        return 1
    if differ:
        out(f"verdict: the intervals do NOT overlap for {', '.join(differ)}: the rates differ between A and B")
        return 1
    out(f"verdict: the intervals overlap for every shared arm ({', '.join(shared)})")
    return 0
