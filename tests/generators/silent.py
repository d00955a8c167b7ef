"""Our generator behind the plugin's calls alone: no merge hook, no records, nothing but the
contract (model/protocol.py). What the suite concludes about it, it concludes from what the
generator does (tests/serving/test_host_view.py)."""

from model.flags import ALL_FLAGS
from model.generator import Generator

#: the contract's calls, so that its runs match ours command for command
CALLS = ("allocate_kv_cache", "warmup_model_prefill", "warmup_model_decode", "prefill_forward", "decode_forward",
         "read_decode_output", "process_decode_output_host")


class SilentGenerator:
    ttsim_flags = ALL_FLAGS  # every flag ours switches

    def __init__(self, model, tt, mesh_device, **kw):
        self._inner = Generator(model, tt, mesh_device, **kw)


def _delegate(name: str):
    def call(self, *args, **kw):
        return getattr(self._inner, name)(*args, **kw)

    call.__name__ = name
    return call


for _name in CALLS:  # methods on the class: the loader checks a class for the contract
    setattr(SilentGenerator, _name, _delegate(_name))
