"""Our generator with every call the runner makes recorded (name and the arguments that
identify the call), for the tests of the plugin's contract (tests/serving/test_plugin_contract.py)."""

from model.flags import ALL_FLAGS
from model.generator import Generator

#: the calls of every RecordingGenerator built in this process, in order (tests clear it)
CALLS: list[tuple] = []


class RecordingGenerator(Generator):
    ttsim_flags = ALL_FLAGS  # every flag ours switches

    def allocate_kv_cache(self, kv_cache_shape, dtype, num_layers):
        self.kv = super().allocate_kv_cache(kv_cache_shape, dtype, num_layers)
        CALLS.append(("allocate_kv_cache", tuple(kv_cache_shape), num_layers, id(self.kv)))
        return self.kv

    def warmup_model_prefill(self, enable_trace=False, **kw):
        CALLS.append(("warmup_model_prefill", enable_trace, id(kw.get("kv_cache")), kw.get("can_sample_on_device")))
        return super().warmup_model_prefill(enable_trace=enable_trace, **kw)

    def warmup_model_decode(self, enable_trace=False, **kw):
        CALLS.append(("warmup_model_decode", enable_trace, id(kw.get("kv_cache")), kw.get("can_sample_on_device"),
                      kw.get("max_batch_size"), kw.get("num_blocks")))
        return super().warmup_model_decode(enable_trace=enable_trace, **kw)

    def prefill_forward(self, *args, **kw):
        CALLS.append(("prefill_forward", id(kw.get("kv_cache")), "sampling_params" in kw, kw.get("enable_trace")))
        return super().prefill_forward(*args, **kw)

    def decode_forward(self, *args, **kw):
        sp = kw.get("sampling_params")
        CALLS.append(("decode_forward", id(kw.get("kv_cache")), None if sp is None else len(sp.temperature),
                      "reset_batch" in kw, tuple(kw["tokens"].shape), kw.get("read_from_device"),
                      tuple(kw["page_table"].shape)))
        return super().decode_forward(*args, **kw)
