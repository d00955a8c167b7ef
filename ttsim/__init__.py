"""ttsim: a deterministic fake Tenstorrent device speaking the subset of ttnn the model uses.

Import it where you would import ttnn: ``import ttsim as ttnn``. Names, signatures and
defaults mirror ttnn 0.81.1 (checked by tests/ttsim/test_conformance.py against the real
package); what ttsim adds beyond ttnn is listed in :data:`EXTENSIONS`.

The seed controls load with the package; the ttnn namespace (ttsim/_namespace.py: torch and
every op) loads at the first use of any other name, so a process that only parses or sets a
seed (the CLI refusing bad input, the pytest plugin, an inner session that opens no device)
does not pay torch's import.
"""

from .seed import DEFAULT_SEED, get_seed, set_seed  # noqa: F401 - light: numpy only


def _load() -> dict:
    import importlib

    # relative: the package works under another name (tests/hil/fake_ttnn loads a private copy)
    _namespace = importlib.import_module("._namespace", __name__)
    names = {k: v for k, v in vars(_namespace).items() if not k.startswith("_")}
    globals().update(names)
    globals()["__all__"] = sorted(names)
    return names


def _submodules() -> frozenset[str]:
    import os

    here = os.path.dirname(__file__)
    return frozenset(n[:-3] if n.endswith(".py") else n for n in os.listdir(here)
                     if n.endswith(".py") or os.path.isfile(os.path.join(here, n, "__init__.py")))


def __getattr__(name: str):
    if name.startswith("_") and name != "__all__":  # __path__ probes and the like: not ttnn names
        raise AttributeError(f"module 'ttsim' has no attribute {name!r}")
    if name in _submodules():  # `from . import numerics` mid-import, `ttsim.device`: just that module
        import importlib

        return importlib.import_module(f".{name}", __name__)
    names = _load()
    if name == "__all__":
        return globals()["__all__"]
    if name not in names:
        raise AttributeError(f"module 'ttsim' has no attribute {name!r}")
    return names[name]


def __dir__() -> list[str]:
    _load()  # first: loading binds the submodules too
    return sorted(globals())
