"""Device scenarios: a public bug of one op, reproduced by calling the op as its issue does, on a
fresh ttsim device (harness.upstream_bugs.DeviceBug). The op runs as 0.81.1 runs it on a card;
what it did silently is read back from the device and from ``ttsim.diagnostics``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: the device seed these scenarios run on (the junk past a buffer is the seed's)
SEED = 0


@dataclass
class OpCall:
    """One call as made and what the device did with it."""
    label: str
    refusal: str | None  # the TT_FATAL, if the op refused the call
    written: dict = field(default_factory=dict)  # (cache block, slot) -> value, inside the cache
    diagnostics: list = field(default_factory=list)  # ttsim.diagnostics lines of the call

    @property
    def stray(self) -> bool:
        """The op wrote outside the blocks its page-table row maps (a recorded stray write)."""
        return any(": write " in d for d in self.diagnostics)


@dataclass
class OpSide:
    calls: list


@dataclass
class OpReproduction:
    bug: object
    broken: OpSide
    fixed: OpSide

    @property
    def ok(self) -> bool:
        """Without the fix every call is accepted (as the card accepts it) and writes astray; with
        it every call is accepted and writes only where its row says."""
        return (all(c.refusal is None and c.stray for c in self.broken.calls)
                and all(c.refusal is None and not c.stray and c.written for c in self.fixed.calls))

    def why_not(self) -> str:
        for c in self.broken.calls:
            if c.refusal is not None:
                return f"{c.label}: refused ({c.refusal}) where the card accepts it"
            if not c.stray:
                return f"{c.label}: no stray write"
        bad = [c.label for c in self.fixed.calls if c.refusal is not None or c.stray or not c.written]
        return f"with the fix: {', '.join(bad)} did not write in its row"

    def lines(self) -> list[str]:
        b = self.bug
        out = [f"{b.name}: {b.repo}#{b.number} {b.title} ({b.url})", f"  reproduces: {b.reproduces}",
               f"  issue reports: {b.failure}"]
        for side, calls in (("without the fix", self.broken.calls), ("with the fix", self.fixed.calls)):
            out.append(f"  {side}:")
            for c in calls:
                what = (f"refused: {c.refusal}" if c.refusal else
                        f"accepted; in the cache {c.written or 'nothing'}; {len(c.diagnostics)} stray access(es)")
                out.append(f"    {c.label}: {what}")
                out += [f"      {d}" for d in c.diagnostics]
        out.append("  REPRODUCED" if self.ok else f"  NOT REPRODUCED: {self.why_not()}")
        return out


def paged_update_past_the_row(fixed: bool) -> OpSide:
    """tt-metal #57364's paged_update_cache: a 64-block cache (1 KV head, block 32, head dim 32),
    one user whose page-table row holds 8 entries (256 positions), a token at position 900. Without
    the fix: under ``cache_position_modulo=1024`` (0.81.1 accepts it: 1024 / 32 <= 64 blocks) and
    without a modulo. With it: the modulo the issue asks to be bounded by, the row's 256 positions."""
    calls = [("cache_position_modulo=256, position 900", 256, 900)] if fixed else [
        ("cache_position_modulo=1024, position 900", 1024, 900), ("no modulo, position 900", None, 900)]
    return OpSide([_update_call(label, modulo, position) for label, modulo, position in calls])


def _update_call(label: str, modulo, position: int) -> OpCall:
    import torch

    import ttsim
    from ttsim import diagnostics

    ttsim.set_seed(SEED)
    dev = ttsim.open_device(device_id=0)
    try:
        cache = ttsim.from_torch(torch.zeros(64, 1, 32, 32), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT,
                                 device=dev)
        x = ttsim.from_torch(torch.full((1, 1, 32, 32), 7.0), dtype=ttsim.bfloat16, layout=ttsim.TILE_LAYOUT,
                             device=dev)
        pos = ttsim.from_torch(torch.tensor([position], dtype=torch.int32), dtype=ttsim.int32, device=dev)
        # the row last: what lies past it is memory nothing was written to (the card's "adjacent
        # L1 garbage")
        table = ttsim.from_torch(torch.arange(8, dtype=torch.int32).reshape(1, 8), dtype=ttsim.int32, device=dev)
        try:
            ttsim.experimental.paged_update_cache(cache, x, update_idxs_tensor=pos, page_table=table,
                                                  cache_position_modulo=modulo)
        except ttsim.TTFatal as exc:
            return OpCall(label, str(exc))
        got = ttsim.to_torch(cache).float()
        written = {(b, s): got[b, 0, s, 0].item() for b, s in torch.nonzero(got[:, 0, :, 0]).tolist()}
        return OpCall(label, None, written, [e.line() for e in diagnostics.entries(dev)])
    finally:
        ttsim.close_device(dev)
