"""The `ttsim` command (bin/ttsim): argument parsing and dispatch only.

Each subcommand's body is a module of harness.commands (arms, replay, scenario, serve,
serve_explain, serve_replay, snapshots, selfcheck), imported only when chosen, so the light
commands (`replay --trace`, `arms merge`, `arms compare`, `snapshots report`) import neither
torch nor vLLM.

Every command's options are checked by harness.commands.preflight after parsing and before its body
runs (``args.check``), so bad input costs no work.

Exit codes: 0 success, 1 a check failed, 2 bad input, 3 --hil refused (no usable card),
130/143 interrupted by SIGINT/SIGTERM.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from harness.commands import forkserver, preflight
from harness.base.errors import HardwareRefused, UsageError
from harness.base.interrupts import Interrupted


class Parser(argparse.ArgumentParser):
    """argparse's own usage errors in one line, as ours are (its default prints the usage block
    first); ``--help`` is untouched. Subcommands' parsers are of this class too (argparse makes
    them of their parent's)."""

    def error(self, message: str):
        command = self.prog.partition(" ")[2]  # "arms merge" of "ttsim arms merge"
        where = f"{command}: " if command else ""
        self.exit(2, f"ttsim: error: {where}{' '.join(message.split())} (see {self.prog} --help)\n")


def _lazy(module: str, name: str):
    def run(args):
        return getattr(importlib.import_module(module), name)(args)

    return run


def _seed(value: str) -> int:
    from harness.base.seeds import parse_seed

    try:
        return parse_seed(value, "seed")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="ttsim", description="ttsim: a deterministic fake Tenstorrent device")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for add in (_selfcheck, _arms, _replay, _scenario, _serve, _serve_explain, _serve_replay, _snapshots):
        add(sub)
    return p


def _selfcheck(sub) -> None:
    s = sub.add_parser("selfcheck", help="exercise the fake 1x2 mesh and print the state digest")
    s.add_argument("--seed", type=_seed, default=None, help="TTSIM seed (default: $TTSIM_SEED, else ttsim's default)")
    s.set_defaults(run=_lazy("harness.commands.selfcheck", "run"), check=preflight.seed_from_env)


def _arms(sub) -> None:
    from model.flags import ARMS, AS_IS

    from harness.sweep import EXECUTORS

    a = sub.add_parser("arms", help="run control-vs-treatment arms over N seeds (the main job)",
                       description="Run the stage-3 serving workload under each arm over N seeds and report "
                                   "failed-request rates with 95%% Wilson intervals.")
    a.add_argument("--arms", default=None,
                   help=f"comma-separated arms of {', '.join((*ARMS, AS_IS))} (default: {','.join(ARMS)}; "
                        f"with --generator, the arms it can have, or {AS_IS})")
    a.add_argument("--expect", metavar="ARM=fail|pass|N,ARM<=N|R%,...", default=None,
                   help="a CI verdict: exit 1, one line per broken expectation (e.g. control=fail,all+last-run=0)")
    a.add_argument("--seeds", type=int, default=200,
                   help=f"number of seeds, at most {preflight.MAX_SEEDS} (default: %(default)s)")
    a.add_argument("--seed-start", type=_seed, default=0, help="first seed (default: %(default)s)")
    _model_option(a)
    a.add_argument("--workers", type=int, default=None,
                   help="processes, at most this machine's CPUs; with --executor ray, the CPUs of the local Ray "
                        f"(default: {preflight.DEFAULT_WORKERS}, or the CPUs if fewer)")
    a.add_argument("--executor", choices=EXECUTORS, default="local",
                   help="local = this machine's processes; ray = one Ray task per seed on a private local "
                        "Ray (bound to 127.0.0.1, shut down after the sweep), needs the ray extra; the "
                        "--json report is the same either way (default: %(default)s)")
    a.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="--executor ray: join the existing Ray cluster at ADDR (host:port of its head; "
                        "its nodes need this project installed, and its CPUs replace --workers) instead of "
                        "starting a private one; RAY_ADDRESS is ignored")
    a.add_argument("--json", metavar="PATH", help="write the summary as JSON")
    a.add_argument("--plot", metavar="PATH", help="write a plot of rates per arm with intervals (.png, .svg, .pdf...)")
    a.add_argument("--shard", metavar="I/N", help="run only the I-th of N contiguous blocks of the seeds "
                                                  "(merge the --json reports with `ttsim arms merge`)")
    a.add_argument("--hil", action="store_true",
                   help="run the same seeded workloads on real cards (one process); the JSON says backend=hil")
    a.add_argument("--hil-devices", metavar="IDS", default=None, help="--hil: card ids, e.g. 0,1 (default: all)")
    a.add_argument("--record-merges", metavar="PATH", help="append every merge to a JSONL trace")
    _generator_options(a)
    _step_policy_option(a)
    _call_deadline_option(a)
    _trace_mode_option(a)
    a.set_defaults(run=_lazy("harness.commands.arms", "run"), check=preflight.arms)
    asub = a.add_subparsers(dest="arms_command", metavar="{merge,compare}")
    m = asub.add_parser("merge", help="merge the --json reports of `ttsim arms --shard I/N` into the unsharded report",
                        description="Merge the reports of all N shards of one sweep; the result equals the "
                                    "unsharded run's --json byte for byte.")
    m.add_argument("parts", nargs="+", metavar="SHARD.json")
    m.add_argument("--json", metavar="PATH", required=True, help="where to write the merged report")
    m.set_defaults(run=_lazy("harness.commands.arms", "merge"), check=preflight.merge)
    c = asub.add_parser("compare", help="per-arm failure rates of two arms reports side by side (sim vs cards)",
                        description="Per-arm failure rates of two arms reports side by side, with 95%% "
                                    "Wilson intervals and whether they overlap.")
    c.add_argument("a", metavar="SIM.json")
    c.add_argument("b", metavar="HW.json")
    c.set_defaults(run=_lazy("harness.commands.arms", "compare"), check=preflight.nothing)


