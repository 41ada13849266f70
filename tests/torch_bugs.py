"""Bugs of the installed torch.utils.benchmark that opbench fixes on purpose, detected at run time.

Differential tests compare opbench with whatever torch is installed (2.13.0 in CI; see
tools/compat-check for others). Where torch has a bug that opbench does not copy, a test asks
here whether *this* torch has it, rather than assuming it from a version number: with the bug,
the test checks opbench's documented behaviour alone; without it, it compares opbench with torch
as for any other feature. Each probe is the smallest call that shows the bug.

>>> isinstance(compare_rejects_description_none(), bool)
True
"""
from __future__ import annotations

import functools
from typing import Callable

import torch.utils.benchmark as tb
from torch.utils.benchmark.utils.valgrind_wrapper import timer_interface


def _raises(call: Callable[[], object], error: type[BaseException], text: str = "") -> bool:
    try:
        call()
    except error as e:
        return text in str(e)
    return False


@functools.cache
def compare_rejects_description_none() -> bool:
    """Compare raises TypeError (len(None)) on a result whose description is None (2.13)."""
    spec = tb.TaskSpec(stmt="f()", setup="pass", label="L", description=None)
    return _raises(lambda: str(tb.Compare([tb.Measurement(1, [1e-6], spec)])), TypeError)


@functools.cache
def compare_rejects_mixed_env() -> bool:
    """Compare raises TypeError ordering env None against a string env in one label (2.13)."""
    specs = [tb.TaskSpec(stmt="f()", setup="pass", label="L", description="d", env=e)
             for e in (None, "B")]
    return _raises(lambda: str(tb.Compare([tb.Measurement(1, [1e-6], s) for s in specs])),
                   TypeError)


@functools.cache
def fuzzer_rejects_normalized_distributions() -> bool:
    """FuzzedParameter's normalisation check is inverted: it rejects every normalised dict
    distribution, so every op fuzzer raises on construction (2.13)."""
    return _raises(lambda: tb.FuzzedParameter("p", distribution={1: 0.5, 2: 0.5}),
                   AssertionError, "not normalized")


@functools.cache
def measurement_env_is_none() -> bool:
    """Measurement.env misspells `taskspec` and returns None, not "Unspecified env" (2.13)."""
    return tb.Measurement(1, [1e-6], tb.TaskSpec("f()", "pass")).env is None


@functools.cache
def select_unit_below_a_nanosecond_is_seconds() -> bool:
    """select_unit falls off its table below 1 ns and answers seconds (2.13)."""
    return tb.select_unit(2e-10)[0] == "s"


@functools.cache
def function_counts_index_wraps_the_row() -> bool:
    """FunctionCounts[i] wraps the row in a FunctionCounts whose repr raises (2.13)."""
    row = timer_interface.FunctionCount(1, "a.c:f")
    counts = timer_interface.FunctionCounts((row,), inclusive=False)
    return isinstance(counts[0], timer_interface.FunctionCounts)


# CPython 3.11 renamed the dict lookup that torch's denoise filters out.
PY311_DICT_LOOKUP = "Objects/dictobject.c:unicodekeys_lookup_unicode [/usr/lib/libpython3.11.so.1.0]"


@functools.cache
def denoise_keeps_the_py311_dict_lookup() -> bool:
    """FunctionCounts.denoise filters CPython <= 3.10's `lookdict_unicode` only, so 3.11's
    `unicodekeys_lookup_unicode` stays in "denoised" counts (2.13)."""
    row = timer_interface.FunctionCount(1, PY311_DICT_LOOKUP)
    return len(timer_interface.FunctionCounts((row,), inclusive=False).denoise()) == 1
