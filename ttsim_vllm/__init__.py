"""`vllm serve` on ttsim: an out-of-tree vLLM 0.33 platform plugin.

vLLM discovers it through this distribution's entry points (pyproject.toml):

- ``vllm.platform_plugins``: :func:`register_platform` names :class:`ttsim_vllm.platform.TtsimPlatform`
  when ``TTSIM_VLLM_PLATFORM=1``. vLLM activates every installed platform plugin that
  answers, so the plugin answers only when asked: the in-process sweeps import vLLM in
  the same venv and must keep vLLM's unspecified platform.
- ``vllm.general_plugins``: :func:`register_general` registers the stand-in architecture
  the generated model directory names (vLLM inspects it; the model runs on ttnn).

The worker (:mod:`ttsim_vllm.worker`) opens a seeded ttsim mesh and drives the project's
``TTRunner`` (stable slots, chunked prefill, traced decode with the merge and its fixes)
from vLLM's real EngineCore. This package chooses the backend, so it sits beside
``fixtures`` and ``hil``; ``model`` never imports it.
"""

from __future__ import annotations

import os

PLATFORM_ENV = "TTSIM_VLLM_PLATFORM"
ARCH = "TtsimForCausalLM"


def register_platform() -> str | None:
    if os.environ.get(PLATFORM_ENV) != "1":
        return None
    return "ttsim_vllm.platform.TtsimPlatform"


def register_general() -> None:
    from vllm import ModelRegistry

    if ARCH not in ModelRegistry.get_supported_archs():
        ModelRegistry.register_model(ARCH, "ttsim_vllm.arch:TtsimForCausalLM")
