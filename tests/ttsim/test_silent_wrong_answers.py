"""Arguments that used to be accepted and ignored: paged_fill_cache's batch_idx_tensor,
output_tensor / optional_output_tensor, grouped GDN value heads; errors raised at the call
instead of inside close_device; a device released even when its queue fails."""

import pytest
import torch

import ttsim


def _tile(x, device, dtype=ttsim.bfloat16):
    return ttsim.from_torch(x, dtype=dtype, layout=ttsim.TILE_LAYOUT, device=device)


def _ints(x, device):
    return ttsim.from_torch(torch.tensor(x, dtype=torch.int32), dtype=ttsim.int32, device=device)


# -- paged_fill_cache(batch_idx_tensor=) ------------------------------------------------

def _fill_setup(device):
    nb, nkv, bs, d = 8, 1, 32, 32
    cache = _tile(torch.zeros(nb, nkv, bs, d), device)
    table = torch.arange(nb).reshape(4, 2).int()  # row r owns blocks 2r, 2r+1
    x = torch.arange(1, 1 + 64 * d, dtype=torch.float32).reshape(1, nkv, 64, d) / 64
    return cache, _ints(table.tolist(), device), x


def test_fill_cache_writes_the_row_named_by_batch_idx_tensor(device):
    cache, table, x = _fill_setup(device)
    ttsim.experimental.paged_fill_cache(cache, _tile(x, device), table, batch_idx_tensor=_ints([2], device),
                                        batch_idx=0)
    got = ttsim.to_torch(cache)
    expect = x.bfloat16().float()[0, 0]
    assert torch.equal(got[4, 0], expect[:32]) and torch.equal(got[5, 0], expect[32:])
    assert not got[0].any() and not got[1].any()  # row 0 (the int) untouched


def test_fill_cache_batch_idx_tensor_is_read_when_a_trace_replays(device):
    """The tensor is read on the device: a captured fill follows its new contents."""
    cache, table, x = _fill_setup(device)
    idx = _ints([1], device)
    xin = _tile(x, device)
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    ttsim.experimental.paged_fill_cache(cache, xin, table, batch_idx_tensor=idx)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    ttsim.copy_host_to_device_tensor(ttsim.from_torch(torch.tensor([3], dtype=torch.int32), dtype=ttsim.int32), idx)
    ttsim.execute_trace(device, tid, cq_id=0, blocking=True)
    got = ttsim.to_torch(cache)
    assert got[6].any() and got[7].any()
    assert not got[2].any() and not got[3].any()
    ttsim.release_trace(device, tid)


def test_fill_cache_with_a_bad_batch_idx_is_refused_at_the_call(device):
    cache, table, x = _fill_setup(device)
    with pytest.raises(ttsim.TTFatal, match=r"batch_idx=4 is outside the page table's 4 rows"):
        ttsim.experimental.paged_fill_cache(cache, _tile(x, device), table, batch_idx=4)
    with pytest.raises(ttsim.TTFatal, match=r"batch_idx_tensor must hold exactly one batch index"):
        ttsim.experimental.paged_fill_cache(cache, _tile(x, device), table, batch_idx_tensor=_ints([1, 2], device))


# -- output_tensor / optional_output_tensor ---------------------------------------------

