"""mac, addcmul, zeros, chunk, repeat_interleave, experimental.slice_write and the
three-argument UnaryWithParam (SOFTPLUS with beta, threshold) against torch references,
with tt-metal's unit tests' idioms and ttnn 0.81.1's goldens (read from the real package):
mac and addcmul are ONE fused fp32 pass rounded once to the output dtype."""

import pytest
import torch
import torch.nn.functional as F

import ttsim

U = ttsim.UnaryOpType


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _dev(x, device, dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, **kw):
    return ttsim.from_torch(x, dtype=dtype, layout=layout, device=device, **kw)


def _bf(x):
    return x.to(torch.bfloat16)


# -- mac / addcmul: one rounding ----------------------------------------------------------

def test_mac_rounds_once_to_bf16(device):
    a, b, c = (_bf(torch.randn(2, 32, 64, generator=_g(i))) for i in range(3))
    out = ttsim.to_torch(ttsim.mac(_dev(a, device), _dev(b, device), _dev(c, device)))
    fused = (a.double() * b.double() + c.double()).float().to(torch.bfloat16)  # one rounding
    assert out.dtype == torch.bfloat16 and torch.equal(out, fused)
    twice = (a * b + c)  # bf16 product rounded, then the sum rounded: differs somewhere
    assert not torch.equal(out, twice)


def test_mac_broadcasts_and_takes_scalars_as_its_other_overloads(device):
    """gdn/tp.py's Blackhole FIR: mac(state [1,B,C], tap [1,1,C], acc [1,B,C])."""
    st, acc = (_bf(torch.randn(1, 8, 96, generator=_g(i))) for i in (4, 5))
    tap = _bf(torch.randn(1, 1, 96, generator=_g(6)))
    got = ttsim.to_torch(ttsim.mac(_dev(st, device), _dev(tap, device), _dev(acc, device)))
    assert torch.equal(got, (st.double() * tap.double() + acc.double()).float().to(torch.bfloat16))
    x = _dev(st, device)
    assert torch.equal(ttsim.to_torch(ttsim.mac(x, 2.0, _dev(acc, device))),
                       (st.double() * 2 + acc.double()).float().to(torch.bfloat16))
    assert torch.equal(ttsim.to_torch(ttsim.mac(x, 0.5, 3.0)), (st.double() * 0.5 + 3).float().to(torch.bfloat16))


def test_mac_matches_the_real_packages_golden(device):
    a, b, c = (torch.randn(32, 32, generator=_g(i)) for i in (7, 8, 9))
    golden = ttsim.get_golden_function(ttsim.mac)
    got = ttsim.to_torch(ttsim.mac(_dev(a, device, ttsim.float32), _dev(b, device, ttsim.float32),
                                   _dev(c, device, ttsim.float32)))
    assert torch.allclose(got, golden(a, b, c), rtol=0, atol=1e-6)


def test_addcmul_is_torch_addcmul_rounded_once(device):
    a, b, c = (_bf(torch.randn(1, 1, 32, 128, generator=_g(i))) for i in (10, 11, 12))
    got = ttsim.to_torch(ttsim.addcmul(_dev(a, device), _dev(b, device), _dev(c, device), value=0.75))
    want = torch.addcmul(a.double(), b.double(), c.double(), value=0.75).float().to(torch.bfloat16)
    assert torch.equal(got, want)
    golden = ttsim.get_golden_function(ttsim.addcmul)
    assert torch.allclose(got.float(), golden(a.float(), b.float(), c.float(), value=0.75), rtol=1e-2, atol=2e-2)


def test_addcmul_value_defaults_to_one_and_output_tensor_is_written(device):
    a, b, c = (_bf(torch.randn(32, 64, generator=_g(i))) for i in (13, 14, 15))
    out = _dev(torch.zeros(32, 64), device)
    ret = ttsim.addcmul(_dev(a, device), _dev(b, device), _dev(c, device), output_tensor=out)
    assert ret is out
    assert torch.equal(ttsim.to_torch(out), (a.double() + b.double() * c.double()).float().to(torch.bfloat16))
    acc = _dev(torch.zeros(32, 64), device)
    ttsim.mac(_dev(a, device), _dev(b, device), _dev(c, device), output_tensor=acc)
    assert torch.equal(ttsim.to_torch(acc), (a.double() * b.double() + c.double()).float().to(torch.bfloat16))