def _replay(sub) -> None:
    from model.flags import ARMS

    r = sub.add_parser("replay", help="replay one seed of one arm, or a recorded merge trace (--trace)")
    r.add_argument("--arm", help=f"one of {', '.join(ARMS)} (with --trace: default the recorded flags)")
    r.add_argument("--seed", type=_seed)
    r.add_argument("--trace", metavar="FILE", help="re-decide the merges recorded in FILE under --arm")
    r.add_argument("--record-merges", metavar="PATH", help="append every merge to a JSONL trace")
    _model_option(r)
    _generator_options(r)
    _step_policy_option(r)
    _call_deadline_option(r)
    _trace_mode_option(r)
    r.set_defaults(run=_lazy("harness.commands.replay", "run"), check=preflight.replay)


def _scenario(sub) -> None:
    u = sub.add_parser("scenario", help="reproduce public upstream bugs as named scenarios (without and with the fix)",
                       description="Run each named scenario without its upstream fix and with it; exit 1 unless every "
                                   "one fails without the fix as its issue reports and passes with it. No name: list "
                                   "the catalogue.")
    u.add_argument("names", nargs="*", metavar="NAME", help="e.g. upstream-54565 (see --list)")
    u.add_argument("--list", action="store_true", help="list the catalogue and exit")
    u.add_argument("--seed", type=_seed, default=None, help="run on this seed instead of the entry's own")
    u.set_defaults(run=_lazy("harness.commands.scenario", "run"), check=preflight.scenario)


def _serve(sub) -> None:
    v = sub.add_parser("serve", help="`vllm serve` on the fake device (127.0.0.1), through the harness.vllm plugin")
    v.add_argument("--model", choices=("tiny", "markov"), default="tiny", help="default: %(default)s")
    v.add_argument("--model-dir", default=None, help="an existing ttsim model directory (default: generate one)")
    v.add_argument("--port", type=int, default=8000, help="default: %(default)s")
    v.add_argument("--seed", type=_seed, default=None,
                   help="TTSIM_SEED of the device (default: $TTSIM_SEED, else ttsim's default)")
    v.add_argument("--mesh-cols", type=int, choices=(1, 2), default=1, help="1x1 or 1x2 mesh (TP=2)")
    _generator_options(v)
    _step_policy_option(v)
    v.set_defaults(run=_lazy("harness.commands.serve", "run"), check=preflight.serve)


def _serve_explain(sub) -> None:
    e = sub.add_parser("serve-explain", help="a `ttsim serve` run's requests against their serial answers, or one "
                                              "request's merge decisions, defect class and replay command",
                       description="Read the records folder a `ttsim serve` run names in its log ('ttsim records: "
                                   "DIR'). Without REQUEST: every finished request's verdict. With it: the merge "
                                   "decisions that touched it, its answer against its serial answer, and for a "
                                   "divergent one its defect class and a replay command. Exit 1 if one diverges.")
    e.add_argument("run_dir", metavar="RUN_DIR")
    e.add_argument("request", metavar="REQUEST", nargs="?", default=None,
                   help="the request id the client sent (request_id), the response id (cmpl-...), or the engine's")
    e.set_defaults(run=_lazy("harness.commands.serve_explain", "run"), check=preflight.served_records)


