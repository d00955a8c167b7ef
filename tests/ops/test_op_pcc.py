"""Op PCC on the session's backend: what the model's ops compute, against float64 torch, with
gates a card must meet too (ttsim's exact-rounding checks live in tests/ttsim). These are device
tests: `pytest --hil` runs them on cards, each reporting its PCC into the session record."""

import pytest
import torch

from model.pcc import comp_pcc

NB, NKV, BS, D = 8, 2, 32, 64


def _tile(ttnn, x, device, **kw):
    return ttnn.from_torch(x, dtype=ttnn.bfloat16, layout=ttnn.TILE_LAYOUT, device=device, **kw)


def _gate(record_property, name, want, got, gate):
    ok, pcc = comp_pcc(want.double(), got.double(), gate)
    record_property(f"pcc {name}", float(pcc))
    assert ok, f"{name}: PCC {pcc} < {gate}"


def test_matmul_pcc(ttnn, device, record_property):
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(1, 1, 96, 256, generator=g), torch.randn(1, 1, 256, 128, generator=g)
    out = ttnn.to_torch(ttnn.matmul(_tile(ttnn, a, device), _tile(ttnn, b, device)))
    _gate(record_property, "matmul", a.double() @ b.double(), out, 0.999)


def test_rms_norm_pcc(ttnn, device, record_property):
    g = torch.Generator().manual_seed(1)
    x, w = torch.randn(1, 1, 64, 256, generator=g), 1 + 0.1 * torch.randn(256, generator=g)
    out = ttnn.rms_norm(_tile(ttnn, x, device), epsilon=1e-6, weight=_tile(ttnn, w.reshape(1, 1, 1, 256), device))
    want = x.double() * torch.rsqrt(x.double().square().mean(-1, keepdim=True) + 1e-6) * w.double()
    _gate(record_property, "rms_norm", want, ttnn.to_torch(out), 0.999)


@pytest.mark.parametrize("streaming", [True, False], ids=["streaming", "legacy"])
def test_chunked_sdpa_with_an_offset_pcc(ttnn, device, streaming, record_property):
    """Prefill attention of a chunk at position 64 (causal with an offset), the production gate, by
    either of the model's two ops: streaming = chunked SDPA reading K/V through the page table;
    legacy = full SDPA over the materialised K/V with an explicit additive causal-offset mask."""
    g = torch.Generator().manual_seed(2)
    k, v = torch.randn(NB, NKV, BS, D, generator=g), torch.randn(NB, NKV, BS, D, generator=g)
    table = torch.randperm(NB, generator=g).reshape(2, 4).int()
    q = torch.randn(2, 4, 64, D, generator=g)
    cfg = ttnn.SDPAProgramConfig(compute_with_storage_grid_size=ttnn.CoreCoord(13, 10), q_chunk_size=32,
                                 k_chunk_size=32)
    start, sq = 64, 64
    keys = torch.stack([torch.cat([k[table[r, p]] for p in range(4)], dim=1)[:, :start + sq] for r in range(2)])
    vals = torch.stack([torch.cat([v[table[r, p]] for p in range(4)], dim=1)[:, :start + sq] for r in range(2)])
    hidden = torch.arange(start + sq)[None, :] > (start + torch.arange(sq))[:, None]  # key after the query
    if streaming:
        tt_table = ttnn.from_torch(table, dtype=ttnn.int32, device=device)
        out = ttnn.transformer.chunked_scaled_dot_product_attention(
            _tile(ttnn, q, device), _tile(ttnn, k, device), _tile(ttnn, v, device), tt_table, start,
            program_config=cfg)
    else:
        mask = torch.zeros(1, 1, sq, start + sq).masked_fill(hidden, float("-inf"))
        out = ttnn.transformer.scaled_dot_product_attention(
            _tile(ttnn, q, device), _tile(ttnn, keys, device), _tile(ttnn, vals, device),
            attn_mask=_tile(ttnn, mask, device), is_causal=False, program_config=cfg)
    want = torch.empty(2, 4, sq, D, dtype=torch.float64)
    for r in range(2):
        s = q[r].double() @ keys[r].double().repeat_interleave(2, 0).transpose(-1, -2) / D**0.5
        want[r] = torch.softmax(s.masked_fill(hidden, float("-inf")), -1) @ vals[r].double().repeat_interleave(2, 0)
    _gate(record_property, f"prefill sdpa {'streaming' if streaming else 'legacy'}", want, ttnn.to_torch(out), 0.9994)


@pytest.mark.parametrize("mesh_device", [2], indirect=True)
def test_all_reduce_on_the_1x2_mesh_pcc(ttnn, mesh_device, record_property):
    """TP=2's collective over the fabric: the sum of the two chips' shards on both chips."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 1, 32, 256, generator=g)  # chip i holds x[i]
    t = _tile(ttnn, x, mesh_device, mesh_mapper=ttnn.ShardTensorToMesh(mesh_device, dim=0))
    out = ttnn.to_torch(ttnn.all_reduce(t), mesh_composer=ttnn.ConcatMeshToTensor(mesh_device, dim=0))
    want = (x[0] + x[1]).double()
    for chip in torch.chunk(out, 2, dim=0):
        _gate(record_property, "all_reduce", want.unsqueeze(0), chip, 0.9999)
