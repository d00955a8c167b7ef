"""embedding, reductions (argmax, sum, mean, max), plus_one and the shape ops vs torch."""

import pytest
import torch

import ttsim

BF16_TOL = dict(rtol=1.6e-2, atol=1.6e-2)
T = ttsim.TILE_LAYOUT


def bf(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.bfloat16).float()


def dev(x, device, layout=ttsim.TILE_LAYOUT, dtype=None):
    if dtype is None:
        dtype = ttsim.int32 if x.dtype == torch.int32 else ttsim.bfloat16
    return ttsim.from_torch(x, dtype=dtype, layout=layout, device=device)


def rm(x, device, dtype=None):
    return dev(x, device, layout=ttsim.ROW_MAJOR_LAYOUT, dtype=dtype)


def back(t) -> torch.Tensor:
    return ttsim.to_torch(t)


# -- embedding ---------------------------------------------------------------------------

@pytest.mark.parametrize("layout", [None, ttsim.TILE_LAYOUT])
def test_embedding_looks_up_rows_in_the_requested_layout(device, layout):
    g = torch.Generator().manual_seed(0)
    table = bf(torch.randn(100, 64, generator=g))
    ids = torch.tensor([[3, 99, 0, 3, 42]], dtype=torch.int32)
    out = ttsim.embedding(rm(ids, device, ttsim.uint32), rm(table, device), layout=layout)
    assert out.layout == (ttsim.ROW_MAJOR_LAYOUT if layout is None else layout)
    assert out.dtype == ttsim.bfloat16 and out.shape == ttsim.Shape([1, 5, 64])
    assert torch.equal(back(out).float(), torch.nn.functional.embedding(ids.long(), table))


def test_embedding_padding_idx_gives_zero_rows(device):
    table = bf(torch.randn(10, 32))
    ids = torch.tensor([[1, 2, 1]], dtype=torch.int32)
    out = back(ttsim.embedding(rm(ids, device, ttsim.uint32), rm(table, device), padding_idx=1)).float()
    assert torch.all(out[0, [0, 2]] == 0) and torch.equal(out[0, 1], table[2])


def test_embedding_bad_inputs_name_the_argument(device):
    table = rm(torch.randn(10, 32), device)
    with pytest.raises(ttsim.TTFatal, match=r"embedding: input_tensor must be UINT32"):
        ttsim.embedding(rm(torch.zeros(1, 4, dtype=torch.int32), device), table)
    with pytest.raises(ttsim.TTFatal, match=r"embedding: weight must be in Layout.ROW_MAJOR"):
        ttsim.embedding(rm(torch.zeros(1, 4, dtype=torch.int32), device, ttsim.uint32),
                        dev(torch.randn(10, 32), device))


# -- reductions --------------------------------------------------------------------------

def test_argmax_is_uint32_first_index_on_ties(device):
    x = torch.zeros(1, 1, 4, 40)
    x[0, 0, 0, [5, 9]] = 2.0  # tie: torch returns the first
    x[0, 0, 1, 39] = 1.0
    x[0, 0, 3, 0] = -1.0  # row 2 all zeros -> index 0; row 3 max 0 first at index 1
    for layout in (ttsim.ROW_MAJOR_LAYOUT, ttsim.TILE_LAYOUT):
        out = ttsim.argmax(dev(x, device, layout=layout), dim=-1)
        assert out.dtype == ttsim.uint32 and out.layout == ttsim.ROW_MAJOR_LAYOUT
        got = back(out)
        assert got.dtype == torch.int32 and got.shape == (1, 1, 4)
        assert got.tolist() == torch.argmax(x, dim=-1).tolist() == [[[5, 39, 0, 1]]]
    kept = back(ttsim.argmax(rm(x, device), dim=3, keepdim=True))
    assert kept.shape == (1, 1, 4, 1)
    flat = back(ttsim.argmax(rm(x, device)))
    assert flat.reshape(-1).tolist() == [5]


