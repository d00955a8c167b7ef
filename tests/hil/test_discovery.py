"""hil.discovery pieces that need no ttnn: card ids, the runtime's cause in one line, the env."""

from __future__ import annotations

import re
import sys

import pytest

from hil import discovery

REAL_NO_CHIPS = ("TT_FATAL @ /project/tt_metal/llrt/tt_cluster.cpp:129: num_chips > 0\ninfo:\n"
                 "No chips detected in the cluster\nbacktrace:\n --- /x/_ttnncpp.so(+0xb233e8) [0x7fb55bf233e8]\n"
                 " --- tt::Cluster::generate_cluster_descriptor()\n")


def test_runtime_cause_is_one_line():
    assert discovery.runtime_cause(RuntimeError(REAL_NO_CHIPS)) == \
        "TT_FATAL num_chips > 0: No chips detected in the cluster (tt_cluster.cpp:129)"
    assert discovery.runtime_cause(OSError("boom\nmore")) == "OSError: boom"


@pytest.mark.parametrize("text, ids", [(None, None), ("all", None), ("0,1", [0, 1]), (" 1 ", [1]), ("3,0", [3, 0])])
def test_parse_devices(text, ids):
    assert discovery.parse_devices(text) == ids


@pytest.mark.parametrize("text, match", [("0,a", "not a comma-separated"), ("-1", "not a comma-separated"),
                                         ("0,0", "names a card twice"), ("0,,1", "not a comma-separated")])
def test_parse_devices_rejects(text, match):
    with pytest.raises(ValueError, match=match):
        discovery.parse_devices(text)


def test_cards_are_selected_only_before_ttnn_is_imported(monkeypatch):
    env = {}
    discovery.select_cards([0, 1], env)
    assert env == {"TT_VISIBLE_DEVICES": "0,1"}
    discovery.select_cards(None, env)  # every card: leave the environment alone
    assert env == {"TT_VISIBLE_DEVICES": "0,1"}
    monkeypatch.setitem(sys.modules, "ttnn", object())
    with pytest.raises(RuntimeError, match="must be set before ttnn is imported"):
        discovery.select_cards([0], {})


def test_mesh_graph_descriptor_is_used_for_two_cards_unless_the_user_set_one():
    env = {}
    assert discovery.use_mesh_graph(1, env) is None and env == {}
    assert discovery.use_mesh_graph(2, env) == str(discovery.MESH_GRAPH)
    user = {"TT_MESH_GRAPH_DESC_PATH": "/mine.textproto"}
    assert discovery.use_mesh_graph(2, user) == "/mine.textproto"


def test_our_mesh_graph_descriptor_is_a_one_cable_1x2_blackhole_mesh():
    text = re.sub(r"#.*", "", discovery.MESH_GRAPH.read_text())
    assert text.count("{") == text.count("}")
    assert re.search(r"arch:\s*BLACKHOLE", text)
    assert re.search(r"device_topology\s*{\s*dims:\s*\[\s*1\s*,\s*2\s*\]\s*}", text)
    assert re.search(r"host_topology\s*{\s*dims:\s*\[\s*1\s*,\s*1\s*\]\s*}", text)
    # the stock p150_x2 descriptor asks for 4 channels and refuses a one-cable pair
    assert re.findall(r"channels\s*{\s*count:\s*(\d+)", text) == ["2"]
    assert re.search(r'top_level_instance\s*{\s*mesh\s*{\s*mesh_descriptor:\s*"M0"\s*mesh_id:\s*0\s*}\s*}', text)


class FakeRuntime:
    """What hil.discovery.inspect asks of an imported ttnn (the verdicts on the real one are in
    test_real_ttnn.py)."""

    __version__ = "0.81.1"
    __file__ = "/fake/ttnn/__init__.py"

    def __init__(self, chips=2, fatal=None):
        self.chips, self.fatal = chips, fatal
        self.cluster = type("cluster", (), {"get_cluster_type": staticmethod(lambda: "ClusterType.P150_X2")})

    def GetNumAvailableDevices(self):  # noqa: N802 - ttnn's name
        if self.fatal:
            raise RuntimeError(self.fatal)
        return self.chips

    def get_arch_name(self):
        return "blackhole"


@pytest.mark.parametrize("runtime, devices, need, env, cause", [
    (FakeRuntime(fatal=REAL_NO_CHIPS), None, 1, {},
     "no Tenstorrent card found: TT_FATAL num_chips > 0: No chips detected in the cluster (tt_cluster.cpp:129)"),
    (FakeRuntime(chips=0), None, 1, {}, "no Tenstorrent card found: GetNumAvailableDevices() returned 0"),
    (FakeRuntime(chips=1), None, 2, {}, "found 1 card(s); the run needs 2 (a 1x2 mesh)"),
    (FakeRuntime(chips=2), [0, 1, 2], 1, {"TT_VISIBLE_DEVICES": "0,1,2"},
     "--hil-devices 0,1,2 selects 3 card(s) but ttnn sees 2 with TT_VISIBLE_DEVICES=0,1,2"),
    (FakeRuntime(chips=1), None, 1, {"TT_METAL_MOCK_CLUSTER_DESC_PATH": "/m.yaml"},
     "TT_METAL_MOCK_CLUSTER_DESC_PATH is set (/m.yaml): a mock cluster describes chips that do not exist (ttnn "
     "reports 1 chip(s), cluster type ClusterType.P150_X2); unset it to run on cards"),
])
def test_inspect_refuses_with_one_line(runtime, devices, need, env, cause):
    pr = discovery.inspect(runtime, devices, need, env)
    assert (pr.ok, pr.cause) == (False, cause)


def test_inspect_accepts_enough_cards():
    pr = discovery.inspect(FakeRuntime(chips=2), [0, 1], 2, {"TT_VISIBLE_DEVICES": "0,1"})
    assert pr.ok and pr.cause is None and pr.card_ids == [0, 1] and pr.num_chips == 2
    assert (pr.arch, pr.cluster_type, pr.visible_devices) == ("blackhole", "ClusterType.P150_X2", "0,1")
    assert discovery.inspect(FakeRuntime(chips=2), None, 1, {}).card_ids == [0, 1]


def test_the_watchdog_backs_the_call_deadline_naming_its_option_and_the_call(capfd):
    """On cards a call blocked in the runtime cannot be interrupted from inside; the same watchdog
    process that pytest --hil keeps is armed per call (harness/deadline.py) with the call's line,
    its own timeout, and names --call-deadline when it kills."""
    import subprocess

    from hil.watchdog import Watchdog

    victim = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dog = Watchdog(60.0, target_pid=victim.pid, option="--call-deadline")
    try:
        dog.arm("decode_forward at engine step 7", 0.5)
        victim.wait(timeout=30)
    finally:
        victim.kill()
        dog.stop()
    assert victim.returncode == -9
    err = capfd.readouterr().err
    assert "hil watchdog: decode_forward at engine step 7 did not finish within --call-deadline=0.5 s" in err, err
