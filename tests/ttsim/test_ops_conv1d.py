"""ttnn.conv1d with prepare_conv_weights, as qwen36's gdn/tp.py runs its depthwise causal conv
(_conv1d_prefill) on a 1x2 mesh, against torch's conv1d; and the refusals where a card is silently
wrong (a weight prepared for another geometry) or rejects the call (host reads in a capture)."""

import pytest
import torch
import torch.nn.functional as F

import ttsim

MESH = pytest.mark.parametrize("mesh_device", [2], indirect=True)


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _bf(x):
    return x.to(torch.bfloat16)


def _prep(w1d, dev, clen, pad, c, k, conv_cfg):
    return ttsim.prepare_conv_weights(
        weight_tensor=w1d, input_memory_config=ttsim.DRAM_MEMORY_CONFIG, input_layout=ttsim.ROW_MAJOR_LAYOUT,
        weights_format="OIHW", in_channels=c, out_channels=c, batch_size=1, input_height=1, input_width=clen,
        kernel_size=(1, k), stride=(1, 1), padding=pad, dilation=(1, 1), has_bias=False, groups=c, device=dev,
        input_dtype=ttsim.bfloat16, conv_config=conv_cfg,
        compute_config=ttsim.init_device_compute_kernel_config(dev.arch(), math_fidelity=ttsim.MathFidelity.HiFi4,
                                                               fp32_dest_acc_en=True, packer_l1_acc=True))


def _conv(x, w, dev, clen, cpad, c, k, conv_cfg, **kw):
    return ttsim.conv1d(input_tensor=x, weight_tensor=w, device=dev, in_channels=c, out_channels=c, batch_size=1,
                        input_length=clen, kernel_size=k, stride=1, padding=cpad, dilation=1, groups=c,
                        dtype=ttsim.bfloat16, conv_config=conv_cfg, slice_config=ttsim.Conv2dL1FullSliceConfig,
                        return_output_dim=False, return_weights_and_bias=False, **kw)


def _causal_ref(x, w, k):
    """float64 depthwise causal conv: out[t, c] = sum_j x[t - (k-1) + j, c] w[c, j] (zero history)."""
    xd = F.pad(x.double().T[None], (k - 1, 0))
    return F.conv1d(xd, w.double()[:, None, :], groups=x.shape[1])[0].T


@MESH
@pytest.mark.parametrize("native_pad", [True, False])
def test_gdn_depthwise_conv1d_on_a_1x2_mesh(mesh_device, native_pad):
    """gdn/tp.py: W1d [C, 1, K] host-held, mesh-sharded on dim 0; either conv1d pads the K-1 causal rows
    itself (padding [K-1, 0] with a (0, 0, K-1, 0) prep pad) or the caller concatenates zeros."""
    t, c, k = 64, 128, 4
    x = _bf(torch.randn(t, c, generator=_g(1)))
    w = _bf(torch.randn(c, k, generator=_g(2)) * 0.5)
    w1d = ttsim.from_torch(w.reshape(c, 1, k), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT,
                           mesh_mapper=ttsim.ShardTensorToMesh(mesh_device, dim=0))
    cp = c // 2
    cfg = ttsim.Conv1dConfig(weights_dtype=ttsim.bfloat16, shard_layout=ttsim.TensorMemoryLayout.HEIGHT_SHARDED)
    mapper = ttsim.ShardTensorToMesh(mesh_device, dim=-1)
    if native_pad:
        xin = ttsim.from_torch(x.reshape(1, t, 1, c), dtype=ttsim.bfloat16, device=mesh_device, mesh_mapper=mapper)
        clen, cpad, ppad = t, [k - 1, 0], (0, 0, k - 1, 0)
    else:
        xin = ttsim.from_torch(torch.cat([torch.zeros(k - 1, c, dtype=torch.bfloat16), x]).reshape(1, t + k - 1, 1, c),
                               dtype=ttsim.bfloat16, device=mesh_device, mesh_mapper=mapper)
        clen, cpad, ppad = t + k - 1, 0, (0, 0)
    wprep = _prep(w1d, mesh_device, clen, ppad, cp, k, cfg)
    out = _conv(xin, wprep, mesh_device, clen, cpad, cp, k, cfg)
    assert list(out.shape) == [1, 1, t, cp] and out.is_sharded() and out.layout == ttsim.TILE_LAYOUT
    out = ttsim.reshape(ttsim.sharded_to_interleaved(out, ttsim.DRAM_MEMORY_CONFIG), (1, t, cp))
    got = ttsim.to_torch(out, mesh_composer=ttsim.ConcatMeshToTensor(mesh_device, dim=-1))[0]
    want = _causal_ref(x, w, k)
    assert torch.allclose(got.double(), want, atol=0.02, rtol=0.01)


