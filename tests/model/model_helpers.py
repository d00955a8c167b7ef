"""Shared helpers of the model tests (imported by the test modules; no fixtures here)."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import os
from pathlib import Path

import torch
from filelock import FileLock  # a dependency of torch

from model.config import ModelConfig
from model import reference
from model.qwen36 import Qwen36Model
from model.tokenizer import encode
from model.weights import generate_weights

SEED = 1234

TEXT = (
    "In the beginning the Universe was created. This has made a lot of people very angry and been "
    "widely regarded as a bad move. Many were increasingly of the opinion that they'd all made a big "
    "mistake in coming down from the trees in the first place. "
)


@functools.lru_cache(maxsize=8)
def weights_for(config: ModelConfig, seed: int = SEED) -> dict:
    return generate_weights(config, seed)


def prompt(n: int, offset: int = 0) -> list[int]:
    """``n`` byte tokens of English text starting ``offset`` bytes into a repeating passage."""
    ids = encode(TEXT)
    return [ids[(offset + i) % len(ids)] for i in range(n)]


def reference_key(config: ModelConfig, weights: dict, tokens) -> str:
    """A hash of everything :func:`model.reference.reference_last_logits` reads: the config, every
    weight's name, dtype, shape and bytes, the tokens, the reference's source and torch's version."""
    h = hashlib.sha256()
    h.update(repr(sorted(dataclasses.asdict(config).items())).encode())
    for name in sorted(weights):
        w = weights[name].detach().contiguous()
        h.update(f"{name}:{w.dtype}:{tuple(w.shape)}".encode())
        h.update(w.view(torch.uint8).numpy().tobytes() if w.numel() else b"")
    h.update(repr([int(t) for t in tokens]).encode())
    h.update(inspect.getsource(reference).encode())
    h.update(torch.__version__.encode())
    return h.hexdigest()


def cached_reference_last_logits(cache_dir: Path, config: ModelConfig, weights: dict, tokens) -> torch.Tensor:
    """``reference_last_logits`` once per test session: at 32k tokens the float64 reference takes
    seconds, and the xdist workers running tests of the same prompt would each compute it. The
    file (in the session's temporary directory, see conftest) is named by :func:`reference_key`;
    a lock makes a second worker wait for the first one's result instead of computing it again."""
    path = Path(cache_dir) / f"reference-{reference_key(config, weights, tokens)}.pt"
    with FileLock(str(path) + ".lock"):
        if path.exists():
            return torch.load(path)
        want = reference.reference_last_logits(config, weights, tokens)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        torch.save(want, tmp)
        os.replace(tmp, path)  # readers never see a partial file
        return want


def pages(config: ModelConfig, slot: int, n_slots: int = 8) -> torch.Tensor:
    """A disjoint page-table row per slot: slot s owns blocks [s * max_pages, (s+1) * max_pages)."""
    mp = config.max_pages
    return torch.arange(slot * mp, (slot + 1) * mp, dtype=torch.int32)


def build(ttnn, mesh_device, config: ModelConfig, *, seed: int = SEED, max_slots: int = 4, **kw) -> Qwen36Model:
    num_blocks = kw.pop("num_blocks", max_slots * config.max_pages)
    return Qwen36Model(ttnn, mesh_device, config, weights_for(config, seed), max_slots=max_slots,
                       num_blocks=num_blocks, **kw)


def to_dev(ttnn, mesh_device, x: torch.Tensor, dtype):
    return ttnn.from_torch(x, dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT, device=mesh_device,
                           mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device))


def to_host_rm(ttnn, x: torch.Tensor, dtype, mesh_device):
    return ttnn.from_torch(x, dtype=dtype, layout=ttnn.ROW_MAJOR_LAYOUT,
                           mesh_mapper=ttnn.ReplicateTensorToMesh(mesh_device))


class DecodeInputs:
    """Persistent device input buffers of a decode batch (as the generator keeps them)."""

    def __init__(self, ttnn, mesh_device, config: ModelConfig, batch: int):
        self.ttnn, self.dev, self.config, self.batch = ttnn, mesh_device, config, batch
        self.tokens = to_dev(ttnn, mesh_device, torch.zeros(1, batch, dtype=torch.int32), ttnn.uint32)
        self.positions = to_dev(ttnn, mesh_device, torch.full((batch,), -1, dtype=torch.int32), ttnn.int32)
        self.page_table = to_dev(ttnn, mesh_device, torch.zeros(batch, config.max_pages, dtype=torch.int32),
                                 ttnn.int32)
        self.slots = to_dev(ttnn, mesh_device, torch.full((batch,), -1, dtype=torch.int32), ttnn.int32)

    def set(self, tokens, positions, slots, page_rows) -> None:
        """Write host values into the SAME device buffers (copy_host_to_device_tensor)."""
        ttnn, dev, b = self.ttnn, self.dev, self.batch
        pt = torch.zeros(b, self.config.max_pages, dtype=torch.int32)
        for r, row in enumerate(page_rows):
            if row is not None:
                pt[r] = row
        for host, buf, dtype in (
            (torch.tensor([list(tokens)], dtype=torch.int32), self.tokens, ttnn.uint32),
            (torch.tensor(list(positions), dtype=torch.int32), self.positions, ttnn.int32),
            (torch.tensor(list(slots), dtype=torch.int32), self.slots, ttnn.int32),
            (pt, self.page_table, ttnn.int32),
        ):
            ttnn.copy_host_to_device_tensor(to_host_rm(ttnn, host, dtype, dev), buf)

    def args(self):
        return self.tokens, self.positions, self.page_table, self.slots


def chip0(ttnn, t) -> torch.Tensor:
    return ttnn.to_torch(ttnn.get_device_tensors(t)[0])


def logits_rows(ttnn, logits) -> torch.Tensor:
    """Device logits [1, 1, B, vocab] -> float32 [B, vocab] (chip 0; replicated anyway)."""
    x = chip0(ttnn, logits).float()
    return x.reshape(x.shape[-2], x.shape[-1])


def snapshot_state(ttnn, model: Qwen36Model) -> dict[str, torch.Tensor]:
    """Every cache and GDN pool, all chips (concatenated), as host tensors."""
    out = {}
    dev = model.mesh_device
    for name, pool in (("k", model.k_cache), ("v", model.v_cache), ("conv", model.conv_pool),
                       ("state", model.state_pool)):
        for i, t in pool.items():
            out[f"{name}{i}"] = ttnn.to_torch(t, mesh_composer=ttnn.ConcatMeshToTensor(dev, dim=0)).float()
    return out
