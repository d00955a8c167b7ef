import warnings

import pytest
import torch

import ttsim


@pytest.fixture(autouse=True)
def _quiet_serving():
    """Serving scenarios allocate while traces are live by design (prefill between decodes);
    ttnn logs that hazard, ttsim warns; here it is expected."""
    torch.set_num_threads(1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ttsim.TraceAllocationWarning)
        yield
