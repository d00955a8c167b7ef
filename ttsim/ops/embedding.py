"""ttnn.embedding: a table lookup of token ids (UINT32, ROW_MAJOR) into a ROW_MAJOR weight."""

from __future__ import annotations

import enum

import torch

from .. import numerics
from ..diagnostics import Entry
from ..kernels.card_index import unsigned
from ..stray import read_bytes
from ..tensor import Tensor, _describe
from ..types import ELEMENT_SIZE, DataType, Layout, MemoryConfig, TTFatal
from .base import require_device_tensor, require_layout, require_same_device, run_op


#: up to this many ids the vocabulary check reads them as Python ints (decode rows, prefill chunks)
SMALL_IDS = 256


class EmbeddingsType(enum.Enum):
    GENERIC = 0
    PADDED = 1
    BINARY = 2

    def __repr__(self) -> str:
        return f"EmbeddingsType.{self.name}"

    __str__ = __repr__


def embedding(
    input_tensor: Tensor,
    weight: Tensor,
    *,
    padding_idx: int | None = None,
    layout: Layout | None = None,
    embeddings_type: EmbeddingsType = EmbeddingsType.GENERIC,
    dtype: DataType | None = None,
    memory_config: MemoryConfig | None = None,
    output_tensor: Tensor | None = None,
) -> Tensor:
    """Rows of ``weight`` ([vocab, hidden], any leading 1s) picked by ``input_tensor`` ([batch, seq]).

    Output ``[batch, seq, hidden]`` in ``layout`` (default: the weight's layout, ROW_MAJOR),
    dtype ``dtype`` (default: the weight's). ``padding_idx`` (PADDED embeddings) gives zero
    rows for that token; BINARY embeddings (vocab of 2) are plain lookups here too. A token
    id outside ``[0, vocab)`` is read as a card reads it: unsigned, unchecked, the row at that
    index past the table (whatever the chip's memory holds there: ttsim/stray.py), recorded in
    ``ttsim.diagnostics``.
    """
    op = "embedding"
    ids = require_device_tensor(op, "input_tensor", input_tensor)
    w = require_device_tensor(op, "weight", weight)
    require_same_device(op, {"input_tensor": ids, "weight": w})
    if ids._dtype not in (DataType.UINT32, DataType.BFLOAT16):
        raise TTFatal(f"{op}: input_tensor must be UINT32 (or BFLOAT16) token ids, got {_describe(ids)}")
    require_layout(op, "weight", w, Layout.ROW_MAJOR)
    if w._dtype not in (DataType.BFLOAT16, DataType.FLOAT32):
        raise TTFatal(f"{op}: weight must be BFLOAT16 or FLOAT32, got {_describe(w)}")
    wshape = list(w._shape)
    if len(wshape) < 2 or any(d != 1 for d in wshape[:-2]):
        raise TTFatal(f"{op}: weight must be [vocab, hidden] (leading dims 1), got {_describe(w)}")
    ishape = list(ids._shape)
    if not 1 <= len(ishape) <= 4 or any(d != 1 for d in ishape[1:-1]):
        raise TTFatal(f"{op}: input_tensor must be [batch, seq] (or [batch, 1, 1, seq]), got {_describe(ids)}")
    if not isinstance(embeddings_type, EmbeddingsType):
        raise TTFatal(f"{op}: embeddings_type must be a ttnn.EmbeddingsType, got {embeddings_type!r}")
    if output_tensor is not None:
        raise TTFatal(f"{op}: output_tensor= is not modelled by ttsim; use the returned tensor")
    vocab, hidden = wshape[-2], wshape[-1]
    batch = ishape[0] if len(ishape) > 1 else 1
    seq = ishape[-1]
    out_layout = w._layout if layout is None else layout
    out_dtype = w._dtype if dtype is None else dtype
    if not isinstance(out_layout, Layout) or out_layout == Layout.INVALID:
        raise TTFatal(f"{op}: layout must be ROW_MAJOR_LAYOUT or TILE_LAYOUT, got {layout!r}")
    pad = padding_idx
    n_ids = batch * seq
    ids_2d, table_2d = len(ishape) == 2, len(wshape) == 2  # stored as [batch, seq] / [vocab, hidden] already

    device = w._device

    def math(tok, table, chip):
        # UINT32 ids are int32 bit patterns: a negative one is >= 2**31, outside any vocab, so
        # the range check and the lookup can use the stored ints as they are
        idx = tok if ids_2d else tok.reshape(batch, seq)
        if ids._dtype != DataType.UINT32:
            idx = idx.to(torch.int64)
        if not table_2d:
            table = table.reshape(vocab, hidden)
        if n_ids <= SMALL_IDS:  # a few ids: as Python ints, cheaper than aminmax and two item()s
            rows = idx.tolist()
            vals = rows[0] if batch == 1 else [v for r in rows for v in r]
            in_vocab = not vals or (min(vals) >= 0 and max(vals) < vocab)
        else:
            lo, hi = torch.aminmax(idx)
            in_vocab = int(lo) >= 0 and int(hi) < vocab
        if not in_vocab:
            # a card does not check device-resident ids: the kernel reads past the table
            bad = (idx < 0) | (idx >= vocab)
            out = torch.embedding(table, torch.where(bad, 0, idx).to(torch.int64))
            _read_past_table(op, device, w._buffers[chip], idx, bad, vocab, hidden, out)
        else:
            out = torch.embedding(table, idx)  # [batch, seq, hidden]
        if pad is not None:
            out = torch.where((idx == pad).unsqueeze(-1), torch.zeros((), dtype=out.dtype), out)
        return out

    return run_op(op, [ids, w], (batch, seq, hidden), out_dtype, out_layout, math, memory_config=memory_config,
                  chip_args=lambda i: (i,), moves_values=True)


def _read_past_table(op: str, device, buf, idx: torch.Tensor, bad: torch.Tensor, vocab: int, hidden: int,
                     out: torch.Tensor) -> None:
    """Fill the rows of ``out`` whose id is outside the vocab with what a card's reader gets:
    the ``hidden`` values at row ``id`` (unsigned) of the table's buffer, wherever that lies."""
    width = hidden * ELEMENT_SIZE[buf.dtype]
    flat_ids = idx.reshape(-1).tolist()
    flat_out = out.reshape(-1, hidden)
    for n in torch.nonzero(bad.reshape(-1)).reshape(-1).tolist():
        u = unsigned(flat_ids[n])
        raw = read_bytes(buf.chip, buf.buffer_type, buf.address + u * width, width)
        # NaNs canonical, as every bf16 value ttsim stores (run_op's canon mark relies on it)
        row = numerics.decode(raw, buf.dtype, Layout.ROW_MAJOR, (hidden,))
        flat_out[n] = numerics.to_bfloat16(row) if row.dtype == torch.bfloat16 else row.to(flat_out.dtype)
        device._diagnostics.append(Entry(op, buf.chip.id, n, flat_ids[n], None, None, u, (), "read",
                                         f"row {u} of a {vocab}-row table"))
