"""``pytest --hil`` end to end, in subprocesses.

The fail-closed proof uses the project's REAL 3.11 venv (this interpreter), where the real ttnn
cannot be installed. The session logic (card selection before import, fabric before open, one
worker, record, watchdog, reset) is exercised against tests/hil/fake_ttnn, a stand-in that
re-exports ttsim: it proves hil's plumbing, never anything about cards.
"""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap

import pytest

from hil_helpers import FAKE_TTNN, ROOT, clean_env, inner_pytest, run

REFUSED = 6  # fixtures.hardware.EXIT_REFUSED


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["in-process", "xdist"])
def test_pytest_hil_in_the_project_venv_fails_closed_in_one_line(workers, tmp_path):
    out = run(inner_pytest() + ["--hil", "-q"] + workers, cwd=ROOT, env=clean_env(TTSIM_RUNS_DIR=tmp_path))
    text = out.stdout + out.stderr
    assert out.returncode == REFUSED, text
    lines = [ln for ln in text.splitlines() if "refusing" in ln]
    assert len(lines) == 1, text
    v = sys.version_info
    assert lines[0].startswith(f"ttsim --hil: refusing to run: the real ttnn is not importable on Python "
                               f"{v.major}.{v.minor}.{v.micro}"), lines[0]
    assert "ModuleNotFoundError: No module named 'ttnn'" in lines[0]
    assert "no tests ran" in text and not re.search(r"\d+ passed", text), text
    assert "gw0" not in text  # no xdist worker was started
    assert not list(tmp_path.glob("*.jsonl")), "a refused session must not leave a session record"


def test_pytest_hil_with_a_users_generator_still_fails_closed_on_the_card(tmp_path):
    """--generator needs the backend's ttnn; without a card the refusal is the session's own
    one line (exit 6), not a loader error."""
    gen = str(ROOT / "tests" / "generators" / "qwen36_style.py") + ":Qwen36StyleGenerator"
    out = run(inner_pytest() + ["--hil", "-q", "--generator", gen], cwd=ROOT, env=clean_env(TTSIM_RUNS_DIR=tmp_path))
    text = out.stdout + out.stderr
    assert out.returncode == REFUSED, text
    assert [ln for ln in text.splitlines() if "refusing" in ln][0].startswith("ttsim --hil: refusing to run:")
    assert "--generator" not in text and not re.search(r"\d+ passed", text), text


COLLECT = textwrap.dedent("""
    import json, sys
    import pytest

    class Items:
        def pytest_collection_finish(self, session):
            self.items = [(i.nodeid, "device_backend" in i.fixturenames, sorted(m.name for m in i.iter_markers()))
                          for i in session.items]

    sim = Items()
    pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider"], plugins=[sim])
    print("SIM " + json.dumps(sim.items))
    sys.stdout.flush()
    print("HIL-COLLECTION-BEGINS")
    rc = pytest.main(["--hil", "--collect-only", "-q", "-p", "no:cacheprovider"])
    print("HIL-RC", int(rc))
""")


