"""Where a sweep's seeds run: the strategy is chosen by name from harness.sweep.EXECUTORS, one
file per strategy beside the protocol (harness/sweep/executor.py holds the interface alone)."""

from __future__ import annotations

import ast
import inspect

import pytest

from harness.commands import cli
from harness.sweep import EXECUTORS, executor
from harness.sweep.local import LocalExecutor
from harness.sweep.ray import RayExecutor


def warm_up():
    pass


def test_each_name_builds_its_strategy_with_the_sweeps_options():
    local = EXECUTORS["local"](3, warm_up, None)
    assert isinstance(local, LocalExecutor) and (local.workers, local.warm_up) == (3, warm_up)
    ray = EXECUTORS["ray"](4, warm_up, "10.0.0.1:6379")
    assert isinstance(ray, RayExecutor) and (ray.num_cpus, ray.address) == (4, "10.0.0.1:6379")


def test_the_cli_offers_exactly_the_mapped_names():
    action = next(a for a in cli.build_parser()._subparsers._group_actions[0].choices["arms"]._actions
                  if a.dest == "executor")
    assert list(action.choices) == list(EXECUTORS) == ["local", "ray"]


def test_the_protocol_file_holds_the_protocol_alone():
    tree = ast.parse(inspect.getsource(executor))
    defined = [n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))]
    assert defined == ["Executor"]


@pytest.mark.parametrize("workers", [1, 2])
def test_the_local_strategy_yields_every_job_once(workers):
    got = LocalExecutor(workers).imap_unordered(abs, [-3, -1, -2])
    assert sorted(got) == [1, 2, 3]
