"""The backend carries the seed (harness.system): the simulator's opens its meshes seeded and under
the seed's device knobs; the cards' sets nothing, so a workload run on cards never imports ttsim.
The card run goes to tests/hil/fake_ttnn, whose simulator is a private copy (not ``ttsim``)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import ttsim
from harness.base.spec import RunSpec
from harness.system import CardBackend, SimBackend, choose_backend
from harness.workloads import FaultKnobs
from hil_helpers import FAKE_TTNN, ROOT, clean_env

#: one seed of the sweep, two arms, on the backend the child chooses; what it imported afterwards
RUN_A_SEED = """
import json, sys
from harness.base.spec import RunSpec
from harness.sweep.arms import run_seed
from harness.system import choose_backend

backend = choose_backend(hil=sys.argv[1] == "hil", probe=False)
results = run_seed(RunSpec(seed=3, backend=backend), ["control", "all"])
print("RESULT " + json.dumps({
    "backend": type(backend).__name__, "ttnn": getattr(backend.ttnn, "__version__", backend.ttnn.__name__),
    "verdicts": {arm: [[v.request_id, v.expected, len(v.got)] for v in r.verdicts] for arm, r in results},
    "ttsim": sorted(m for m in sys.modules if m == "ttsim" or m.startswith("ttsim."))}))
"""


def _run_a_seed(tmp_path, target: str) -> tuple[dict, list[dict]]:
    log = tmp_path / f"{target}.log"
    out = subprocess.run([sys.executable, "-c", RUN_A_SEED, target], cwd=ROOT, capture_output=True, text=True,
                         timeout=600, env=clean_env(PYTHONPATH=FAKE_TTNN, FAKE_TTNN_LOG=log))
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert out.returncode == 0 and lines, out.stdout[-2000:] + out.stderr[-3000:]
    events = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    return json.loads(lines[-1][len("RESULT "):]), events


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("runs")
    return {target: _run_a_seed(tmp, target) for target in ("hil", "sim")}


def test_a_workload_on_the_cards_backend_never_imports_ttsim(runs):
    card, events = runs["hil"]
    assert (card["backend"], card["ttnn"]) == ("CardBackend", "0.81.1+fake")
    assert card["ttsim"] == []
    assert sum(e["event"] == "open_mesh_device" for e in events) >= 2  # each arm ran on the stand-in cards
    assert {arm: len(v) for arm, v in card["verdicts"].items()} == {"control": 32, "all": 32}
    assert all(got == len(expected) for v in card["verdicts"].values() for _, expected, got in v)


def test_ttsim_arms_hil_never_imports_ttsim(tmp_path):
    """The user's path, in a fresh process: `ttsim arms --hil` probes the stand-in cards, sweeps a
    seed on them and writes its report, and the simulator package is never imported."""
    code = ("import json, sys; from harness.commands.cli import main; "
            "rc = main(['arms', '--hil', '--arms', 'all', '--seeds', '1', '--json', sys.argv[1]]); "
            "print('RESULT ' + json.dumps([rc, sorted(m for m in sys.modules if m.split('.')[0] == 'ttsim')]))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "hw.json")], cwd=ROOT, capture_output=True,
                         text=True, timeout=600, env=clean_env(PYTHONPATH=FAKE_TTNN, TTSIM_RUNS_DIR=tmp_path / "runs"))
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, out.stdout[-2000:] + out.stderr[-3000:]
    assert json.loads(lines[-1][len("RESULT "):]) == [0, []], out.stdout[-2000:] + out.stderr[-3000:]
    report = json.loads((tmp_path / "hw.json").read_text())
    assert report["backend"] == "hil" and report["arms"]["all"]["requests"] == 32


def test_the_same_seed_is_the_same_workload_on_both_backends(runs):
    """The prompts and their answers come from the seed (harness.base.seeds), not from the backend; the
    simulator's run is the control of the check above: it does import ttsim."""
    (card, _), (sim, events) = runs["hil"], runs["sim"]
    assert sim["backend"] == "SimBackend" and "ttsim" in sim["ttsim"] and events == []
    assert [[r, e] for r, e, _ in card["verdicts"]["all"]] == [[r, e] for r, e, _ in sim["verdicts"]["all"]]


def _opened(backend, seed: int, lag: float):
    """A 1x1 mesh opened by ``backend`` under ``seed`` and a readback lag, closed after the block."""
    from hil import devices

    opened = backend.open(seed, FaultKnobs(readback_lag=lag), ttsim.MeshShape(1, 1), {})
    try:
        yield opened.mesh
    finally:
        devices.close(backend.ttnn, opened)


def test_the_sim_backend_opens_under_the_seed_and_its_knobs():
    ttsim.set_seed(1)
    backend = choose_backend(hil=False)
    assert isinstance(backend, SimBackend)
    for mesh in _opened(backend, 5, 0.25):
        assert ttsim.get_seed() == 5 and mesh.lag == 0.25
        backend.seed(9)
        assert ttsim.get_seed() == 9


def test_the_card_backend_sets_neither_seed_nor_knobs():
    ttsim.set_seed(1)
    backend = CardBackend(ttsim)  # ttsim standing in for a card's module: its seed must stay as it was
    for mesh in _opened(backend, 5, 0.25):
        assert ttsim.get_seed() == 1 and mesh.lag == ttsim.device.DEFAULT_LAG != 0.25
        backend.seed(9)
        assert ttsim.get_seed() == 1
        assert backend.diagnostics(mesh) == [] and backend.device_timeout == ()


def test_a_system_opens_under_its_seed_and_knobs_whatever_ttsim_was_seeded_with():
    from harness.system import System

    ttsim.set_seed(1)
    system = System(RunSpec(seed=5), FaultKnobs(readback_lag=0.125))
    try:
        assert ttsim.get_seed() == 5 and system.mesh.lag == 0.125
    finally:
        system.close()


def test_a_systems_fresh_memory_is_its_seeds_whatever_ttsim_held_before():
    """Never-written device memory holds the seed's junk (ttsim/seed.py's junk_bytes), so the
    bytes show which seed the mesh was opened under."""
    from harness.system import System

    junk = []
    for ambient in (1, 2):
        ttsim.set_seed(ambient)
        system = System(RunSpec(seed=5), FaultKnobs())
        try:
            t = ttsim.allocate_tensor_on_device(ttsim.Shape([64]), ttsim.int32, ttsim.ROW_MAJOR_LAYOUT, system.mesh)
            junk.append(ttsim.to_torch(ttsim.get_device_tensors(t)[0]).tolist())
        finally:
            system.close()
    assert junk[0] == junk[1] and len(set(junk[0])) > 1