def test_ternary_refusals(device):
    x = _dev(torch.ones(32, 32), device)
    with pytest.raises(ttsim.TTFatal, match="do not broadcast"):
        ttsim.mac(x, _dev(torch.ones(32, 64), device), x)
    with pytest.raises(ttsim.TTFatal, match="value must be a number"):
        ttsim.addcmul(x, x, x, value="2")
    with pytest.raises(ttsim.TTFatal, match="input_c must be a ttnn.Tensor"):
        ttsim.addcmul(x, x, 1.0)


# -- zeros -----------------------------------------------------------------------------------

def test_zeros_defaults_as_the_real_host_path():
    """Measured on 0.81.1's host path: BFLOAT16, ROW_MAJOR; a block float is TILE."""
    z = ttsim.zeros([2, 3])
    assert (z.dtype, z.layout, list(z.shape)) == (ttsim.bfloat16, ttsim.ROW_MAJOR_LAYOUT, [2, 3])
    assert ttsim.zeros([1, 32, 32], dtype=ttsim.bfloat8_b).layout == ttsim.TILE_LAYOUT
    t = ttsim.zeros(ttsim.Shape([1, 5, 7]), dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT)
    assert list(t.padded_shape) == [1, 32, 32] and torch.equal(ttsim.to_torch(t), torch.zeros(1, 5, 7))


def test_zeros_on_device_is_a_device_fill_that_a_trace_replays(device):
    """gdn/tp.py allocates its state with ttnn.zeros(..., device=mesh): a device program (0.81.1's
    FullDeviceOperation), so a trace may capture it."""
    z = ttsim.zeros([1, 4, 64], dtype=ttsim.float32, layout=ttsim.TILE_LAYOUT, device=device,
                    memory_config=ttsim.L1_MEMORY_CONFIG)
    assert z.memory_config().buffer_type == ttsim.BufferType.L1
    assert torch.equal(ttsim.to_torch(z), torch.zeros(1, 4, 64))
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    traced = ttsim.zeros([1, 32, 32], layout=ttsim.TILE_LAYOUT, device=device)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    ttsim.execute_trace(device, tid, cq_id=0, blocking=True)
    assert torch.equal(ttsim.to_torch(traced), torch.zeros(1, 32, 32, dtype=torch.bfloat16))
    ttsim.release_trace(device, tid)


def test_zeros_golden_and_refusal():
    assert torch.equal(ttsim.get_golden_function(ttsim.zeros)([2, 2]), torch.zeros(2, 2, dtype=torch.bfloat16))
    with pytest.raises(ttsim.TTFatal, match="requires TILE_LAYOUT"):
        ttsim.zeros([32, 32], dtype=ttsim.bfloat4_b, layout=ttsim.ROW_MAJOR_LAYOUT)


# -- chunk / repeat_interleave ---------------------------------------------------------------

@pytest.mark.parametrize("n, chunks, dim", [(64, 2, -1), (7, 3, 1), (5, 5, 1), (3, 5, 1)])
def test_chunk_is_torch_chunk(device, n, chunks, dim):
    x = torch.randn(1, n, 64, generator=_g(n)) if dim == 1 else torch.randn(1, 8, 2, n, generator=_g(n))
    got = ttsim.chunk(_dev(x, device, ttsim.float32), chunks, dim)
    want = torch.chunk(x, chunks, dim)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert list(g.shape) == list(w.shape) and torch.equal(ttsim.to_torch(g), w)
    assert [list(t.shape) for t in ttsim.get_golden_function(ttsim.chunk)(x, chunks, dim)] == \
        [list(w.shape) for w in want]


def test_chunk_refuses_a_non_positive_count(device):
    with pytest.raises(ttsim.TTFatal, match="Number of chunks must be greater than zero"):
        ttsim.chunk(_dev(torch.ones(32, 32), device), 0, 0)