def test_argmax_writes_a_preallocated_output_tensor(device):
    x = torch.zeros(1, 1, 2, 64)
    x[0, 0, 0, 7], x[0, 0, 1, 63] = 1.0, 1.0
    tokens = rm(torch.zeros(1, 1, 2, dtype=torch.int32), device, ttsim.uint32)
    addr = tokens.buffer_address()
    out = ttsim.argmax(dev(x, device), dim=-1, output_tensor=tokens)
    assert out is tokens and tokens.buffer_address() == addr
    assert back(tokens).tolist() == [[[7, 63]]]


@pytest.mark.parametrize("name", ["sum", "mean", "max"])
@pytest.mark.parametrize("dim, keepdim", [(-1, False), (-2, True), ([1, 3], False), (None, False)])
def test_sum_mean_max_match_torch(device, name, dim, keepdim):
    g = torch.Generator().manual_seed(1)
    x = bf(torch.randn(2, 3, 33, 40, generator=g))  # padded tiles must not leak into the result
    out = back(getattr(ttsim, name)(dev(x, device), dim, keepdim)).float()
    dims = list(range(4)) if dim is None else dim
    fn = {"sum": torch.sum, "mean": torch.mean, "max": torch.amax}[name]
    want = bf(fn(x, dim=dims, keepdim=keepdim))
    assert out.shape == want.shape
    torch.testing.assert_close(out, want, rtol=1.6e-2, atol=0.05)


def test_sum_scalar_multiplies(device):
    x = torch.ones(1, 1, 32, 32)
    assert back(ttsim.sum(dev(x, device), -1, scalar=0.5)).float().unique().tolist() == [16.0]


def test_plus_one_in_place_skips_negative_entries(device):
    pos = torch.tensor([29, -1, -1, 0, 2**31 - 1, 28, -5, 7], dtype=torch.int32)
    t = rm(pos, device)
    addr = t.buffer_address()
    assert ttsim.plus_one(t, skip_negative_entries=True) is t
    assert t.buffer_address() == addr
    assert back(t).tolist() == [30, -1, -1, 1, 2**31 - 1, 29, -5, 8]
    ttsim.plus_one(t)  # default: every entry, INT32_MAX wraps
    assert back(t).tolist() == [31, 0, 0, 2, -(2**31), 30, -4, 9]


def test_plus_one_on_uint32(device):
    t = rm(torch.tensor([[0, 5]], dtype=torch.int32), device, ttsim.uint32)
    ttsim.plus_one(t, skip_negative_entries=True)
    assert back(t).tolist() == [[1, 6]]


def test_reduction_bad_inputs_name_the_argument(device):
    with pytest.raises(ttsim.TTFatal, match=r"plus_one: input_tensor must be INT32 or UINT32"):
        ttsim.plus_one(rm(torch.zeros(4), device))
    with pytest.raises(ttsim.TTFatal, match=r"plus_one: input_tensor must be in Layout.ROW_MAJOR"):
        ttsim.plus_one(dev(torch.zeros(4, dtype=torch.int32), device))
    with pytest.raises(ttsim.TTFatal, match=r"argmax: dim=None \(reduce all\) needs a ROW_MAJOR input_tensor"):
        ttsim.argmax(dev(torch.zeros(1, 32), device))
    with pytest.raises(ttsim.TTFatal, match=r"argmax: output_tensor must be UINT32 ROW_MAJOR of shape \[1\]"):
        ttsim.argmax(rm(torch.zeros(1, 32), device), dim=-1, output_tensor=rm(torch.zeros(1), device))
    with pytest.raises(ttsim.TTFatal, match=r"sum: dim=5 is out of range"):
        ttsim.sum(dev(torch.zeros(1, 32), device), 5)


# -- shape ops ---------------------------------------------------------------------------

def test_reshape_keeps_values_and_re_pads(device):
    x = bf(torch.randn(1, 2, 32, 48))
    out = ttsim.reshape(dev(x, device), (1, 1, -1, 96))
    assert out.shape == ttsim.Shape([1, 1, 32, 96]) and out.padded_shape == ttsim.Shape([1, 1, 32, 96])
    assert torch.equal(back(out).float(), x.reshape(1, 1, 32, 96))
    odd = ttsim.reshape(dev(x, device), [3, 1024])
    assert odd.padded_shape == ttsim.Shape([32, 1024])
    assert torch.equal(back(odd).float(), x.reshape(3, 1024))
    assert back(ttsim.unsqueeze(dev(x, device), 0)).shape == (1, 1, 2, 32, 48)
    assert back(ttsim.squeeze(dev(x, device), 0)).shape == (2, 32, 48)
    assert back(ttsim.squeeze(dev(x, device))).shape == (2, 32, 48)


