"""opbench.analysis.compile_settings: the columns' arguments and contexts, and a per-function reset of
Dynamo's cache."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="the settings are torch's")

from opbench.analysis.compile_settings import (  # noqa: E402
    COLUMNS,
    cache_entries,
    call_args,
    reset_cache,
    setting,
)


def test_arguments_per_column_are_copies():
    x, n = torch.ones(2), torch.arange(3)
    plain = call_args(torch, [x, n, 7], "requires_grad=False")
    grad = call_args(torch, [x, n, 7], "requires_grad=True")
    assert plain[0] is not x and torch.equal(plain[0], x) and not plain[0].requires_grad
    assert grad[0].requires_grad and not grad[1].requires_grad  # integers cannot
    assert plain[2] == grad[2] == 7
    with setting(torch, "inference_mode"):
        inference = call_args(torch, [x], "inference_mode")
        assert torch.is_inference_mode_enabled()
    assert inference[0].is_inference() and not x.is_inference()
    with setting(torch, "requires_grad=True"):
        assert not torch.is_inference_mode_enabled()
    assert COLUMNS == ("requires_grad=False", "requires_grad=True", "inference_mode")


def test_reset_empties_only_this_function_s_cache():
    def f(x):
        return x + 2

    def g(x):
        return x * 2

    cf, cg = torch.compile(f, backend="eager"), torch.compile(g, backend="eager")
    x = torch.randn(2)
    cf(x), cg(x)
    assert cache_entries(f.__code__) == 1 and cache_entries(g.__code__) == 1
    reset_cache(torch, f.__code__)
    assert cache_entries(f.__code__) == 0 and cache_entries(g.__code__) == 1
    cf(x)
    assert cache_entries(f.__code__) == 1
