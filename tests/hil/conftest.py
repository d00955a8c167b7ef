import pytest

from hil_helpers import build_real_python


@pytest.fixture(scope="session")
def real_python():
    """The Python 3.12 venv holding the REAL ttnn 0.81.1 and no torch (built if missing)."""
    return build_real_python()
