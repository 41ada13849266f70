"""opbench.analysis.compile_layers (and compile_boundaries): the callables of a
torch.compile'd call, found through torch's own cache entries and objects, and the reasons
given when a torch lays them out otherwise.

Compiling with Inductor takes seconds to tens of seconds here, so one compiled function
(two cache entries: without and with requires_grad) serves the whole module."""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="compile_layers reads torch.compile's internals")

from opbench.analysis import compile_boundaries, compile_layers  # noqa: E402
from opbench.analysis.compile_layers import BOUNDARIES, find_layers, frame_code  # noqa: E402

# Inductor finds g++ on PATH; the venv's folder may hold the tools it needs.
os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


def add1(x):
    return x + 1


@pytest.fixture(scope="module")
def compiled():
    torch._C._dynamo.eval_frame.reset_code(add1.__code__)
    fn = torch.compile(add1)
    plain, grad = torch.randn(4), torch.randn(4, requires_grad=True)
    fn(plain)
    fn(grad)
    return fn, plain, grad


@pytest.mark.slow
def test_probes_follow_the_chain_outermost_first(compiled):
    fn, _, grad = compiled
    layers = find_layers(fn, add1, (grad,), {})
    assert layers.reason is None and layers
    assert list(layers.probes) == list(BOUNDARIES)  # every boundary, in the chain's order
    assert layers.kernels == ["cpp_fused_add_0"]
    # Each probe runs the real callable on the arguments of a real call.
    assert torch.equal(layers.probes["compiled"].call(), grad + 1)
    assert layers.probes["guards"].call() is True
    assert torch.equal(layers.probes["inductor"].call()[0], grad.detach() + 1)
    assert layers.probes["autograd_function"].call()[0].requires_grad
    layers.probes["kernels"].call()
    assert [r.layer for r in layers.rows] == ["Dynamo"] * 4 + ["AOTAutograd"] * 2 + \
        ["Inductor"] * 2 + ["Kernels"]


@pytest.mark.slow
def test_without_requires_grad_there_is_no_autograd_function(compiled):
    fn, plain, _ = compiled  # the other cache entry of the same code
    layers = find_layers(fn, add1, (plain,), {})
    assert layers.reason is None
    assert "autograd_function" not in layers.probes
    assert [r.part for r in layers.rows if r.layer == "AOTAutograd"] == ["runtime wrappers"]
    assert torch.equal(layers.probes["compiled"].call(), plain + 1)


@pytest.mark.slow
def test_recorders_are_removed_after_the_capture(compiled):
    fn, plain, _ = compiled
    from torch._inductor.output_code import CompiledFxGraph

    names = [n for n in add1.__globals__ if n.startswith("__compiled_fn")]
    before = {n: add1.__globals__[n] for n in names}
    call = CompiledFxGraph.__call__
    find_layers(fn, add1, (plain,), {})
    assert {n: add1.__globals__[n] for n in names} == before
    assert CompiledFxGraph.__call__ is call


def test_rows_telescope_to_the_whole_call():
    """Each row is its boundary's time minus the next one's (guards apart), so the rows
    add up to the compiled call's own figure exactly, whatever the times."""
    probes = {key: None for key in BOUNDARIES}
    times = {key: float(2 ** i) for i, key in enumerate(BOUNDARIES)}
    rows = compile_layers._rows(probes)  # type: ignore[arg-type]
    assert sum(times[r.plus] - sum(times[k] for k in r.minus) for r in rows) == times["compiled"]
    without = {k: None for k in BOUNDARIES if k not in ("guards", "bytecode")}
    rows = compile_layers._rows(without)  # type: ignore[arg-type]
    assert rows[0].part == "frame evaluation and cache lookup (with the transformed bytecode) " \
                           "(with guards)"
    assert sum(times[r.plus] - sum(times[k] for k in r.minus) for r in rows) == times["compiled"]


@pytest.mark.slow
def test_a_torch_without_the_cache_entry_hook_is_reported_not_guessed(compiled, monkeypatch):
    fn, plain, _ = compiled
    monkeypatch.delattr(torch._C._dynamo.eval_frame, "_debug_get_cache_entry_list")
    layers = find_layers(fn, add1, (plain,), {})
    assert not layers and not layers.probes and not layers.rows
    assert "_debug_get_cache_entry_list" in layers.reason


@pytest.mark.slow
def test_a_torch_without_compiled_fx_graph_is_reported(compiled, monkeypatch):
    fn, plain, _ = compiled
    import torch._inductor.codecache
    import torch._inductor.output_code

    monkeypatch.delattr(torch._inductor.output_code, "CompiledFxGraph")
    monkeypatch.delattr(torch._inductor.codecache, "CompiledFxGraph", raising=False)
    layers = find_layers(fn, add1, (plain,), {})
    assert not layers and "CompiledFxGraph" in layers.reason


@pytest.mark.slow
def test_a_disable_wrapper_without_the_original_callable_is_reported(compiled, monkeypatch):
    fn, plain, _ = compiled
    for name in [n for n in add1.__globals__ if n.startswith("__compiled_fn")]:
        monkeypatch.delattr(add1.__globals__[name], "_torchdynamo_orig_callable")
    layers = find_layers(fn, add1, (plain,), {})
    assert not layers and "_torchdynamo_orig_callable" in layers.reason


def test_another_backend_has_no_inductor_layer_to_split():
    def mul2(x):
        return x * 2

    fn = torch.compile(mul2, backend="eager")  # no AOTAutograd, no Inductor: seconds
    x = torch.randn(3)
    fn(x)
    layers = find_layers(fn, mul2, (x,), {})
    assert not layers and "no CompiledFxGraph is reachable" in layers.reason


def test_a_function_that_never_compiled_has_no_cache_entry():
    def sub1(x):
        return x - 1

    layers = find_layers(sub1, sub1, (torch.randn(2),), {})
    assert not layers and "no Dynamo cache entry" in layers.reason


def test_frame_code_of_functions_methods_and_modules():
    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 2

        def method(self, x):
            return x

    module = Scale()
    assert frame_code(add1) is add1.__code__
    assert frame_code(module.method) is Scale.method.__code__
    assert frame_code(module) is Scale.forward.__code__
    with pytest.raises(TypeError, match=r"pass a Python function, a bound method or an nn\.Module"):
        frame_code(len)


def test_the_autograd_function_is_found_through_a_python_or_a_c_apply() -> None:
    # torch 2.13 and before call the Function's Python classmethod `apply`; torch 2.14's
    # runtime wrapper holds the C `_FunctionBase.apply` bound to the class instead.
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    c_apply = torch._C._FunctionBase.__dict__["apply"].__get__(None, Double)
    assert compile_boundaries.function_apply(c_apply, torch) is Double
    assert compile_boundaries.function_apply(Double.apply, torch) is Double
    assert compile_boundaries.function_apply(torch.ones(1).add, torch) is None
    assert compile_boundaries.function_apply(len, torch) is None

    def held(x):  # a runtime wrapper's closure holding the C apply, as 2.14 lays it out
        return c_apply(x)

    class NoGraph:
        pass

    functions, graphs = compile_boundaries.search(held, torch, NoGraph)
    assert (functions, graphs) == ([Double], [])
