"""A deadline on every call into the generator and on the device's queue waits the runner makes.

A generator that never returns would hang a sweep or a replay forever. Each call the runner
makes (model.serving's ``guard``) runs under this deadline: when it passes, the call is
interrupted in this process (a timer signal raising :class:`CallDeadlineExceeded`, one line
naming the call, the engine step, the seed, the arm and the replay command), and the sweep or
replay ends there with nothing written. A call blocked in native code that holds the
interpreter (a card's runtime) cannot be interrupted from inside: on cards the hil watchdog
process (hil/watchdog.py, the same one ``pytest --hil`` keeps) is armed with the same deadline
plus a grace period and kills the process with the same line.

The default (RunSpec.call_deadline, 300 s) is far above any honest call here (the slowest, a
tiny-model prefill on a loaded 2-core machine, takes seconds); ``--call-deadline`` changes it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Callable, Iterator

#: the watchdog's margin over the in-process deadline on cards
GRACE_SECONDS = 30.0


class CallDeadlineExceeded(RuntimeError):
    """A call into the generator (or a queue wait) outlived the deadline: the one line."""


class CallDeadline:
    """``guard(call, step)`` for model.serving: a context in which ``call`` must return within
    ``seconds``. ``describe(call, step)`` words the line. ``watchdog``: a hil.watchdog.Watchdog
    armed alongside (cards). Outside the main thread (where no timer signal can be delivered)
    only the watchdog applies."""

    def __init__(self, seconds: float, describe: Callable[[str, int], str], watchdog=None):
        if not seconds > 0:
            raise ValueError(f"--call-deadline must be > 0 seconds, got {seconds:g}")
        self.seconds = seconds
        self.describe = describe
        self.watchdog = watchdog

    @contextlib.contextmanager
    def __call__(self, call: str, step: int) -> Iterator[None]:
        line = self.describe(call, step)
        timer = threading.current_thread() is threading.main_thread()
        if timer:
            def expired(signum, frame):
                raise CallDeadlineExceeded(line)

            previous = signal.signal(signal.SIGALRM, expired)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        if self.watchdog is not None:
            self.watchdog.arm(line, self.seconds + GRACE_SECONDS)
        try:
            yield
        finally:
            if timer:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, previous)
            if self.watchdog is not None:
                self.watchdog.cancel()


def for_run(spec, what: str, arm: str, on_cards: bool) -> CallDeadline:
    """The deadline of one run of ``spec``: its line names the generator, the call, the engine
    step, ``what`` (the seed and arm, or the serial answers) and ``spec``'s replay of ``arm``.
    On cards the hil watchdog backs it; the caller stops it (:func:`stop`)."""
    who = spec.generator.text if spec.generator is not None else "model.generator.Generator"
    seconds = spec.call_deadline

    def describe(call: str, step: int) -> str:
        return (f"the generator {who} did not return from {call} within {seconds:g} s (--call-deadline) at engine "
                f"step {step} ({what}); replay: {spec.replay_command(arm)}")

    watchdog = None
    if on_cards:
        from hil.watchdog import Watchdog

        watchdog = Watchdog(seconds + GRACE_SECONDS, option="--call-deadline")
    return CallDeadline(seconds, describe, watchdog)


def stop(deadline: CallDeadline) -> None:
    if deadline.watchdog is not None:
        deadline.watchdog.stop()
