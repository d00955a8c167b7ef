"""`vllm serve` on ttsim: an out-of-tree vLLM 0.33 platform plugin.

vLLM discovers it through this distribution's entry points (pyproject.toml):

- ``vllm.platform_plugins``: :func:`register_platform` names :class:`harness.vllm.platform.TtsimPlatform`
  when ``TTSIM_VLLM_PLATFORM=1``. vLLM activates every installed platform plugin that
  answers, so the plugin answers only when asked: the in-process sweeps import vLLM in
  the same venv and must keep vLLM's unspecified platform.
- ``vllm.general_plugins``: :func:`register_general` registers the stand-in architecture
  the generated model directory names (vLLM inspects it; the model runs on ttnn).

The vLLM configuration, scheduler and model directory it shares with the in-process sweeps
live in :mod:`harness.engine`. The worker (:mod:`harness.vllm.worker`) opens a seeded ttsim mesh and drives the project's
``TTRunner`` (stable slots, chunked prefill, traced decode with the merge and its fixes)
from vLLM's real EngineCore, assembled by ``harness.system`` exactly as the sweeps are.
"""

from __future__ import annotations

from harness.base.settings import PLATFORM_ENV, platform_enabled

__all__ = ["PLATFORM_ENV", "register_general", "register_platform"]


def register_platform() -> str | None:
    if not platform_enabled():
        return None
    return "harness.vllm.platform.TtsimPlatform"


def register_general() -> None:
    """Register the stand-in architecture the generated model directory names."""
    from harness.engine.arch import register_arch

    register_arch()