def test_conv1d_general_stride_dilation_bias_and_return_forms(device):
    b, length, cin, cout, k = 2, 40, 32, 64, 3
    x = _bf(torch.randn(b, length, cin, generator=_g(3)))
    w = _bf(torch.randn(cout, cin, 1, k, generator=_g(4)) * 0.2)
    bias = _bf(torch.randn(cout, generator=_g(5)))
    tx = ttsim.from_torch(x.reshape(b, 1, length, cin), dtype=ttsim.bfloat16, device=device)
    tw = ttsim.from_torch(w, dtype=ttsim.float32)
    tb = ttsim.from_torch(bias.reshape(1, 1, 1, cout), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT, device=device)
    out, l_out, (wp, bp) = ttsim.conv1d(
        input_tensor=tx, weight_tensor=tw, device=device, in_channels=cin, out_channels=cout, batch_size=b,
        input_length=length, kernel_size=k, stride=2, padding=[1, 2], dilation=2, bias_tensor=tb,
        conv_config=ttsim.Conv1dConfig(output_layout=ttsim.ROW_MAJOR_LAYOUT), memory_config=ttsim.DRAM_MEMORY_CONFIG,
        return_output_dim=True, return_weights_and_bias=True)
    ref = F.conv1d(F.pad(x.double().transpose(1, 2), (1, 2)), w.double()[:, :, 0], bias.double(), stride=2,
                   dilation=2).transpose(1, 2)
    assert l_out == ref.shape[1] and out.layout == ttsim.ROW_MAJOR_LAYOUT and bp is tb
    assert ttsim.pearson_correlation_coefficient(ref.reshape(1, 1, -1, cout), ttsim.to_torch(out).double()) > 0.9999
    # the prepared weight is the bf16 weight (weights_dtype default), ready to reuse
    assert torch.equal(ttsim.to_torch(wp), w)
    again = ttsim.conv1d(input_tensor=tx, weight_tensor=wp, device=device, in_channels=cin, out_channels=cout,
                         batch_size=b, input_length=length, kernel_size=k, stride=2, padding=[1, 2], dilation=2,
                         bias_tensor=tb, conv_config=ttsim.Conv1dConfig(output_layout=ttsim.ROW_MAJOR_LAYOUT),
                         memory_config=ttsim.DRAM_MEMORY_CONFIG)
    assert torch.equal(ttsim.to_torch(again), ttsim.to_torch(out))


def test_weights_dtype_rounds_the_weights(device):
    x = _bf(torch.randn(1, 32, 32, generator=_g(6)))
    w = torch.randn(32, 1, 1, 4, generator=_g(7))
    tx = ttsim.from_torch(x.reshape(1, 1, 32, 32), dtype=ttsim.bfloat16, device=device)

    def run(wd):
        return ttsim.to_torch(ttsim.conv1d(
            input_tensor=tx, weight_tensor=ttsim.from_torch(w, dtype=ttsim.float32), device=device, in_channels=32,
            out_channels=32, batch_size=1, input_length=32, kernel_size=4, padding=[3, 0], groups=32,
            dtype=ttsim.float32, conv_config=ttsim.Conv1dConfig(weights_dtype=wd),
            memory_config=ttsim.L1_MEMORY_CONFIG))

    exact = _causal_ref(x[0], w[:, 0, 0], 4)
    f32, bf8 = run(ttsim.float32), run(ttsim.bfloat8_b)
    assert (f32[0, 0].double() - exact).abs().max() < 1e-5
    assert (bf8[0, 0].double() - exact).abs().max() > 1e-3  # bfloat8_b weights are rounded


def test_a_weight_prepared_for_another_geometry_is_refused(device):
    """gdn/tp.py measured it on a card: a symmetric prep pad with an asymmetric conv pad gives wrong values."""
    c, k, t = 32, 4, 32
    w1d = ttsim.from_torch(torch.randn(c, 1, k), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT)
    x = ttsim.from_torch(torch.randn(1, t, 1, c), dtype=ttsim.bfloat16, device=device)
    cfg = ttsim.Conv1dConfig(weights_dtype=ttsim.bfloat16)
    symmetric = _prep(w1d, device, t, (0, k - 1), c, k, cfg)
    with pytest.raises(ttsim.TTFatal, match=r"prepared for another geometry \{'padding': \(\(3, 3\), \(3, 0\)\)\}"):
        _conv(x, symmetric, device, t, [k - 1, 0], c, k, cfg)
    other_len = _prep(w1d, device, t + 3, (0, 0, k - 1, 0), c, k, cfg)
    with pytest.raises(ttsim.TTFatal, match="input_length"):
        _conv(x, other_len, device, t, [k - 1, 0], c, k, cfg)


