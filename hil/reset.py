"""Resetting cards with tt-smi: only the selected ones, only when asked (``--hil-reset``).

tt-metal's conftest runs ``tt-smi -r <pci ids>`` after a failed test on the cards the test had
open; hil does the same for the cards the session selected, before the session and after each
failed test, and never without the flag.
"""

from __future__ import annotations

import shutil
import subprocess


def reset_command(card_ids: list[int]) -> list[str]:
    if not card_ids:
        raise ValueError("tt-smi reset: no card ids (refusing to reset every card)")
    return ["tt-smi", "-r", ",".join(str(i) for i in card_ids)]


def reset_cards(card_ids: list[int], timeout: float = 300.0) -> tuple[bool, str]:
    """Run the reset; (ok, one line saying what happened)."""
    cmd = reset_command(card_ids)
    if shutil.which(cmd[0]) is None:
        return False, "tt-smi not found on PATH (pip install tt-smi); cannot reset cards"
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"`{' '.join(cmd)}` did not finish within {timeout:g} s"
    tail = (p.stdout + p.stderr).strip().splitlines()[-1:] or [""]
    return p.returncode == 0, f"`{' '.join(cmd)}` exited {p.returncode} {tail[0]}".rstrip()
