"""The sweep's report for people: the printed table, the plot, the progress bar."""

from __future__ import annotations

import sys

from harness.base.errors import UsageError


class ProgressBar:
    """A progress bar on stderr (tqdm's); on a non-terminal only the final line is written, so
    logs and CI output get one line, not one per seed."""

    def __init__(self, label: str, stream=None):
        self.label = label
        self.stream = stream or sys.stderr  # looked up now: sys.stderr may have been replaced since import
        self.tty = self.stream.isatty()
        self._bar = None

    def __call__(self, done: int, total: int) -> None:
        if not self.tty:
            if done == total:
                self.stream.write(f"{self.label}: {done}/{total} done\n")
                self.stream.flush()
            return
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=self.label, file=self.stream, unit="seed", dynamic_ncols=True)
        self._bar.update(done - self._bar.n)
        if done == total:
            self._bar.close()


def check_plot_format(path: str) -> None:
    """Fail before the sweep, not after it, when matplotlib cannot write that file type."""
    import os

    from matplotlib.backends.backend_agg import FigureCanvasAgg

    formats = FigureCanvasAgg.get_supported_filetypes()
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    if ext not in formats:
        raise UsageError(f"cannot plot to {path}: {'no extension' if not ext else f'.{ext} is not a format'} "
                         f"matplotlib writes; use one of {', '.join('.' + f for f in sorted(formats))}")


def print_report(report: dict) -> None:
    print(f"{'arm':<12} {'runs':>5} {'requests':>8} {'failed':>6} {'rate':>7}  {'95% Wilson':<17} "
          f"{'guard rejects':>13} {'preemptions':>11}  defects")
    for arm, s in report["arms"].items():
        lo, hi = s["wilson95"]
        defects = ", ".join(f"{k}={v}" for k, v in s["defects"].items()) or "-"
        print(f"{arm:<12} {s['runs']:>5} {s['requests']:>8} {s['failed_requests']:>6} {s['rate']:>7.4f}  "
              f"[{lo:.4f}, {hi:.4f}]  {s['guard_rejects']:>13} {s['preemptions']:>11}  {defects}")
    for arm, s in report["arms"].items():
        if "first_failure" in s:
            ff = s["first_failure"]
            print(f"first failure in {arm}: seed {ff['seed']} {ff['request']} ({ff['defect']}); "
                  f"replay: {ff['replay']}")


def plot(report: dict, path: str) -> None:
    """Failure rate per arm with its 95% Wilson interval, on a log axis (rates span 1e-5..1)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["arms"])
    arms = [report["arms"][a] for a in names]
    floor = min([a["wilson95"][1] for a in arms] + [1e-5]) / 3
    fig, ax = plt.subplots(figsize=(7, 3.6), dpi=100)
    for y, (name, a) in enumerate(zip(names, arms)):
        lo, hi = a["wilson95"]
        ax.plot([max(lo, floor), hi], [y, y], color="#4477aa", linewidth=2)
        if a["rate"] > 0:
            ax.plot(a["rate"], y, "o", color="#4477aa")
            label = f"{a['failed_requests']}/{a['requests']}"
        else:
            ax.plot(floor, y, "|", color="#4477aa", markersize=12)
            label = f"0/{a['requests']}"
        ax.annotate(label, (hi, y), textcoords="offset points", xytext=(6, -3), fontsize=8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(floor / 1.5, 3)
    ax.set_xlabel("failed requests / requests (95% Wilson interval)")
    steps = f", {report['step_policy']} steps" if "step_policy" in report else ""
    if report.get("trace_mode", "all") != "all":
        steps += f", trace mode {report['trace_mode']}"
    ax.set_title(f"{report['seeds']} seeds, model {report['model']}{steps}")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
