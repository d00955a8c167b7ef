"""`ttsim selfcheck`: a quick look at the fake device (junk after a freed buffer, the state digest)."""

from __future__ import annotations


def run(args) -> int:
    """`ttsim selfcheck` (--seed resolved by harness.commands.preflight.seed_from_env): exercise a fake
    1x2 mesh and print its state digest."""
    import torch

    import ttsim

    from harness.system import choose_backend

    choose_backend(hil=False).seed(args.seed)
    dev = ttsim.open_mesh_device(ttsim.MeshShape(1, 2), num_command_queues=2)
    try:
        x = ttsim.from_torch(torch.linspace(-1, 1, 64 * 64).reshape(64, 64), dtype=ttsim.bfloat16,
                             layout=ttsim.TILE_LAYOUT, device=dev,
                             mesh_mapper=ttsim.ShardTensorToMesh(dev, dim=-1))
        y = ttsim.matmul(x, x, transpose_b=True)
        ttsim.deallocate(y)
        junk = ttsim.allocate_tensor_on_device(ttsim.Shape([8]), ttsim.int32, ttsim.ROW_MAJOR_LAYOUT, dev)
        first = ttsim.to_torch(ttsim.get_device_tensors(junk)[0]).tolist()
        digest = ttsim.digest_state([dev])
    finally:
        ttsim.close_mesh_device(dev)
    print(f"seed {args.seed}: uninitialized int32 after a freed bf16 matmul output: {first}")
    print(f"state digest {digest}")
    print(f"replay: bin/ttsim selfcheck --seed {args.seed}")
    return 0
