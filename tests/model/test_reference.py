"""The float64 reference, the weights and the tokenizer, on their own (no device)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from model.config import SMALL, TINY
from model.reference import ReferenceSession, reference_prefill
from model.tokenizer import decode, encode
from model.weights import generate_weights
from model_helpers import prompt, weights_for


def test_chunked_reference_equals_token_by_token():
    """Chunks (with conv/recurrent/KV state carried) == one token at a time, float64-tight."""
    w = weights_for(TINY)
    toks = prompt(70)
    whole = reference_prefill(TINY, w, toks)
    chunked = reference_prefill(TINY, w, toks, chunk=16)
    sess = ReferenceSession(TINY, w)
    stepwise = torch.stack([sess.decode(t) for t in toks])
    assert whole.dtype == torch.float64 and whole.shape == (70, TINY.vocab_size)
    torch.testing.assert_close(chunked, whole, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(stepwise, whole, rtol=1e-10, atol=1e-10)


def test_decode_after_prefill_equals_longer_prefill():
    w = weights_for(TINY)
    toks = prompt(40)
    sess = ReferenceSession(TINY, w)
    sess.prefill(toks[:33])
    got = torch.stack([sess.decode(t) for t in toks[33:]])
    torch.testing.assert_close(got, reference_prefill(TINY, w, toks)[33:], rtol=1e-10, atol=1e-10)


def test_weights_are_deterministic_and_seeded():
    a, b, c = generate_weights(TINY, 7), generate_weights(TINY, 7), generate_weights(TINY, 8)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert all(v.dtype == torch.float32 for v in a.values())
    assert not torch.equal(a["lm_head"], c["lm_head"])


def _greedy(config, w, toks, n):
    sess = ReferenceSession(config, w)
    logits = sess.prefill(toks)[-1]
    out = []
    for _ in range(n):
        t = int(logits.argmax())
        out.append(t)
        logits = sess.decode(t)
    return out


def test_activations_stay_order_one_and_greedy_is_prompt_dependent():
    w = weights_for(TINY)
    logits = reference_prefill(TINY, w, prompt(64))
    assert torch.isfinite(logits).all()
    std = float(logits.std(dim=-1).mean())
    assert 1.0 < std < 20.0, f"logit std {std}: not O(1)-peaky"
    top2 = logits.topk(2, dim=-1).values
    margin = float((top2[:, 0] - top2[:, 1]).median())
    assert margin > 0.1, f"median top-1 margin {margin} too small for bf16 argmax stability"
    a = _greedy(TINY, w, prompt(30), 12)
    b = _greedy(TINY, w, prompt(30, offset=50), 12)
    assert a != b, "greedy continuation does not depend on the prompt"
    assert len(set(a)) >= 3 and len(set(b)) >= 3, f"degenerate greedy outputs {a} {b}"


def test_small_preset_is_valid_and_runs():
    SMALL.validate(tp=2)
    w = generate_weights(SMALL, 0)
    logits = reference_prefill(SMALL, w, prompt(8))
    assert logits.shape == (8, SMALL.vocab_size) and torch.isfinite(logits).all()


def test_layer_pattern_is_three_gdn_to_one_attention():
    assert TINY.attention_layers == [3] and TINY.gdn_layers == [0, 1, 2]
    assert SMALL.attention_layers == [3, 7]
    assert TINY.rotary_dim == TINY.head_dim // 4


def test_tokenizer_roundtrip():
    s = "héllo wörld ✓"
    ids = encode(s)
    assert all(0 <= i < 256 for i in ids) and len(ids) == len(s.encode("utf-8"))
    assert decode(ids) == s
    assert decode([0xFF, 0x41]) == "\ufffdA"  # invalid UTF-8 is replaced, not raised
    with pytest.raises(ValueError, match="outside the byte vocab"):
        decode([256])


@pytest.mark.parametrize(
    "change, tp, field",
    [
        ({"num_heads": 3}, 1, "num_heads"),
        ({"num_kv_heads": 1, "num_heads": 3}, 2, "num_heads"),
        ({"num_kv_heads": 1, "num_heads": 4}, 2, "num_kv_heads"),
        ({"head_dim": 48}, 1, "head_dim"),
        ({"linear_key_head_dim": 40}, 1, "linear_key_head_dim"),
        ({"linear_value_head_dim": 20}, 1, "linear_value_head_dim"),
        ({"linear_num_value_heads": 3}, 1, "linear_num_value_heads"),
        ({"linear_num_key_heads": 1, "linear_num_value_heads": 2}, 2, "linear_num_key_heads"),
        ({"prefill_chunk": 48}, 1, "prefill_chunk"),
        ({"hidden_size": 0}, 1, "hidden_size"),
        ({"intermediate_size": 96}, 2, "intermediate_size"),
        ({"max_context": 1000}, 1, "max_context"),
        ({"rms_norm_eps": -1.0}, 1, "rms_norm_eps"),
    ],
)
def test_config_validation_names_the_field(change, tp, field):
    bad = dataclasses.replace(TINY, **change)
    with pytest.raises(ValueError, match=field):
        bad.validate(tp=tp)


def test_config_is_frozen_and_presets_validate():
    TINY.validate(tp=1)
    TINY.validate(tp=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        TINY.hidden_size = 128  # type: ignore[misc]


def test_last_only_reference_equals_full():
    """The long-context shortcut (last query only in the final layer) changes nothing."""
    from model.reference import reference_last_logits

    for cfg in (TINY, dataclasses.replace(TINY, num_layers=3)):  # attention last / GDN last
        w = weights_for(cfg)
        toks = prompt(90)
        full = reference_prefill(cfg, w, toks)[-1]
        torch.testing.assert_close(reference_last_logits(cfg, w, toks, chunk=32), full, rtol=1e-10, atol=1e-10)


def _counting_reference(monkeypatch):
    """model.reference.reference_last_logits, counting its calls (the cache's misses)."""
    from model import reference

    calls = []
    real = reference.reference_last_logits

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(reference, "reference_last_logits", counted)
    return calls


def test_reference_cache_hit_returns_the_computed_bytes(tmp_path, monkeypatch):
    """The session cache of float64 references (model_helpers): the first call computes and stores,
    the second reads the file back, bitwise the direct computation's, without computing."""
    from model.reference import reference_last_logits
    from model_helpers import cached_reference_last_logits

    w, toks = weights_for(TINY), prompt(40)
    direct = reference_last_logits(TINY, w, toks)
    calls = _counting_reference(monkeypatch)
    first = cached_reference_last_logits(tmp_path, TINY, w, toks)
    second = cached_reference_last_logits(tmp_path, TINY, w, toks)
    assert len(calls) == 1
    for got in (first, second):
        assert got.dtype == torch.float64 and torch.equal(got.view(torch.int64), direct.view(torch.int64))
    assert len(list(tmp_path.glob("reference-*.pt"))) == 1 and not list(tmp_path.glob("*.tmp"))


def test_reference_cache_key_changes_with_config_weights_and_tokens(tmp_path, monkeypatch):
    """A changed config field, one changed weight element or one changed token is another file (and
    another result), never the cached one."""
    from model.reference import reference_last_logits
    from model_helpers import cached_reference_last_logits, reference_key

    w, toks = weights_for(TINY), prompt(40)
    w2 = dict(w)
    w2["lm_head"] = w["lm_head"].clone()
    w2["lm_head"][3, 5] += 0.25
    cfg2 = dataclasses.replace(TINY, rope_theta=5000.0)
    toks2 = toks[:-1] + [(toks[-1] + 1) % TINY.vocab_size]
    variants = [(TINY, w, toks), (cfg2, w, toks), (TINY, w2, toks), (TINY, w, toks2)]
    assert len({reference_key(*v) for v in variants}) == len(variants)
    calls = _counting_reference(monkeypatch)
    for cfg, ww, tt in variants:
        got = cached_reference_last_logits(tmp_path, cfg, ww, tt)
        assert torch.equal(got, reference_last_logits(cfg, ww, tt))
    assert len(calls) == len(variants)  # one miss each (the direct calls above are not counted)