def test_permute_transpose_slice_concat_pad_repeat(device):
    g = torch.Generator().manual_seed(2)
    x = bf(torch.randn(1, 3, 40, 64, generator=g))
    t = dev(x, device)
    assert torch.equal(back(ttsim.permute(t, (0, 2, 1, 3))).float(), x.permute(0, 2, 1, 3))
    assert torch.equal(back(ttsim.transpose(t, -2, -1)).float(), x.transpose(-2, -1))
    s = ttsim.slice(t, [0, 1, 5, 0], [1, 3, 37, 64], [1, 1, 2, 2])
    assert torch.equal(back(s).float(), x[:, 1:3, 5:37:2, ::2])
    c = ttsim.concat([t, ttsim.slice(t, [0, 0, 0, 0], [1, 3, 40, 32])], dim=3)
    assert torch.equal(back(c).float(), torch.cat([x, x[..., :32]], dim=3))
    p = ttsim.pad(rm(x, device), [(0, 0), (0, 0), (1, 2), (0, 0)], 7.0)
    assert torch.equal(back(p).float(), torch.nn.functional.pad(x, (0, 0, 1, 2), value=7.0))
    r = ttsim.repeat(t, (2, 1, 1, 1))
    assert torch.equal(back(r).float(), x.repeat(2, 1, 1, 1))


def test_clone_and_copy(device):
    x = bf(torch.randn(1, 1, 32, 32))
    t = dev(x, device)
    c = ttsim.clone(t, dtype=ttsim.float32)
    assert c.dtype == ttsim.float32 and c.buffer_address() != t.buffer_address()
    assert torch.equal(back(c), x)
    dst = dev(torch.zeros(1, 1, 32, 32), device)
    addr = dst.buffer_address()
    assert ttsim.copy(t, dst) is dst and dst.buffer_address() == addr
    assert torch.equal(back(dst).float(), x)


def test_shape_bad_inputs_name_the_argument(device):
    t = dev(torch.zeros(1, 2, 32, 64), device)
    with pytest.raises(ttsim.TTFatal, match=r"reshape: shape \[3, 5\] has volume 15"):
        ttsim.reshape(t, [3, 5])
    with pytest.raises(ttsim.TTFatal, match=r"permute: dims \[0, 1, 1, 3\] is not a permutation"):
        ttsim.permute(t, [0, 1, 1, 3])
    with pytest.raises(ttsim.TTFatal, match=r"slice: slice_end has 3 entries"):
        ttsim.slice(t, [0, 0, 0, 0], [1, 2, 32])
    with pytest.raises(ttsim.TTFatal, match=r"concat: tensors\[1\] \[1, 2, 32, 64\] differs"):
        ttsim.concat([dev(torch.zeros(1, 1, 32, 32), device), t], dim=1)
    with pytest.raises(ttsim.TTFatal, match=r"copy: input_a .* and input_b .* must share shape"):
        ttsim.copy(t, dev(torch.zeros(1, 1, 32, 64), device))


# -- reshape(..., padded_shape), slice(starts=...) ---------------------------------------------

def test_reshape_with_its_natural_padded_shape(device):
    x = torch.arange(64.0).reshape(1, 1, 2, 32)
    t = ttsim.from_torch(x, dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device)
    r = ttsim.reshape(t, [1, 2, 1, 32], [1, 2, 32, 32])
    assert list(r.shape) == [1, 2, 1, 32] and torch.equal(ttsim.to_torch(r), x.reshape(1, 2, 1, 32))
    with pytest.raises(ttsim.TTFatal, match=r"padded_shape \[1, 2, 64, 32\] other than \[1, 2, 32, 32\]"):
        ttsim.reshape(t, [1, 2, 1, 32], [1, 2, 64, 32])
    rm = ttsim.from_torch(x, dtype=ttsim.float32, device=device)
    assert list(ttsim.reshape(rm, [2, 32], padded_shape=[2, 32]).shape) == [2, 32]
    with pytest.raises(ttsim.TTFatal, match=r"other than \[2, 32\]"):
        ttsim.reshape(rm, [2, 32], [2, 64])