def test_conv1d_refusals(device):
    c, k, t = 32, 4, 32
    x = ttsim.from_torch(torch.randn(1, t, 1, c), dtype=ttsim.bfloat16, device=device)
    w1d = ttsim.from_torch(torch.randn(c, 1, k), dtype=ttsim.bfloat16, layout=ttsim.ROW_MAJOR_LAYOUT)
    with pytest.raises(ttsim.TTFatal, match="activation=.* is not modelled"):
        ttsim.Conv1dConfig(activation=ttsim.UnaryWithParam(ttsim.UnaryOpType.SILU))
    with pytest.raises(ttsim.TTFatal, match="padding_mode=PaddingMode.Replicate"):
        ttsim.Conv1dConfig(padding_mode=ttsim.PaddingMode.Replicate)
    with pytest.raises(ttsim.TTFatal, match="only OIHW"):
        ttsim.prepare_conv_weights(**{**dict(
            weight_tensor=w1d, input_memory_config=ttsim.DRAM_MEMORY_CONFIG, input_layout=ttsim.ROW_MAJOR_LAYOUT,
            in_channels=c, out_channels=c, batch_size=1, input_height=1, input_width=t, kernel_size=(1, k),
            stride=(1, 1), padding=(0, 0), dilation=(1, 1), has_bias=False, groups=c, device=device,
            input_dtype=ttsim.bfloat16), "weights_format": "HWIO"})
    l1 = ttsim.to_memory_config(x, ttsim.L1_MEMORY_CONFIG)
    with pytest.raises(ttsim.TTFatal, match="deallocate_activation=True with an L1 input"):
        _conv(l1, w1d, device, t, [k - 1, 0], c, k, ttsim.Conv1dConfig(deallocate_activation=True))
    dram_ok = _conv(x, w1d, device, t, [k - 1, 0], c, k, ttsim.Conv1dConfig(deallocate_activation=True))
    assert list(dram_ok.shape) == [1, 1, t, c]  # documented a no-op for a DRAM input
    with pytest.raises(TypeError, match="keyword arguments only"):
        ttsim.prepare_conv_weights(w1d)
    with pytest.raises(ttsim.TTFatal, match="is not batch_size x input_length x in_channels"):
        _conv(x, w1d, device, t + 1, 0, c, k, None)


def test_dram_width_slicing_is_refused_inside_a_trace_capture(device):
    """gdn/tp.py pins the conv to L1 (Conv2dL1FullSliceConfig) because the DRAM-slice path reads on the
    host, which begin_trace_capture rejects; L1_FULL captures and replays."""
    c, k, t = 32, 4, 32
    x = ttsim.from_torch(torch.randn(1, t, 1, c), dtype=ttsim.bfloat16, device=device)
    w = _prep(ttsim.from_torch(torch.randn(c, 1, k), dtype=ttsim.bfloat16), device, t, (0, 0, k - 1, 0), c, k, None)
    assert repr(ttsim.Conv2dL1FullSliceConfig) == "Op2DSliceConfig(slice_type=SliceType::L1_FULL,num_slices=0)"
    eager = _conv(x, w, device, t, [k - 1, 0], c, k, None)
    tid = ttsim.begin_trace_capture(device, cq_id=0)
    traced = _conv(x, w, device, t, [k - 1, 0], c, k, None)
    with pytest.raises(ttsim.TTFatal, match="reads on the host, which a trace capture rejects"):
        ttsim.conv1d(input_tensor=x, weight_tensor=w, device=device, in_channels=c, out_channels=c, batch_size=1,
                     input_length=t, kernel_size=k, padding=[k - 1, 0], groups=c)
    ttsim.end_trace_capture(device, tid, cq_id=0)
    ttsim.execute_trace(device, tid, cq_id=0, blocking=True)
    assert torch.equal(ttsim.to_torch(traced), ttsim.to_torch(eager))
    ttsim.release_trace(device, tid)
