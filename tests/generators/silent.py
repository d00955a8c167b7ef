"""Our generator behind the plugin's calls alone: no merge hook, no records, nothing but the
contract (model/protocol.py). What the suite concludes about it, it concludes from what the
generator does (tests/serving/test_host_view.py)."""

from model.flags import ALL_FLAGS
from model.generator import Generator


class SilentGenerator:
    ttsim_flags = ALL_FLAGS  # every flag ours switches

    def __init__(self, model, tt, mesh_device, **kw):
        self._inner = Generator(model, tt, mesh_device, **kw)

    def allocate_kv_cache(self, *args, **kw):
        return self._inner.allocate_kv_cache(*args, **kw)

    def warmup_model_prefill(self, *args, **kw):
        return self._inner.warmup_model_prefill(*args, **kw)

    def warmup_model_decode(self, *args, **kw):
        return self._inner.warmup_model_decode(*args, **kw)

    def prefill_forward(self, *args, **kw):
        return self._inner.prefill_forward(*args, **kw)

    def decode_forward(self, *args, **kw):
        return self._inner.decode_forward(*args, **kw)

    def read_decode_output(self, *args, **kw):
        return self._inner.read_decode_output(*args, **kw)

    def process_decode_output_host(self, *args, **kw):
        return self._inner.process_decode_output_host(*args, **kw)

    def warm_up(self):
        """ttsim's `eager_traces` knob (beyond the contract), so that runs match ours command for command."""
        return self._inner.warm_up()
