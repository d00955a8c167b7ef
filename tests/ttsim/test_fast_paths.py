"""ttsim's cheaper paths change no byte and no timing a program can see:

- a one-queue device draws its lag doubles in blocks (MeshDevice._lag_draw): the same doubles in
  the same order as one draw per command, so the same commands have run when the host looks;
- to_torch copies a blocking read once: what it returns is memory nobody else holds, padded or
  not, one chip or composed from a mesh."""

import pytest
import torch

import ttsim
from ttsim import device as ttsim_device
from ttsim.seed import stream

RM = ttsim.ROW_MAJOR_LAYOUT


def _open(num_command_queues=1, shape=(1, 1)):
    return ttsim.open_mesh_device(ttsim.MeshShape(*shape), num_command_queues=num_command_queues)


def test_block_draws_are_the_per_command_draws_in_order():
    dev = _open()
    try:
        assert dev._draw_block == ttsim_device.LAG_DRAW_BLOCK > 1
        chip_ids = dev.get_device_ids()
        reference = stream("mesh", *chip_ids, "queue", seed=dev.seed)
        n = 3 * ttsim_device.LAG_DRAW_BLOCK + 7  # across block boundaries
        assert [dev._lag_draw() for _ in range(n)] == [reference.random() for _ in range(n)]
    finally:
        ttsim.close_mesh_device(dev)


def _run_program(dev) -> tuple:
    """Writes, ops and non-blocking reads, noting after each enqueue whether the device had caught up."""
    seen = []
    t = ttsim.from_torch(torch.arange(8, dtype=torch.int32).reshape(1, 8), dtype=ttsim.int32, layout=RM, device=dev)
    host = ttsim.from_torch(torch.zeros(1, 8, dtype=torch.int32), dtype=ttsim.int32, layout=RM)
    for i in range(300):
        ttsim.plus_one(t)
        seen.append(len(dev._queues[0]))
        ttsim.copy_device_to_host_tensor(t, host, blocking=False)
        seen.append(host._pending is None)
    ttsim.synchronize_device(dev)
    return tuple(seen), ttsim.to_torch(t).tolist(), dict(dev.stats), ttsim_device.digest_state([dev])


def test_a_device_drawing_one_double_per_command_runs_the_same_commands_as_block_draws(monkeypatch):
    block = _open()
    try:
        got_block = _run_program(block)
    finally:
        ttsim.close_mesh_device(block)
    monkeypatch.setattr(ttsim_device, "LAG_DRAW_BLOCK", 0)  # draw per command, as before
    single = _open()
    try:
        assert single._draw_block == 0
        got_single = _run_program(single)
    finally:
        ttsim.close_mesh_device(single)
    assert got_block == got_single
    assert 0 < sum(got_block[0][1::2]) < 300  # the lag really left some reads pending


def test_two_queues_keep_one_draw_per_command():
    """With two queues the same stream also draws the interleaving: blocks would reorder it."""
    dev = _open(num_command_queues=2)
    try:
        assert dev._draw_block == 0
    finally:
        ttsim.close_mesh_device(dev)


@pytest.mark.parametrize("layout", [RM, ttsim.TILE_LAYOUT])
def test_a_read_back_is_independent_of_the_buffer_it_came_from(device, layout):
    """One copy, and it is the caller's: a later in-place write on the device does not show in
    it, and writing into it does not show on the device (padded TILE and unpadded ROW_MAJOR)."""
    shape = (1, 32) if layout == RM else (32, 32)  # ROW_MAJOR: the read is the whole buffer
    src = torch.arange(32 * shape[0], dtype=torch.int32).reshape(shape)
    dtype = ttsim.int32 if layout == RM else ttsim.bfloat16
    t = ttsim.from_torch(src if layout == RM else src.float(), dtype=dtype, layout=layout, device=device)
    out = ttsim.to_torch(t)
    if layout == RM:
        ttsim.plus_one(t)  # in place on the buffer's data object
        assert torch.equal(out, src)
        assert torch.equal(ttsim.to_torch(t), src + 1)
    out += 7
    again = ttsim.to_torch(t)
    assert not torch.equal(again, out)
    assert out.untyped_storage().data_ptr() != again.untyped_storage().data_ptr()


def test_a_composed_read_is_independent_of_every_chip():
    dev = _open(shape=(1, 2))
    try:
        t = ttsim.from_torch(torch.arange(8, dtype=torch.int32).reshape(1, 8), dtype=ttsim.int32, layout=RM,
                             device=dev, mesh_mapper=ttsim.ShardTensorToMesh(dev, dim=1))
        out = ttsim.to_torch(t, mesh_composer=ttsim.ConcatMeshToTensor(dev, dim=1))
        ttsim.plus_one(t)
        assert out.tolist() == [list(range(8))]
        alone = ttsim.to_torch(t, mesh_composer=_FirstShard())  # a composer handing a shard back
        ttsim.plus_one(t)
        assert alone.tolist() == [[1, 2, 3, 4]]  # read before the second increment
    finally:
        ttsim.close_mesh_device(dev)


class _FirstShard:
    def compose(self, shards):
        return shards[0]
