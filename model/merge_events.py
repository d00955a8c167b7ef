"""What a merge saw and decided, as plain data: the generator builds these events, the
serving runner tags them, merge traces record them and ``ttsim replay --trace`` reads them
back, so this module needs neither torch nor a device."""

from __future__ import annotations

from dataclasses import dataclass, field


def kept_wrong(source: str, dev_token: int, dev_pos: int, host_token: int, host_pos: int) -> bool:
    """A row kept from the device although the host (fresh at resets) disagrees: on the
    position, or on the token of a live row (a padding row's token is never used)."""
    return source == "device" and (dev_pos != host_pos or (host_pos >= 0 and dev_token != host_token))


@dataclass
class MergeRow:
    slot: int
    host_token: int
    host_pos: int
    dev_token: int
    dev_pos: int
    source: str  # "device" or "host"
    reason: str
    prefilled: bool = False  # diagnostics: the slot was prefilled since the last decode
    request_id: str | None = None  # the request holding the slot (tagged by the serving runner)
    # the host's own view, tagged by the serving runner: the slot's request was prefilled and
    # has not decoded since (what the generator should have recorded; it may not have)
    host_prefilled: bool = False


@dataclass
class MergeInputs:
    """The merge's inputs beyond the rows: the device reads as read (padded to the bucket,
    before the clamp), the bucket of the trace read, and the rule's configuration."""
    source_bucket: int
    dev_tokens: list[int]
    dev_positions: list[int]
    max_context: int
    flags: dict


@dataclass
class MergeEvent:
    step: int
    bucket: int
    previous_bucket: int | None
    fresh_trace: bool
    guard_rejected: bool
    rows: list[MergeRow] = field(default_factory=list)
    inputs: MergeInputs | None = None  # what the decision read, for recording and replay

    def kept_wrong(self) -> list[MergeRow]:
        """Rows whose device token/position was kept although the host disagrees (:func:`kept_wrong`)."""
        return [r for r in self.rows if kept_wrong(r.source, r.dev_token, r.dev_pos, r.host_token, r.host_pos)]
