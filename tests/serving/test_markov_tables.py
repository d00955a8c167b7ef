"""The sweep model uploads its tables from a cached bf16 host copy (model.markov._table_bf16)
instead of converting the float32 tables each run: the device must hold the same bytes, and
nothing a run does may reach the cache."""

import torch

import ttsim
from ttsim import numerics
from model.markov import MARKOV, MarkovModel, _table, _table_bf16

SPECS = [(MARKOV.vocab_size, MARKOV.vocab_size, 1), (MARKOV.max_context, MARKOV.vocab_size, 2)]


def test_the_bf16_tables_are_the_float_tables_exactly():
    for spec in SPECS:
        f32, b16 = _table(*spec), _table_bf16(*spec)
        assert b16.dtype == torch.bfloat16 and b16.shape == f32.shape
        assert torch.equal(b16.to(torch.float32), f32)  # integers 0..63: exact in bf16
        assert torch.equal(b16.view(torch.int16), numerics.to_bfloat16(f32).view(torch.int16))


def _image(t) -> bytes:
    buf = t._buffers[0]
    return numerics.encode(buf.chip.contents(buf), buf.dtype, buf.layout).tobytes()


def test_a_models_device_tables_are_the_float_uploads_bytes_and_own_them():
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 1))
    try:
        model = MarkovModel(ttsim, dev)
        ttsim.synchronize_device(dev)
        for table, spec in ((model.tok_table, SPECS[0]), (model.pos_table, SPECS[1])):
            ref = ttsim.from_torch(_table(*spec), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT, device=dev)
            ttsim.synchronize_device(dev)  # (a write still queued would show the memory it lands on)
            assert _image(table) == _image(ref)
            cached = _table_bf16(*spec).clone()
            buf = table._buffers[0]
            buf.chip.contents(buf).add_(1)  # the device's copy written in place: the cache is untouched
            assert torch.equal(_table_bf16(*spec).view(torch.int16), cached.view(torch.int16))
            assert buf.data.untyped_storage().data_ptr() != _table_bf16(*spec).untyped_storage().data_ptr()
    finally:
        ttsim.close_mesh_device(dev)
