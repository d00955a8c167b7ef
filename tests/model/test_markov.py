"""The sweep model's host oracle: greedy answers from a per-position successor table."""

import torch

from model.markov import MARKOV, _table, greedy_reference


def _one_token_at_a_time(prompt, max_tokens):
    tok = _table(MARKOV.vocab_size, MARKOV.vocab_size, 1)
    pos = _table(MARKOV.max_context, MARKOV.vocab_size, 2)
    out, t, p = [], prompt[-1], len(prompt) - 1
    while len(out) < max_tokens:
        t = int(torch.argmax(tok[t] + pos[p]))  # ties: the first index
        out.append(t)
        p += 1
    return out


def test_greedy_reference_equals_one_argmax_per_token():
    g = torch.Generator().manual_seed(7)
    prompts = [torch.randint(0, MARKOV.vocab_size, (n,), generator=g).tolist() for n in (1, 2, 31, 200)]
    prompts.append([5] * (MARKOV.max_context - 40))  # runs up to the last position
    for prompt in prompts:
        n = min(40, MARKOV.max_context - len(prompt) + 1)
        assert greedy_reference(prompt, n) == _one_token_at_a_time(prompt, n), prompt[:4]


def test_the_tables_have_ties_so_the_first_index_rule_is_exercised():
    tok = _table(MARKOV.vocab_size, MARKOV.vocab_size, 1)
    pos = _table(MARKOV.max_context, MARKOV.vocab_size, 2)
    sums = tok[:, None, :] + pos[None, :64, :]
    top = sums.max(dim=-1, keepdim=True).values
    assert bool(((sums == top).sum(dim=-1) > 1).any())
