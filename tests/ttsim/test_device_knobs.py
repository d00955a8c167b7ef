"""ttsim.device_knobs: the seeded readback lag a mesh is opened with (the composition root
opens every serving mesh inside it); outside the block meshes get the default."""

import pytest

import ttsim
from ttsim.device import DEFAULT_LAG

pytestmark = pytest.mark.simulator_only


def _lag_of_a_new_mesh() -> float:
    dev = ttsim.open_device(device_id=0)
    try:
        return dev.lag
    finally:
        ttsim.close_device(dev)


def test_the_lag_applies_inside_the_block_only_and_nests():
    assert _lag_of_a_new_mesh() == DEFAULT_LAG
    with ttsim.device_knobs(readback_lag=0.0):
        assert _lag_of_a_new_mesh() == 0.0
        with ttsim.device_knobs(readback_lag=0.9):
            assert _lag_of_a_new_mesh() == 0.9
        assert _lag_of_a_new_mesh() == 0.0
    assert _lag_of_a_new_mesh() == DEFAULT_LAG


@pytest.mark.parametrize("lag", [-0.01, 1.01])
def test_a_lag_outside_0_1_is_refused(lag):
    with pytest.raises(ValueError, match="readback_lag must be in \\[0, 1\\]"):
        with ttsim.device_knobs(readback_lag=lag):
            pass


@pytest.mark.parametrize("lag", [0.0, 1.0])
def test_the_bounds_are_allowed(lag):
    with ttsim.device_knobs(readback_lag=lag):
        assert _lag_of_a_new_mesh() == lag