@pytest.mark.parametrize("shape, repeats, dim", [((2, 1, 4, 64), 3, 1), ((1, 2, 8, 32), 2, 2), ((4, 3, 32), 2, -1)])
def test_repeat_interleave_is_torchs(device, shape, repeats, dim):
    """gdn/tp.py expands the key heads to the value heads with it (dim 1)."""
    x = _bf(torch.randn(*shape, generator=_g(sum(shape))))
    got = ttsim.repeat_interleave(_dev(x, device), repeats, dim, memory_config=ttsim.L1_MEMORY_CONFIG)
    want = torch.repeat_interleave(x, repeats, dim=dim)
    assert torch.equal(ttsim.to_torch(got), want)
    assert torch.equal(ttsim.get_golden_function(ttsim.repeat_interleave)(x, repeats, dim), want)
    with pytest.raises(ttsim.TTFatal, match="repeats must be a positive int"):
        ttsim.repeat_interleave(_dev(x, device), 0, dim)


# -- slice_write --------------------------------------------------------------------------------

def test_slice_write_writes_in_place_as_the_golden(device):
    """gdn/tp.py's carry splice: slice_write(fix [1,1,32,C], out [1,1,T,C], [0,0,0,0], [1,1,32,C], [1,1,1,1])."""
    out_t = _bf(torch.randn(1, 1, 96, 64, generator=_g(20)))
    fix = _bf(torch.randn(1, 1, 32, 64, generator=_g(21)))
    out = _dev(out_t, device, layout=ttsim.ROW_MAJOR_LAYOUT)
    ret = ttsim.experimental.slice_write(_dev(fix, device), out, [0, 0, 32, 0], [1, 1, 64, 64], [1, 1, 1, 1])
    assert ret is out
    want = out_t.clone()
    want[:, :, 32:64] = fix
    assert torch.equal(ttsim.to_torch(out), want)
    golden = ttsim.get_golden_function(ttsim.experimental.slice_write)
    assert torch.equal(golden(fix, out_t.clone(), [0, 0, 32, 0], [1, 1, 64, 64], [1, 1, 1, 1]), want)


def test_slice_write_with_a_step(device):
    dst = torch.zeros(1, 4, 8, 32, dtype=torch.bfloat16)
    src = _bf(torch.randn(1, 2, 4, 32, generator=_g(22)))
    out = _dev(dst, device, layout=ttsim.ROW_MAJOR_LAYOUT)
    ttsim.experimental.slice_write(_dev(src, device, layout=ttsim.ROW_MAJOR_LAYOUT), out, [0, 1, 0, 0],
                                   [1, 4, 8, 32], [1, 2, 2, 1])
    want = dst.clone()
    want[:, 1:4:2, 0:8:2] = src
    assert torch.equal(ttsim.to_torch(out), want)


def test_slice_write_refuses_in_tt_metals_words(device):
    out = _dev(torch.zeros(1, 1, 64, 64), device, layout=ttsim.ROW_MAJOR_LAYOUT)
    src = _dev(torch.ones(1, 1, 32, 64), device)
    sw = ttsim.experimental.slice_write
    with pytest.raises(ttsim.TTFatal, match=r"Ranks of input tensor, output_tensor, slice start and slice end"):
        sw(src, out, [0, 0, 0], [1, 1, 32], [1, 1, 1])
    with pytest.raises(ttsim.TTFatal, match=r"Start is outside the bounds of the output tensor for index 2. Got 64"):
        sw(src, out, [0, 0, 64, 0], [1, 1, 64, 64], [1, 1, 1, 1])
    with pytest.raises(ttsim.TTFatal, match=r"Ends 96 must be less than or equal to the shape of the tensor 64"):
        sw(src, out, [0, 0, 32, 0], [1, 1, 96, 64], [1, 1, 1, 1])
    with pytest.raises(ttsim.TTFatal, match=r"output start for the last dimension to be 0. Got 32"):
        sw(_dev(torch.ones(1, 1, 32, 32), device), out, [0, 0, 0, 32], [1, 1, 32, 64], [1, 1, 1, 1])
    with pytest.raises(ttsim.TTFatal, match=r"slice_write input & output must have the same dtype"):
        sw(_dev(torch.ones(1, 1, 32, 64), device, ttsim.float32), out, [0, 0, 0, 0], [1, 1, 32, 64], [1, 1, 1, 1])
    with pytest.raises(ttsim.TTFatal, match=r"covers \[1, 1, 16, 64\]"):
        sw(src, out, [0, 0, 0, 0], [1, 1, 16, 64], [1, 1, 1, 1])
    sharded = ttsim.to_memory_config(src, ttsim.L1_HEIGHT_SHARDED_MEMORY_CONFIG)
    with pytest.raises(ttsim.TTFatal, match="Step is not supported for sharded slice_write"):
        sw(sharded, out, [0, 0, 0, 0], [1, 1, 64, 64], [1, 1, 2, 1])