def test_hil_collects_exactly_the_sim_device_tests_minus_fault_injection():
    """Both collections in one interpreter (the second is `pytest --hil --collect-only -q` as pytest.main
    runs it): what --hil lists equals the sim's device tests (they take `device_backend`, most through `ttnn`) minus
    ttsim's own tests and those that need fault injection. No card is needed to collect."""
    out = run([sys.executable, "-c", COLLECT], cwd=ROOT, env=clean_env())
    sim_part, _, hil_part = out.stdout.partition("HIL-COLLECTION-BEGINS")
    items = json.loads([ln for ln in sim_part.splitlines() if ln.startswith("SIM ")][0][4:])
    expected = {nodeid for nodeid, uses_ttnn, marks in items
                if uses_ttnn and "needs_fault_injection" not in marks and "simulator_only" not in marks}
    # (syrupy makes any --collect-only that includes snapshot tests exit 1: "snapshots unused"; the sim
    # run does the same)
    assert re.search(r"^HIL-RC [01]$", hil_part, re.M) and "ERROR" not in hil_part, out.stdout + out.stderr
    got = {ln for ln in hil_part.splitlines() if "::" in ln}
    assert got == expected
    # the split the suite is meant to have, spelled out
    assert "tests/serving/test_stage3.py::test_stage3_all_arm_every_request_equals_its_serial_answer[1]" in got
    assert "tests/serving/test_qwen_serving.py::test_batch_invariance_each_request_in_a_full_batch_equals_it_alone" in got
    assert "tests/model/test_model_long_context.py::test_prefill_245k_tp2_matches_reference_on_cards[2]" in got
    assert any(i.startswith("tests/model/test_model_prefill.py::test_prefill_matches_float64_reference") for i in got)
    assert not any(i.startswith(("tests/ttsim/", "tests/kernels/", "tests/hil/", "tests/serving/test_arms.py",
                                 "tests/serving/test_position_clamp.py")) for i in got)
    assert not any("test_inactive_rows_survive_nan_garbage_in_fresh_buffers" in i for i in got)
    assert len(got) >= 30


SESSION_TESTS = textwrap.dedent("""
    import os, sys, time
    import pytest

    @pytest.mark.parametrize("mesh_device", [2], indirect=True)
    def test_tp2(ttnn, mesh_device, record_property):
        assert ttnn.__version__ == "0.81.1+fake" and mesh_device.get_num_devices() == 2
        assert "ttsim" not in sys.modules  # a card session seeds nothing: the simulator stays out
        record_property("pcc", 0.99947)

    def test_fails_on_card(ttnn, device):
        assert os.environ.get("FAIL_ON_CARD") != "1", "planted failure"

    def test_hangs(ttnn):
        if os.environ.get("HANG") == "1":
            time.sleep(120)

    @pytest.mark.needs_fault_injection
    def test_knobs(ttnn):
        pass

    def test_not_a_device_test():
        pass
""")


def _fake_session(tmp_path, *args, **env):
    tests = tmp_path / "cards"
    tests.mkdir(exist_ok=True)
    (tests / "test_cards.py").write_text(SESSION_TESTS)
    # the stand-in re-exports ttsim, whose first use imports torch (seconds on a loaded machine);
    # the real ttnn does not: pay it at collection, outside the first test's --hil-timeout
    (tests / "conftest.py").write_text("import torch  # noqa: F401\n")
    log = tmp_path / "ttnn.log"
    runs = tmp_path / "runs"
    e = clean_env(PYTHONPATH=FAKE_TTNN, FAKE_TTNN_LOG=log, TTSIM_RUNS_DIR=runs, **env)
    out = run(inner_pytest() + ["--hil", "--rootdir", tests, str(tests), *args], cwd=ROOT, env=e, timeout=240)
    events = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    records = [json.loads(ln) for ln in (runs / "hil-sessions.jsonl").read_text().splitlines()] \
        if (runs / "hil-sessions.jsonl").exists() else []
    return out, events, records


