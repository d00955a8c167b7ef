"""vLLM's process set-up, done once and on purpose (never as an import side effect).

:func:`prepare_vllm` runs before vLLM is first imported in a process that drives vLLM's
scheduler in-process (sweeps, scenarios); a served engine gets the same values through
its environment (harness.vllm.server.serve_env).
"""

from __future__ import annotations

import logging

from harness.base.settings import set_default_env

#: what vLLM reads at import: no hub, quiet logs, no usage report, the V1 model runner
VLLM_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_LOGGING_LEVEL": "ERROR",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_USE_V2_MODEL_RUNNER": "0",
}
VLLM_VERSION = "0.33.0"


class NoCompiledKernels(logging.Filter):
    """This install carries vLLM's scheduler without its compiled kernels (requirements/), so
    vLLM's warning that ``vllm._C`` is absent is expected noise; any other failure to load
    them (a broken build, a missing symbol) still shows."""

    EXPECTED = "Failed to import from vllm._C: ModuleNotFoundError(\"No module named 'vllm._C'\")"

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.EXPECTED


_LOGGERS = ("vllm.platforms.interface", "vllm.platforms.cpu")
_prepared = False


def prepare_vllm() -> None:
    """Set vLLM's environment defaults (an explicit setting wins) and silence the expected
    missing-kernels warning. Idempotent."""
    global _prepared
    if _prepared:
        return
    set_default_env(VLLM_ENV)
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(NoCompiledKernels())
    _prepared = True