# -- UnaryWithParam(SOFTPLUS, beta, threshold) ----------------------------------------------------

def test_three_argument_unary_with_param_fuses_softplus_with_beta_and_threshold(device):
    """gdn/tp.py's g-gate: add(a, dt_bias, activations=[UnaryWithParam(SOFTPLUS, 1.0, 20.0)])."""
    a = _bf(torch.randn(1, 8, 16, generator=_g(30)) * 12)
    bias = _bf(torch.randn(1, 1, 16, generator=_g(31)) * 12)
    act = ttsim.UnaryWithParam(U.SOFTPLUS, 1.0, 20.0)
    assert act.params == [1.0, 20.0] and repr(act) == "UnaryWithParam(op_type=UnaryOpType::SOFTPLUS, params=[1, 20])"
    got = ttsim.to_torch(ttsim.add(_dev(a, device), _dev(bias, device), activations=[act]))
    want = F.softplus(a.float() + bias.float(), beta=1.0, threshold=20.0).to(torch.bfloat16)
    assert torch.equal(got, want)
    sharp = ttsim.to_torch(ttsim.add(_dev(a, device), _dev(bias, device),
                                     activations=[ttsim.UnaryWithParam(U.SOFTPLUS, 2.0, 5.0)]))
    assert torch.equal(sharp, F.softplus(a.float() + bias.float(), beta=2.0, threshold=5.0).to(torch.bfloat16))
    assert not torch.equal(sharp, got)


def test_unary_with_param_arity_is_0_81_1s():
    with pytest.raises(ttsim.TTFatal, match="at most two params"):
        ttsim.UnaryWithParam(U.SOFTPLUS, 1.0, 2.0, 3.0)
    with pytest.raises(ttsim.TTFatal, match="a tuple argument is"):
        ttsim.UnaryWithParam((U.ELU, 1.0), 2.0)
    assert ttsim.UnaryWithParam((U.ELU, 0.5)).params == [0.5]


def test_pad_to_an_output_shape_at_a_start_offset(device):
    """0.81.1's second pad overload, attention/tp.py's ttnn.pad(k, [1, B, 32, HD], [0, 0, 0, 0], 0.0)."""
    x = _bf(torch.randn(1, 2, 3, 64, generator=_g(50)))
    got = ttsim.pad(_dev(x, device), [1, 2, 32, 64], [0, 0, 0, 0], 0.0, memory_config=ttsim.L1_MEMORY_CONFIG)
    assert list(got.shape) == [1, 2, 32, 64]
    assert torch.equal(ttsim.to_torch(got), F.pad(x, (0, 0, 0, 29)))
    shifted = ttsim.to_torch(ttsim.pad(_dev(x, device), [1, 2, 8, 64], [0, 0, 2, 0], -1.0))
    assert torch.equal(shifted, F.pad(x, (0, 0, 2, 3), value=-1.0))
    with pytest.raises(ttsim.TTFatal, match="one entry per dim"):
        ttsim.pad(_dev(x, device), [2, 32, 64], [0, 0, 0], 0.0)
