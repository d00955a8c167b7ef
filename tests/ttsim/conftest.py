import os

import pytest

from real_ttnn import load_dump

_HERE = os.path.dirname(os.path.abspath(__file__))


def pytest_collection_modifyitems(config, items):
    """These tests check ttsim itself (and ttsim against the real package's host side): with
    --hil there is nothing of theirs to run on a card, so they are not device tests."""
    for item in items:
        if str(item.path).startswith(_HERE + os.sep):
            item.add_marker(pytest.mark.simulator_only)


@pytest.fixture(scope="session")
def real() -> dict:
    """The real ttnn 0.81.1 package's dump (see real_ttnn.py)."""
    return load_dump()