def _serve_replay(sub) -> None:
    from model.flags import ARMS

    rp = sub.add_parser("serve-replay", help="re-run a `ttsim serve` run in process on its recorded admission schedule",
                        description="Build the served engine of a records folder ('ttsim records: DIR' in the server "
                                    "log) again in this process, without HTTP, and admit each finished request at "
                                    "the engine step it was admitted at. Exit 0 when every answer and admission "
                                    "step equals the served run's, 1 (naming the requests) when not. The replay "
                                    "writes a records folder of its own, which serve-explain reads.")
    rp.add_argument("run_dir", metavar="RUN_DIR")
    rp.add_argument("--arm", default=None, help=f"the same schedule under this arm's flags ({', '.join(ARMS)}): exit 1 "
                                                 "if a request then differs from its serial answer")
    rp.set_defaults(run=_lazy("harness.commands.serve_replay", "run"), check=preflight.served_run)


def _snapshots(sub) -> None:
    sn = sub.add_parser("snapshots", help="snapshot review").add_subparsers(dest="what", metavar="{report}", required=True)
    sr = sn.add_parser("report", help="Markdown + PNG review of the snapshots changed since a git ref")
    sr.add_argument("--ref", default="HEAD", help="git ref to compare with (default: %(default)s)")
    sr.add_argument("--out", metavar="DIR", help="output folder (default: $TTSIM_RUNS_DIR or build, "
                                                 "/snapshot-review)")
    sr.add_argument("--root", default=".", help=argparse.SUPPRESS)
    sr.set_defaults(run=_lazy("harness.commands.snapshots", "run"), check=preflight.snapshots_report)


def _model_option(p: argparse.ArgumentParser) -> None:
    from harness.base.spec import DEFAULT_MODEL, MODELS

    p.add_argument("--model", choices=MODELS, default=DEFAULT_MODEL,
                   help="markov = sweep model (serving-path fidelity, no transformer math); tiny/small = "
                        "Qwen3.6-style hybrid (default: %(default)s)")


def _step_policy_option(p: argparse.ArgumentParser) -> None:
    from harness.base.spec import DEFAULT_STEP_POLICY, STEP_POLICIES

    p.add_argument("--step-policy", choices=STEP_POLICIES, default=DEFAULT_STEP_POLICY.name,
                   help="mixed = vLLM's stock steps (prefill and decode together); phased = the Tenstorrent "
                        "plugin's (every step all-prefill or all-decode) (default: %(default)s)")


def _call_deadline_option(p: argparse.ArgumentParser) -> None:
    from harness.base.spec import RunSpec

    p.add_argument("--call-deadline", metavar="S", type=float, default=RunSpec.call_deadline,
                   help="seconds a call into the generator (or a wait on its events) may take before the run "
                        "ends in one line naming it (default: %(default)g)")


def _trace_mode_option(p: argparse.ArgumentParser) -> None:
    from harness.base.spec import DEFAULT_TRACE_MODE, TRACE_MODES

    p.add_argument("--trace-mode", choices=TRACE_MODES, default=DEFAULT_TRACE_MODE.name,
                   help="the plugin's trace_mode: all = prefill and decode traced, prefill captured first; "
                        "decode_only = decode traced; decode-first = what-if, vllm-tt-plugin PR #122's order "
                        "(decode captured before prefill; reverted by PR #126) (default: %(default)s)")


def _generator_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--generator", metavar="MODULE:ATTR", default=None,
                   help="run YOUR generator (a class or factory speaking model/protocol.py; MODULE a dotted path "
                        "or a .py file) instead of ours; `import ttnn` in it resolves to the backend in use")
    p.add_argument("--tt-metal", metavar="PATH", default=None,
                   help="a tt-metal checkout whose models/ package --generator imports from")


def _forked(args) -> bool:
    """A seed's replay pays ~10 s of vLLM import for ~1 s of work, a served run's replay the
    same for ~3 s, a sweep the same 10 s once: they run in a fork server's child
    (harness.commands.forkserver) when one is up. Not the light commands (`replay --trace`, `arms
    merge|compare`, `serve-explain`), not cards (`--hil` never imports ttsim), not Ray (its own
    processes)."""
    if forkserver.in_child():
        return False
    if args.command == "replay":
        return args.trace is None
    if args.command == "serve-replay":
        return True
    return (args.command == "arms" and args.arms_command is None and not args.hil and args.executor == "local")


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser().parse_args(argv)  # Parser.error: one line, exit 2
    if _forked(args):
        code = forkserver.run(argv)  # the same command in a warm child: its checks, output and exit code
        if code is not None:
            return code
    try:
        args.check(args)
        return args.run(args)
    except UsageError as exc:
        print(f"ttsim: error: {exc}", file=sys.stderr)
        return 2
    except HardwareRefused as exc:
        print(f"ttsim: {exc}", file=sys.stderr)
        return 3
    except Interrupted as exc:  # a sweep's: says how far it got and what it wrote
        print(f"ttsim: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:  # Ctrl-C in any other command: no traceback
        print("ttsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
