"""Byte-level tokenizer: token ids are the UTF-8 bytes (vocab 256)."""

from __future__ import annotations


def encode(text: str) -> list[int]:
    if not isinstance(text, str):
        raise TypeError(f"encode: text must be a str, got {type(text).__name__}")
    return list(text.encode("utf-8"))


def decode(ids) -> str:
    out = bytearray()
    for i in ids:
        i = int(i)
        if not 0 <= i < 256:
            raise ValueError(f"decode: token id {i} is outside the byte vocab [0, 256)")
        out.append(i)
    return out.decode("utf-8", errors="replace")