def test_slice_with_starts_ends_steps_keywords(device):
    x = torch.arange(120.0).reshape(2, 3, 20)
    t = ttsim.from_torch(x, dtype=ttsim.float32, device=device)
    got = ttsim.to_torch(ttsim.slice(t, starts=[0, 1, 2], ends=[2, 3, 18], steps=[1, 1, 4]))
    assert torch.equal(got, x[0:2, 1:3, 2:18:4])
    assert torch.equal(ttsim.to_torch(ttsim.slice(t, starts=[1, 0, 0], ends=[2, 3, 5])), x[1:2, :, :5])
    with pytest.raises(ttsim.TTFatal, match=r"not both"):
        ttsim.slice(t, [0, 0, 0], [1, 1, 1], starts=[0, 0, 0], ends=[1, 1, 1])


def test_slice_with_device_tensor_bounds_is_refused_by_name(device):
    x = ttsim.from_torch(torch.zeros(2, 64), dtype=ttsim.bfloat16, device=device)
    idx = ttsim.from_torch(torch.tensor([0, 0], dtype=torch.int32), dtype=ttsim.uint32, device=device)
    with pytest.raises(ttsim.TTFatal, match=r"starts/ends as device tensors .* not modelled by ttsim"):
        ttsim.slice(x, idx, idx)
    with pytest.raises(ttsim.TTFatal, match=r"slice_dim=1, num_devices=2"):
        ttsim.slice(x, [0, 0], [2, 32], slice_dim=1, num_devices=2)
    for kw in ({"slice_dim": 0}, {"num_devices": 2}):  # either alone is the tensor overload's too
        with pytest.raises(ttsim.TTFatal, match=r"not modelled by ttsim; pass lists"):
            ttsim.slice(x, [0, 0], [2, 32], **kw)


# -- unsqueeze_to_4D ---------------------------------------------------------------------------

def dev_tensor(x, device, dtype=ttsim.bfloat16, layout=T):
    return ttsim.from_torch(x, dtype=dtype, layout=layout, device=device)


@pytest.mark.parametrize("shape", [[6], [2, 3], [1, 2, 3]])
def test_unsqueeze_to_4d_left_pads_with_ones_on_device(device, shape):
    x = torch.arange(6.0).reshape(shape)
    out = ttsim.unsqueeze_to_4D(dev_tensor(x, device))
    want = [1] * (4 - len(shape)) + shape
    assert list(out.shape) == want and list(out.padded_shape) == want[:2] + [32, 32]  # measured
    assert out.layout == T and torch.equal(ttsim.to_torch(out), x.reshape(want))


def test_unsqueeze_to_4d_runs_on_a_host_tensor_too():
    x = torch.arange(6.0).reshape(2, 3)
    out = ttsim.unsqueeze_to_4D(ttsim.from_torch(x, dtype=ttsim.bfloat16))
    assert out.storage_type() == ttsim.from_torch(x).storage_type()  # still on host
    assert list(out.shape) == [1, 1, 2, 3] and out.layout == ttsim.ROW_MAJOR_LAYOUT  # measured
    assert torch.equal(ttsim.to_torch(out), x.reshape(1, 1, 2, 3))


def test_unsqueeze_to_4d_keeps_rank_4_and_refuses_rank_5(device):
    t = dev_tensor(torch.ones(1, 1, 2, 3), device)
    assert ttsim.unsqueeze_to_4D(t) is t
    for shape in ([1, 1, 1, 2, 3], [2, 1, 1, 1, 3]):  # measured: even all-ones leading dims throw
        with pytest.raises(ttsim.TTFatal, match=r"Tensor rank is greater than 4"):
            ttsim.unsqueeze_to_4D(dev_tensor(torch.ones(shape), device))


def test_unsqueeze_to_4d_golden():
    g = ttsim.get_golden_function(ttsim.unsqueeze_to_4D)
    assert g(torch.ones(5)).shape == (1, 1, 1, 5) and g(torch.ones(2, 3, 4)).shape == (1, 2, 3, 4)
