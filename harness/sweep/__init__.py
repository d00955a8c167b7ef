"""The main job: control-vs-treatment arms over seeds (``ttsim arms``), its executors,
shards, the sim-vs-card comparison and the printed report."""

from __future__ import annotations

from harness.sweep.local import LocalExecutor
from harness.sweep.ray import RayExecutor

#: ``--executor`` name -> factory(workers, warm_up, ray_address) of a harness.sweep.executor.Executor
EXECUTORS = {
    "local": lambda workers, warm_up, ray_address: LocalExecutor(workers, warm_up),
    "ray": lambda workers, warm_up, ray_address: RayExecutor(num_cpus=workers, address=ray_address),
}
