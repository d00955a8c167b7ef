"""The local model directory `vllm serve` loads: config.json, a byte-level tokenizer built
with the `tokenizers` library (token id = UTF-8 byte, as model/tokenizer.py), and a chat
template that renders tools. Generated, never downloaded."""

from __future__ import annotations

import json
import os

from harness.base.spec import MODELS
from harness.engine.arch import ARCH

# Plain-text roles (a 256-token byte vocabulary has no room for special tokens). With tools,
# the system turn lists them and asks for Hermes-style <tool_call>{json}</tool_call>, the
# format vLLM's `hermes` tool parser reads.
CHAT_TEMPLATE = (
    "{% if tools %}system: You may call these tools. To call one, reply with "
    "<tool_call>{\"name\": NAME, \"arguments\": {...}}</tool_call>{{ '\\n' }}"
    "{% for tool in tools %}{{ tool | tojson }}{{ '\\n' }}{% endfor %}{% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'assistant' and m.tool_calls %}assistant:"
    "{% for tc in m.tool_calls %}<tool_call>{\"name\": \"{{ tc.function.name }}\", \"arguments\": "
    "{{ tc.function.arguments if tc.function.arguments is string else tc.function.arguments | tojson }}}"
    "</tool_call>{% endfor %}"
    "{% elif m.content is string %}{{ m.role }}: {{ m.content }}"
    "{% else %}{{ m.role }}: {{ m.content | map(attribute='text') | join('') }}{% endif %}{{ '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def _byte_tokenizer():
    """A BPE with no merges over the byte-level alphabet: one token per byte, id = byte."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel

    alphabet = ByteLevel.alphabet()  # the 256 printable stand-ins for bytes, GPT-2's table
    byte_to_char = _bytes_to_unicode()
    assert sorted(alphabet) == sorted(byte_to_char.values())
    vocab = {byte_to_char[b]: b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table (the ByteLevel pre-tokenizer's)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write(path: str, model: str = "tiny") -> str:
    """Write the model directory for ``model`` ("tiny"/"small": the Qwen3.6-style hybrid,
    "markov": the sweep model) at ``path``; returns ``path``."""
    if model not in MODELS:
        raise ValueError(f"unknown ttsim model {model!r}; choose from {', '.join(MODELS)}")
    if model in ("tiny", "small"):
        from model import config as mc

        c = getattr(mc, model.upper())

        geometry = {"hidden_size": c.hidden_size, "intermediate_size": c.intermediate_size,
                    "num_attention_heads": c.num_heads, "num_key_value_heads": c.num_kv_heads,
                    "head_dim": c.head_dim, "num_hidden_layers": c.num_layers, "max_context": c.max_context}
    else:
        from model.markov import MARKOV as c

        geometry = {"hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 2,
                    "num_key_value_heads": 1, "head_dim": 32, "num_hidden_layers": 1, "max_context": c.max_context}
    os.makedirs(path, exist_ok=True)
    max_context = geometry.pop("max_context")
    # a byte vocabulary has no special tokens: no BOS/EOS (llama's defaults would make byte 2 an EOS)
    config = {"architectures": [ARCH], "model_type": "llama", "vocab_size": 256, "bos_token_id": None, "eos_token_id": None,
              "max_position_embeddings": max_context, "torch_dtype": "float32", "ttsim_model": model, **geometry}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2, sort_keys=True)
    _byte_tokenizer().save(os.path.join(path, "tokenizer.json"))
    with open(os.path.join(path, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": max_context,
                   "clean_up_tokenization_spaces": False, "chat_template": CHAT_TEMPLATE}, f, indent=2)
    return path


def read_model(path: str) -> str:
    """The ttsim model a model directory names; a clear error for anything else."""
    cfg = os.path.join(path, "config.json")
    try:
        with open(cfg) as f:
            model = json.load(f).get("ttsim_model")
    except (OSError, ValueError) as exc:
        raise ValueError(f"{path} is not a ttsim model directory ({cfg}: {exc})") from None
    if model not in MODELS:
        raise ValueError(f"{cfg}: ttsim_model must be one of {', '.join(MODELS)}, got {model!r} "
                         f"(generate the directory with `bin/ttsim serve` or harness.engine.modeldir.write)")
    return model
