"""A wrong answer's defect class: one rule for every caller (the in-process scenarios, the served
worker's records, and ``ttsim serve-explain`` filling in what the worker left open).

First the merge's own view (:func:`classify`: what a merge that kept a wrong row read), then
the host's (model.serving.host_view_class: which decode yielded the first wrong token), for a
generator whose merges were not reported or a run that ended early.
"""

from __future__ import annotations

#: the verdict of a request the device's hang cut short (the run's ``fatal`` line says where)
DEVICE_TIMEOUT = "device-timeout"
#: a wrong answer with the merge off: the host restaged its own one-step-stale token
STALE_HOST_TOKEN = "stale-host-token"
#: the prefill's own token (output 0) was wrong: the state the prefill computed on held other
#: bytes (its prefill-only scratch or zero buffers clobbered behind a live trace, or the cache)
PREFILL_STATE = "prefill-state"
#: a decode fed the host's own fresh inputs (a generator restaging every step, no keep) yielded the
#: first wrong token: state the model keeps on the device (GDN state, KV cache) held other bytes
MODEL_STATE = "model-state"

#: token ids at or above this are in no vocabulary (the largest hold about 2**18): a device token
#: this big is bytes that are not a token, e.g. two bf16 activations read as one uint32
NO_VOCABULARY = 1 << 24


def classify(event, row) -> str:
    """A kept-wrong row's class (``event`` a model.merge_events.MergeEvent), from what the merge
    read and the host's own view (not the generator's records, which a regressed generator may
    lack). Split by route: the token the row kept is bytes no vocabulary has ("garbage-token":
    a clobbered token buffer whose position still passed the rule), a position no batch can
    have was read ("garbage-position"), the slot's previous occupant ("slot-reuse"), an older
    batch ("stale-position-buffer")."""
    if row.dev_token >= NO_VOCABULARY:
        return "garbage-token"
    if row.host_prefilled:
        return "slot-reuse"
    # garbage: the merge read a never-run width's memory (what-if), or a position buffer
    # holding values no position can have (another trace's activations, as production's
    # 1206993233): the bytes are not any batch's
    if event.fresh_trace or any(not -1 <= p < event.inputs.max_context for p in event.inputs.dev_positions):
        return "garbage-position"
    return "stale-position-buffer"


def verdict_class(*, merge_defect: str | None, merge_on: bool, decode_log: dict, expected: list[int],
                  got: list[int], cut_short: bool = False, host_fresh: bool = False) -> str:
    """The class of a request whose answer ``got`` differs from ``expected``: what a merge that
    touched it kept (``merge_defect``, :func:`classify`), else a run cut short by the device
    (``cut_short``), else the prefill's own token wrong (``prefill-state``), else, where the
    runner fed the host's fresh inputs at every decode (``host_fresh``: a generator without async
    decode), state the model keeps (``model-state``), else the merge off, else the host's view
    of the decode that went wrong (``decode_log``: output index -> (first decode after prefill,
    a reload))."""
    from model.serving import host_view_class

    if merge_defect:
        return merge_defect
    if cut_short:
        return DEVICE_TIMEOUT
    if got and first_difference(expected, got) == 0:
        return PREFILL_STATE
    if host_fresh:
        return MODEL_STATE
    if not merge_on:
        return STALE_HOST_TOKEN
    return host_view_class(decode_log, expected, got)


def first_difference(expected: list[int], got: list[int]) -> int:
    """The output index where ``got`` first differs from ``expected`` (a short output: its end)."""
    return next((i for i, (e, g) in enumerate(zip(expected, got)) if e != g), min(len(expected), len(got)))
