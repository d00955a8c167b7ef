"""The newest upstream decode protocol as an option: the four reload commands of tt-metal's
``models/common/decode_contract.py`` (40f4746e) instead of ``reset_batch``. A generator
declaring ``decode_input_update_contract = 1`` gets them from the runner."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
import torch

import ttsim
from harness import scenario
from harness.base.spec import RunSpec, parse_generator
from harness.workloads import stage3
from model.flags import ARMS
from model.generator import CONTRACT_COMMANDS, Generator
from model.markov import MARKOV, MarkovModel
from model.protocol import GREEDY

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "tests" / "generators" / "contract.py"
MAX_PAGES = MARKOV.max_context // MARKOV.block_size
NONE = dict.fromkeys(CONTRACT_COMMANDS, False)
ALL = {**NONE, "reload_inputs": True}


@contextlib.contextmanager
def _markov_generator(cls=Generator, **kw):
    """A sweep-model generator of class ``cls`` on an open device, closed on exit."""
    device = ttsim.open_device(device_id=0)
    try:
        model = MarkovModel(ttsim, device, MARKOV, max_slots=8)
        yield cls(model, ttsim, device, flags=ARMS["control"], max_context=MARKOV.max_context,
                  max_pages=MAX_PAGES, enable_trace=True, **kw)
    finally:
        ttsim.close_device(device)


@pytest.fixture
def gen():
    ttsim.set_seed(3)
    with _markov_generator(decode_contract=1) as g:
        yield g


def _decode(gen, toks, pos, **commands):
    table = torch.zeros(len(pos), MAX_PAGES, dtype=torch.int32)
    out = gen.decode_forward(torch.tensor(toks).reshape(-1, 1), torch.tensor(pos, dtype=torch.int32), table,
                             read_from_device=True, **commands, sampling_params=GREEDY)
    return out.reshape(-1).tolist()


def _device_rows(gen, bucket):
    return gen._read_device_state(gen._traces[bucket], bucket)


def test_reset_batch_is_refused_by_name_and_so_is_a_half_command_set(gen):
    with pytest.raises(ValueError, match="reset_batch is not part of the decode input-update contract"):
        _decode(gen, [1], [3], reset_batch=True, **ALL)
    with pytest.raises(TypeError, match="missing reset_sampling_state"):
        _decode(gen, [1], [3], reload_inputs=True, reload_page_table=False, reload_sampling_params=False)
    with pytest.raises(ValueError, match="reload_page_table is the page-table-only copy"):
        _decode(gen, [1], [3], **{**ALL, "reload_page_table": True})


def test_a_legacy_generator_refuses_the_commands():
    g = Generator.__new__(Generator)
    g.decode_input_update_contract = 0
    with pytest.raises(TypeError, match="speaks reset_batch"):
        g._staging(None, ALL)
    with pytest.raises(ValueError, match="decode_contract must be 0"):
        Generator(None, ttsim, None, flags=ARMS["all"], max_context=8, max_pages=1, decode_contract=2)


class _DeclaresTheContract(Generator):
    decode_input_update_contract = 1  # declared on the class, as tt-metal's generators do


def _contract_of(cls, **kw) -> int:
    with _markov_generator(cls, **kw) as g:
        return g.decode_input_update_contract


def test_a_subclass_declaring_the_contract_on_the_class_keeps_it():
    assert _contract_of(_DeclaresTheContract) == 1
    assert _contract_of(Generator) == 0


def test_decode_contract_overrides_the_class_declaration_either_way():
    assert _contract_of(_DeclaresTheContract, decode_contract=0) == 0
    assert _contract_of(Generator, decode_contract=1) == 1
    with pytest.raises(ValueError, match="decode_contract must be 0"):
        _contract_of(_DeclaresTheContract, decode_contract=2)


def test_reload_inputs_restages_the_host_and_none_keeps_the_device_state(gen):
    first = _decode(gen, [5, 6], [3, 7], **ALL)
    assert _device_rows(gen, 2) == (first, [4, 8])  # the device sampled and advanced
    # the host says something else; with no reload the device's own state runs on
    _decode(gen, [0, 0], [3, 7], **NONE)
    assert _device_rows(gen, 2)[1] == [5, 9]
    _decode(gen, [9, 9], [20, 30], **ALL)
    assert _device_rows(gen, 2)[1] == [21, 31]


def test_without_reload_the_remap_moves_the_device_rows_once(gen):
    _decode(gen, [5, 6], [3, 7], **ALL)
    toks, pos = _device_rows(gen, 2)
    remap = [1, 0, 2, 3, 4, 5, 6, 7]
    _decode(gen, [0, 0], [0, 0], slot_remap=torch.tensor(remap, dtype=torch.int32), **NONE)
    assert _device_rows(gen, 2)[1] == [pos[1] + 1, pos[0] + 1]  # swapped, then advanced by the step
    _decode(gen, [0, 0], [0, 0], **NONE)
    assert _device_rows(gen, 2)[1] == [pos[1] + 2, pos[0] + 2]  # not swapped back


@pytest.mark.needs_fault_injection
@pytest.mark.parametrize("seed", [27, 32])
def test_a_contract_generator_under_the_runner_passes_the_pinned_seeds(seed):
    """The runner's policy for the contract: at every layout change the host is fresh and
    authoritative (reload_inputs), so the legacy merge's defects cannot arise: the seeds
    where `control` fails under reset_batch pass."""
    workload = stage3(seed)
    spec = RunSpec(seed=seed, generator=parse_generator(f"{CONTRACT}:ContractGenerator"))
    result = scenario.run_scenario(workload, "control", spec, expected=scenario.serial_answers(workload, spec))
    assert result.failed == [], f"replay: bin/ttsim replay --arm control --seed {seed} --generator {CONTRACT}:ContractGenerator"
    assert result.merges == [] and result.guard_rejects == 0
