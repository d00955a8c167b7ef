"""The plugin's decode layout (model/plugin_batch.py): persistent rows with condense, and
state slots that follow the request through ``slot_remap``. Cases follow the plugin's
``_update_states`` / ``_alloc_prefill_state_slots`` / ``_decode_state_slot_remap``."""

import pytest

from model.plugin_batch import PluginBatch


def _step(b, scheduled, new=(), cached=(), finished=(), live=None):
    live = set(live if live is not None else scheduled)
    return b.update(list(finished), set(scheduled), list(new), list(cached), live)


def test_new_requests_fill_rows_in_order_and_a_repeat_step_changes_nothing():
    b = PluginBatch(8)
    assert _step(b, "abc", new="abc")
    assert b.rows == ["a", "b", "c"]
    assert not _step(b, "abc", cached="abc")


def test_a_finished_row_is_filled_by_the_last_row_condensing_down():
    b = PluginBatch(8)
    _step(b, "abcd", new="abcd")
    assert _step(b, "abd", cached="abd", finished="c", live="abd")
    assert b.rows == ["a", "b", "d"]
    # two holes: the last row moves into the lowest hole, the next hole is already past the end
    _step(b, "abde", new="e", cached="abd")
    assert b.rows == ["a", "b", "d", "e"]
    _step(b, "de", cached="de", finished="ab", live="de")
    assert b.rows == ["e", "d"]


def test_a_freed_row_is_reused_by_an_added_request_before_condensing():
    b = PluginBatch(8)
    _step(b, "abc", new="abc")
    _step(b, "acx", new="x", cached="ac", finished="b", live="acx")
    assert b.rows == ["a", "x", "c"]


def test_a_prefill_step_drops_the_decodes_and_the_next_decode_re_adds_them_after_the_prefill():
    b = PluginBatch(8)
    _step(b, "ab", new="ab")
    assert b.prefill_slots(["a", "b"], {"a", "b"}) == [0, 1]
    _step(b, "n", new="n", live="abn")  # a prefill step: a and b are not scheduled
    assert b.rows == ["n"]
    assert b.prefill_slots(["n"], {"a", "b", "n"}) == [2]  # row 0's slot is held by a
    _step(b, "abn", cached="abn", live="abn")
    assert b.rows == ["n", "a", "b"]
    # state follows the request: row i reads slot remap[i]; the move is committed
    assert b.decode_remap(["n", "a", "b"]) == [2, 0, 1, 3, 4, 5, 6, 7]
    assert b.slot_of == {"n": 0, "a": 1, "b": 2}
    assert b.decode_remap(["n", "a", "b"]) is None  # now the identity


def test_finished_and_preempted_requests_release_their_state_slot():
    b = PluginBatch(8)
    _step(b, "ab", new="ab")
    b.prefill_slots(["a", "b"], {"a", "b"})
    _step(b, "b", cached="b", finished="a", live="b")
    assert b.slot_of == {"b": 1}
    assert b.prefill_slots(["c"], {"b", "c"}) == [0]


def test_a_decoding_request_without_a_slot_or_a_duplicate_slot_is_refused():
    b = PluginBatch(4)
    with pytest.raises(RuntimeError, match="'z' has no device state slot"):
        b.decode_remap(["z"])
    b.slot_of = {"a": 1, "b": 1}
    with pytest.raises(RuntimeError, match="not a permutation"):
        b.decode_remap(["a", "b"])
    with pytest.raises(RuntimeError, match="5 prefills exceed the 4 device state slots"):
        b.prefill_slots(list("abcde"), set("abcde"))


def test_an_added_request_takes_the_smallest_freed_row_and_the_rest_condense():
    b = PluginBatch(8)
    _step(b, "abcd", new="abcd")
    _step(b, "bdx", new="x", cached="bd", finished="ac", live="bdx")
    assert b.rows == ["x", "b", "d"]
