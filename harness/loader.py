"""Putting the USER's generator under the suite: ``--generator MODULE:ATTR`` (pytest, ``ttsim
arms|replay|serve``) or ``TTSIM_GENERATOR`` (the served worker).

``MODULE`` is a dotted module path or a ``.py`` file; ``ATTR`` a class or factory called as

    ATTR(model, ttnn, mesh_device, *, flags, max_context, max_pages, max_slots,
         enable_trace=True, bucket_policy=None)

which returns an object speaking model/protocol.py. ``ATTR.ttsim_flags`` (optional) names the
flags of model.flags.GeneratorFlags it switches; without it, production's three fixes and the
merge (model.flags.USER_FLAGS); ``()`` for a generator that switches none, which then runs only
the arm ``as-is``. ``model`` is one of our models (the
sweep model or the Qwen3.6-style hybrid), ``ttnn`` the module it runs on, ``flags`` the
arm's fix flags (model.flags.GeneratorFlags) and ``bucket_policy`` the seed's decode
bucket choice (rows -> bucket; None: the smallest that fits). The module is imported with
``import ttnn`` resolving to the backend in use (ttsim, or the real ttnn under --hil), so a
tt-metal generator runs unedited; ``--tt-metal PATH`` puts a checkout's ``models`` package
on the import path first.

The loaded generator travels explicitly (a :class:`UserGenerator`, named by the run's
``RunSpec.generator``); nothing here keeps one in force. ``sys.modules["ttnn"]`` is this
module's alone to set, for the block of :func:`loaded` (the user's code may ``import ttnn``
lazily, at call time, as tt-metal's does), and is as it was after.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.base.spec import GeneratorSpec, GeneratorSpecError, is_file_module


@dataclass(frozen=True)
class UserGenerator:
    """The user's generator, imported and checked: ``factory`` builds it (the signature above),
    ``honoured`` the flag names (model.flags.ALL_FLAGS) it switches on the ``flags`` it is handed."""
    spec: GeneratorSpec
    factory: Callable
    honoured: tuple


@contextlib.contextmanager
def ttnn_resolving_to(ttnn_module) -> Iterator[None]:
    """``import ttnn`` resolves to ``ttnn_module`` for the block; ``sys.modules`` as it was after.
    Re-entrant; refuses (one line) when another ``ttnn`` is already imported."""
    present = sys.modules.get("ttnn")
    if present is ttnn_module:
        yield
        return
    if present is not None:
        raise GeneratorSpecError(f"--generator: `ttnn` is already imported as {getattr(present, '__file__', present)}, "
                                 f"not the backend this run uses ({getattr(ttnn_module, '__name__', ttnn_module)})")
    sys.modules["ttnn"] = ttnn_module
    try:
        yield
    finally:
        if sys.modules.get("ttnn") is ttnn_module:
            del sys.modules["ttnn"]


@contextlib.contextmanager
def loaded(spec: GeneratorSpec | None, ttnn_module) -> Iterator[UserGenerator | None]:
    """The generator ``spec`` names, loaded against ``ttnn_module``, with ``import ttnn``
    resolving to it for the block (None: ours, and nothing to alias). What runs the user's
    code (a command, a sweep's worker, a pytest session) holds this block open meanwhile."""
    if spec is None:
        yield None
        return
    with ttnn_resolving_to(ttnn_module):
        yield load(spec, ttnn_module)


def _import(module: str):
    if is_file_module(module):
        path = Path(module)
        if not path.is_file():
            raise GeneratorSpecError(f"--generator: no file {module}")
        name = "ttsim_user_generator_" + path.stem
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        return mod
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and (module == exc.name or module.startswith(exc.name + ".")):
            raise GeneratorSpecError(f"--generator: no module named {module!r}") from None
        raise GeneratorSpecError(f"--generator: importing {module!r} failed: no module named {exc.name!r}") from None


def load(spec: GeneratorSpec, ttnn_module) -> UserGenerator:
    """The generator ``spec`` names, imported with ``import ttnn`` resolving to ``ttnn_module``
    (a module imported before is taken as it is: the import system keeps it); a class is checked
    for the protocol's methods here, a factory's product when it is built."""
    from model.protocol import GeneratorProtocolError, check

    if spec.tt_metal is not None and spec.tt_metal not in sys.path:
        sys.path.insert(0, spec.tt_metal)
    try:
        with ttnn_resolving_to(ttnn_module):
            mod = _import(spec.module)
    except GeneratorSpecError:
        raise
    except Exception as exc:  # the user's module raised at import: name it, in one line
        raise GeneratorSpecError(f"--generator: importing {spec.module!r} raised {type(exc).__name__}: {exc}") from None
    factory = mod
    for part in spec.attr.split("."):
        if not hasattr(factory, part):
            raise GeneratorSpecError(f"--generator: {spec.module!r} has no attribute {spec.attr!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise GeneratorSpecError(f"--generator: {spec.text} is not a class or factory (got {type(factory).__name__})")
    if isinstance(factory, type):
        try:
            check(factory, f"--generator: {spec.text}")
        except GeneratorProtocolError as exc:
            raise GeneratorSpecError(str(exc)) from None
    return UserGenerator(spec, factory, honoured_flags(spec, factory))


def honoured_flags(spec: GeneratorSpec, factory) -> tuple:
    """The flags ``factory`` declares it switches (``ttsim_flags``), checked, or the default."""
    from model.flags import ALL_FLAGS, USER_FLAGS

    declared = getattr(factory, "ttsim_flags", None)
    if declared is None:
        return USER_FLAGS
    if isinstance(declared, str) or not all(isinstance(n, str) for n in declared):
        raise GeneratorSpecError(f"--generator: {spec.text}.ttsim_flags must be a tuple of flag names, "
                                 f"got {declared!r}")
    unknown = [n for n in declared if n not in ALL_FLAGS]
    if unknown:
        raise GeneratorSpecError(f"--generator: {spec.text}.ttsim_flags names unknown flag(s) {', '.join(unknown)}; "
                                 f"known: {', '.join(ALL_FLAGS)}")
    return tuple(declared)