def test_session_selects_cards_before_import_opens_fabric_first_one_worker_and_records(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi_log = tmp_path / "smi.log"
    (bin_dir / "tt-smi").write_text(f"#!/bin/sh\necho \"$@\" >> {smi_log}\n")
    (bin_dir / "tt-smi").chmod(0o755)
    out, events, records = _fake_session(tmp_path, "-n", "2", "-v", "--hil-devices", "0,1", "--hil-reset",
                                         FAIL_ON_CARD="1", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    text = out.stdout + out.stderr
    assert out.returncode == 1, text  # the planted failure, nothing else
    assert re.search(r"\b1 failed, 2 passed\b", text), text
    assert "test_knobs" not in text and "test_not_a_device_test" not in text  # deselected, never run
    assert "created: 1/1 worker" in text or "1 worker [" in text, text  # -n 2 became one worker
    assert "ttsim --hil: ttnn 0.81.1+fake" in text and "cards [0, 1]" in text
    # the environment was final before ttnn was first imported, in every process that imported it
    imports = [e for e in events if e["event"] == "import"]
    assert imports and all(e["visible"] == "0,1" for e in imports), imports
    worker_imports = [e for e in imports if e["mgd"]]
    assert worker_imports and all(e["mgd"].endswith("p150a_x2_1cable_mesh_graph_descriptor.textproto")
                                  for e in worker_imports)
    # the 1x2 mesh: FABRIC_1D set before open, reset after close; the 1x1 device: no fabric at all
    calls = [e["event"] for e in events if e["event"] != "import"]
    assert calls == ["set_fabric_config", "open_mesh_device", "close_mesh_device", "set_fabric_config",
                     "open_mesh_device", "close_mesh_device", ], calls
    fabric = [e for e in events if e["event"] == "set_fabric_config"]
    assert fabric[0]["args"][0] == "FabricConfig.FABRIC_1D" and fabric[1]["args"] == ["FabricConfig.DISABLED"]
    opens = [e for e in events if e["event"] == "open_mesh_device"]
    assert opens[0]["fabric"] == "FabricConfig.FABRIC_1D" and opens[1]["fabric"] == "FabricConfig.DISABLED"
    assert opens[0]["dispatch"] == "DispatchCoreConfig(type=DispatchCoreType.WORKER, axis=DispatchCoreAxis.COL)"
    # tt-smi: the selected cards only, before the session and after the failed test
    assert smi_log.read_text().splitlines() == ["-r 0,1", "-r 0,1"]
    # one JSONL record for the session
    assert len(records) == 1, records
    r = records[0]
    assert (r["backend"], r["card_ids"], r["ttnn_version"], r["exitstatus"]) == ("hil", [0, 1], "0.81.1+fake", 1)
    assert re.fullmatch(r"[0-9a-f]{40}", r["git_sha"]) and r["host"]
    outcomes = {t["nodeid"].split("::")[-1]: t for t in r["tests"]}
    assert {k: v["outcome"] for k, v in outcomes.items()} == {"test_tp2[2]": "passed", "test_fails_on_card": "failed",
                                                              "test_hangs": "passed"}
    assert outcomes["test_tp2[2]"]["pcc"] == {"pcc": 0.99947}
    assert "planted failure" in outcomes["test_fails_on_card"]["message"]


def test_watchdog_kills_a_hung_test_with_one_clear_line_and_keeps_the_record(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "tt-smi").write_text(f"#!/bin/sh\necho \"$@\" >> {tmp_path / 'smi.log'}\n")
    (bin_dir / "tt-smi").chmod(0o755)
    out, events, records = _fake_session(tmp_path, "-n", "0", "--hil-timeout", "4", "-k", "hangs or tp2",
                                         HANG="1", PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert not (tmp_path / "smi.log").exists()  # no --hil-reset: the cards are never reset
    text = out.stdout + out.stderr
    assert out.returncode == -9, text
    line = [ln for ln in text.splitlines() if ln.startswith("hil watchdog:")]
    assert len(line) == 1 and "test_cards.py::test_hangs did not finish within --hil-timeout=4 s" in line[0], text
    assert len(records) == 1 and records[0]["aborted"].startswith("watchdog: ") and records[0]["tests"][0]["outcome"] == "passed"
    assert not list((tmp_path / "runs").glob("*.partial.json"))


def test_fewer_cards_than_the_selected_tests_need_is_refused_before_any_test(tmp_path):
    out, events, _ = _fake_session(tmp_path, "-n", "0", FAKE_TTNN_CARDS="1")
    text = out.stdout + out.stderr
    assert out.returncode != 0 and "the selected tests need 2 cards (a 1x2 mesh) but 1 is selected" in text, text
    assert not re.search(r"\d+ passed", text)
    assert not [e for e in events if e["event"] == "open_mesh_device"]
