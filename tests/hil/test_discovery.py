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
