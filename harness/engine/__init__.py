"""vLLM's engine as the composition root builds it, for the in-process sweeps and the served
worker alike: vLLM's process set-up (:mod:`.prepare`), its configuration on the runner's
geometry (:mod:`.config`), the Tenstorrent plugin's phased scheduler (:mod:`.scheduler`),
and the generated model directory with its stand-in architecture (:mod:`.modeldir`,
:mod:`.arch`).

It sits below ``harness.system``; the entry points (``harness.vllm``, ``harness.commands.cli``,
``fixtures``) import it, never the reverse.
"""
