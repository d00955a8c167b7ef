"""A generator on the newest upstream decode protocol: the four reload commands of tt-metal's
``models/common/decode_contract.py`` instead of ``reset_batch``. The runner sees
``decode_input_update_contract = 1`` and speaks the commands to it (model/serving.py)."""

from model.flags import ALL_FLAGS
from model.generator import Generator


class ContractGenerator(Generator):
    ttsim_flags = ALL_FLAGS  # every flag ours switches

    def __init__(self, model, tt, mesh_device, **kw):
        super().__init__(model, tt, mesh_device, decode_contract=1, **kw)
