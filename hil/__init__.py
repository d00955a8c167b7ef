"""The hardware target: real ttnn on p150a cards.

- ``discovery`` / ``probe``: which cards the real ttnn sees, or why none (torch-free;
  ``python -m hil.probe``), card selection (TT_VISIBLE_DEVICES) and the mesh graph descriptor.
- ``devices``: tt-metal's device_params conventions (fabric before open, Blackhole dispatch
  cores, teardown order) for ANY ttnn-like module: the simulator opens meshes the same way.
- ``cards``: the real ttnn for programs outside pytest (``ttsim arms --hil``), fail-closed.
- ``gates``: production's HTTP stage gates against a served model; ``settings``: every variable read.
- ``record`` / ``watchdog`` / ``reset``: the session record, the per-test watchdog process, tt-smi.
- ``lifeline``: child processes (vLLM servers, the card probe) that end with their starter, SIGKILL too.

hil imports neither fixtures nor torch; the pytest plugin (fixtures/hardware.py) only asks it.
"""