def _rand(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("op", ["matmul", "linear"])
def test_matmul_and_linear_write_optional_output_tensor(device, op):
    a, b = _rand(64, 32, seed=1), _rand(32, 64, seed=2)
    out = _tile(torch.full((64, 64), 7.0), device)
    ret = getattr(ttsim, op)(_tile(a, device), _tile(b, device), optional_output_tensor=out)
    assert ret is out
    want = a.bfloat16().float() @ b.bfloat16().float()
    assert torch.allclose(ttsim.to_torch(out).float(), want, atol=0.1, rtol=0.02)


@pytest.mark.parametrize("name", ["add", "multiply", "subtract", "maximum", "divide"])
def test_binary_ops_write_output_tensor(device, name):
    a, b = _rand(32, 32, seed=3), _rand(32, 32, seed=4).abs() + 0.5
    out = _tile(torch.zeros(32, 32), device)
    ret = getattr(ttsim, name)(_tile(a, device), _tile(b, device), output_tensor=out)
    assert ret is out
    assert torch.equal(ttsim.to_torch(out), ttsim.to_torch(getattr(ttsim, name)(_tile(a, device), _tile(b, device))))
    assert ttsim.to_torch(out).abs().sum() > 0


@pytest.mark.parametrize("name", ["exp", "neg", "relu", "silu", "sigmoid", "tanh", "softplus"])
def test_unary_ops_write_output_tensor(device, name):
    a = _rand(32, 32, seed=5)
    out = _tile(torch.zeros(32, 32), device)
    ret = getattr(ttsim, name)(_tile(a, device), output_tensor=out)
    assert ret is out
    assert torch.equal(ttsim.to_torch(out), ttsim.to_torch(getattr(ttsim, name)(_tile(a, device))))


def test_in_place_add_through_output_tensor(device):
    a = _tile(torch.ones(32, 32), device)
    ttsim.add(a, 2.0, output_tensor=a)
    ttsim.add(a, a, output_tensor=a)
    assert torch.equal(ttsim.to_torch(a), torch.full((32, 32), 6.0, dtype=torch.bfloat16))


def test_typecast_writes_output_tensor(device):
    a = _rand(32, 32, seed=6) * 10
    out = _tile(torch.zeros(32, 32), device, ttsim.float32)
    ret = ttsim.typecast(_tile(a, device), ttsim.float32, output_tensor=out)
    assert ret is out
    assert torch.equal(ttsim.to_torch(out), a.bfloat16().float())


@pytest.mark.parametrize("call, message", [
    (lambda d, a, o: ttsim.add(a, a, output_tensor=o(64)), r"add: output_tensor has shape \[64, 64\], the result has \[32, 32\]"),
    (lambda d, a, o: ttsim.add(a, a, dtype=ttsim.float32, output_tensor=o(32)), r"dtype=.*FLOAT32.* and output_tensor dtype .*BFLOAT16.* disagree"),
    (lambda d, a, o: ttsim.matmul(a, a, optional_output_tensor=o(64)), r"optional_output_tensor has shape"),
    (lambda d, a, o: ttsim.typecast(a, ttsim.float32, output_tensor=o(32)), r"typecast: dtype=.* disagree"),
])
def test_output_tensor_mismatch_is_refused_at_the_call(device, call, message):
    a = _tile(torch.zeros(32, 32), device)
    with pytest.raises(ttsim.TTFatal, match=message):
        call(device, a, lambda n: _tile(torch.zeros(n, n), device))


# -- errors at the call; close releases the device --------------------------------------

@pytest.mark.parametrize("shape, dim", [((4, 0), -1), ((0, 32), 0), ((2, 0), None)])
def test_argmax_over_an_empty_dimension_is_refused_at_the_call(device, shape, dim):
    x = ttsim.from_torch(torch.zeros(shape), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"argmax: cannot reduce over an empty dimension"):
        ttsim.argmax(x, dim=dim)


def test_max_over_an_empty_dimension_is_refused_at_the_call(device):
    x = ttsim.from_torch(torch.zeros(4, 0), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"max: cannot reduce over an empty dimension"):
        ttsim.max(x, dim=1)


def _failing_command(dev):
    """A command that fails on the device: a fill through a page table naming a block the
    cache does not have (tt-metal cannot check device-side contents at the call either)."""
    cache = _tile(torch.zeros(2, 1, 32, 32), dev)
    table = _ints([[5]], dev)
    dev.lag = 1.0  # keep it queued
    ttsim.experimental.paged_fill_cache(cache, _tile(torch.ones(1, 1, 32, 32), dev), table)


def test_close_device_releases_the_chip_when_the_queue_fails():
    dev = ttsim.open_device(device_id=1)
    _failing_command(dev)
    with pytest.raises(ttsim.TTFatal, match=r"paged_fill_cache: .*block 5"):
        ttsim.close_device(dev)
    assert dev.closed
    again = ttsim.open_device(device_id=1)  # no "device 1 is already open"
    ttsim.close_device(again)


def test_close_mesh_device_releases_every_chip_when_the_queue_fails():
    mesh = ttsim.open_mesh_device(ttsim.MeshShape(1, 2))
    _failing_command(mesh)
    with pytest.raises(ttsim.TTFatal):
        ttsim.close_mesh_device(mesh)
    assert mesh.closed and not any(mesh._queues)
    for cid in (0, 1):
        ttsim.close_device(ttsim.open_device(device_id=cid))


# -- chunk_gated_delta_rule with grouped value heads -----------------------------------

def _gdn_inputs(seed, b=1, t=40, hk=2, hv=4, dk=32, dv=32):
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(b, t, hk, dk, generator=g), torch.randn(b, t, hk, dk, generator=g)
    v = torch.randn(b, t, hv, dv, generator=g)
    gate = -torch.rand(b, t, hv, generator=g) * 0.5
    beta = torch.rand(b, t, hv, generator=g)
    return q, k, v, gate, beta


def _recurrent_ref(q, k, v, g, beta):
    """float64 token-by-token delta rule; value head j reads key head j // (HV / H)."""
    q, k, v, g, beta = (x.double() for x in (q, k, v, g, beta))
    b, t, hk, dk = q.shape
    hv, dv = v.shape[2], v.shape[3]
    grp = hv // hk
    q = torch.nn.functional.normalize(q, dim=-1, eps=1e-6) * dk ** -0.5
    k = torch.nn.functional.normalize(k, dim=-1, eps=1e-6)
    s = torch.zeros(b, hv, dk, dv, dtype=torch.float64)
    out = torch.empty(b, t, hv, dv, dtype=torch.float64)
    for i in range(t):
        for j in range(hv):
            kk, qq = k[:, i, j // grp], q[:, i, j // grp]
            s[:, j] *= g[:, i, j].exp()[:, None, None]
            delta = (v[:, i, j] - torch.einsum("bkv,bk->bv", s[:, j], kk)) * beta[:, i, j][:, None]
            s[:, j] += kk[:, :, None] * delta[:, None, :]
            out[:, i, j] = torch.einsum("bkv,bk->bv", s[:, j], qq)
    return out, s


def _dev(x, device):
    return ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)


def test_chunk_gdn_accepts_grouped_value_heads(device):
    q, k, v, g, beta = _gdn_inputs(30)
    # q/k normalised before the op, as 0.81.1 asks (it refuses use_qk_l2norm)
    qn, kn = (torch.nn.functional.normalize(x, dim=-1, eps=1e-6) for x in (q, k))
    o, state = ttsim.transformer.chunk_gated_delta_rule(
        *(_dev(x, device) for x in (qn, kn, v, g, beta)), output_final_state=True, chunk_size=16)
    ro, rs = _recurrent_ref(q, k, v, g, beta)
    assert list(o.shape) == [1, 40, 4, 32] and list(state.shape) == [1, 4, 32, 32]
    assert torch.allclose(ttsim.to_torch(o).double(), ro, atol=1e-3)
    assert torch.allclose(ttsim.to_torch(state).double(), rs, atol=1e-3)


def test_grouped_value_heads_equal_explicitly_repeated_key_heads(device):
    """Independent check: HV = 2 x H equals the same op with q/k repeated per value head."""
    q, k, v, g, beta = _gdn_inputs(31, t=20)
    grouped = ttsim.transformer.fused_recurrent_gated_delta_rule(*(_dev(x, device) for x in (q, k, v, g, beta)))
    rep = [x.repeat_interleave(2, dim=2) for x in (q, k)]
    flat = ttsim.transformer.fused_recurrent_gated_delta_rule(*(_dev(x, device) for x in (*rep, v, g, beta)))
    assert torch.equal(ttsim.to_torch(grouped), ttsim.to_torch(flat))
    interleaved_wrong = [x.repeat(1, 1, 2, 1) for x in (q, k)]  # tiled, not interleaved: a different model
    other = ttsim.transformer.fused_recurrent_gated_delta_rule(
        *(_dev(x, device) for x in (*interleaved_wrong, v, g, beta)))
    assert not torch.allclose(ttsim.to_torch(grouped), ttsim.to_torch(other), atol=1e-2)


def test_value_heads_that_are_not_a_multiple_of_key_heads_are_refused(device):
    q, k, v, g, beta = _gdn_inputs(32, hk=2, hv=3)
    with pytest.raises(ttsim.TTFatal, match=r"HV \(3\) must be divisible by H \(2\)"):  # tt-metal's text
        ttsim.transformer.chunk_gated_delta_rule(*(_dev(x, device) for x in (q, k, v, g, beta)))


# -- tilize_with_val_padding's logical shape, rank-0 tensors through TILE --------

def _rm(x, device):
    return ttsim.from_torch(x, dtype=ttsim.bfloat16, device=device)


def test_tilize_with_val_padding_keeps_the_inputs_logical_shape(device):
    """tt-metal's op pads the storage to output_tensor_shape; the logical shape stays [300, 300]."""
    x = torch.arange(90000.0).reshape(300, 300).remainder(251)
    out = ttsim.tilize_with_val_padding(_rm(x, device), [512, 512], 7.0)
    assert list(out.shape) == [300, 300] and list(out.padded_shape) == [512, 512]
    assert out.layout == ttsim.TILE_LAYOUT and out.logical_volume() == 90000 and out.volume() == 512 * 512
    got = ttsim.to_torch(out)
    assert got.shape == (300, 300) and torch.equal(got.float(), x)


def test_tilize_with_val_padding_result_feeds_ops_at_its_logical_shape(device):
    x = torch.arange(6.0).reshape(1, 1, 2, 3)
    out = ttsim.tilize_with_val_padding(_rm(x, device), [1, 1, 32, 64], -1.0)
    summed = ttsim.sum(out, dim=-1)  # the padding (-1) must not join the logical values
    assert torch.equal(ttsim.to_torch(summed).float().reshape(-1), x.sum(-1).reshape(-1))
    assert list(ttsim.untilize(out).shape) == [1, 1, 2, 3]


@pytest.mark.parametrize("on_device", [False, True], ids=["host", "device"])
def test_rank_zero_through_tile_layout_and_back(device, on_device):
    src = torch.tensor(2.75)
    t = ttsim.from_torch(src, dtype=ttsim.bfloat16, device=device if on_device else None)
    tiled = ttsim.to_layout(t, ttsim.TILE_LAYOUT)
    assert list(tiled.shape) == [] and list(tiled.padded_shape) == [32, 32]
    got = ttsim.to_torch(tiled)
    assert got.shape == torch.Size([]) and got.item() == 2.75  # not the tile's 32 (or 1024) elements
    back = ttsim.to_torch(ttsim.to_layout(tiled, ttsim.ROW_MAJOR_LAYOUT))
    assert back.shape == torch.Size([]) and back.item() == 2.75


def test_rank_zero_tile_tensor_in_an_op(device):
    t = ttsim.from_torch(torch.tensor(-3.0), dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    got = ttsim.to_torch(ttsim.abs(t))
    assert got.shape == torch.Size([]) and got.item() == 3.0
    x = torch.arange(6.0).reshape(2, 3)
    tx = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    assert torch.equal(ttsim.to_torch(ttsim.multiply(tx, t)), x * -3.0)  # the scalar broadcasts, not its tile
