import pytest

from real_ttnn import load_dump


@pytest.fixture(autouse=True)
def _simulator_only(request):
    """These tests check ttsim itself (and ttsim against the real package's host side):
    with --hil there is nothing of theirs to run on a card."""
    if request.config.getoption("--hil"):
        pytest.skip("ttsim's own tests: not a hardware test")


@pytest.fixture(scope="session")
def real() -> dict:
    """The real ttnn 0.81.1 package's dump (see real_ttnn.py)."""
    return load_dump()
