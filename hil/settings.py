"""Every environment variable the hardware target reads or sets, in one place.

TT_VISIBLE_DEVICES               the cards this process may use (set before ttnn is imported)
TT_MESH_GRAPH_DESC_PATH          the mesh graph descriptor (ours for a one-cable p150a pair)
TT_METAL_MOCK_CLUSTER_DESC_PATH  a mock cluster: chips that do not exist (refused)

The functions in ``hil.discovery`` take an ``environ`` mapping so tests can hand them a
dict; their default is this process's, from :func:`process_environ`.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping


def process_environ() -> MutableMapping[str, str]:
    """This process's environment (the mapping ttnn and tt-metal read when they load)."""
    return os.environ


def child_env(package_root: str) -> dict[str, str]:
    """This process's environment for a helper process that imports ``hil`` from ``package_root``."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
