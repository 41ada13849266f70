"""The layers of one ``torch.compile``'d call, found through the installed torch's own hooks.

A warm compiled call goes down a chain of callables, each layer handing the
next one its arguments:

* **Dynamo**: the wrapper ``torch.compile`` returned sets the frame-evaluation
  callback; the callback looks the frame's code up in its cache (a list of
  cache entries on the code object), runs each entry's guards on the frame's
  locals, and runs the hit entry's transformed bytecode, which calls the
  backend's compiled function (a global named ``__compiled_fn_*``, wrapped by
  Dynamo's ``disable`` so the backend's own frames are not traced again).
* **AOTAutograd**: that function's original callable (``_torchdynamo_orig_callable``)
  runs AOTAutograd's runtime wrappers and, when an input requires grad, an
  ``autograd.Function`` subclass whose ``forward`` calls the compiled forward.
* **Inductor**: a ``CompiledFxGraph`` object, whose ``current_callable`` is the
  generated module's ``call`` (input checks, buffer allocation, kernel launches).
* **Kernels**: what ``call`` launches: generated kernels (assigned from
  ``async_compile`` in the generated module) and ATen kernels
  (``extern_kernels.*``, ``aten.*``).

``find_layers`` locates each of these callables from the objects the running
torch holds (cache entries, guard managers, closures of the backend's
function, the generated module's globals), then calls the compiled function
once with recorders installed at every boundary to capture the arguments
each layer really hands to the next and to check that the call goes through
each boundary exactly once. Each boundary becomes a zero-argument *probe*
that calls that callable with those arguments; a layer's cost is its probe's
time minus the next probe's (``Layers.rows``).

Nothing is guessed: where this torch lays the chain out differently (no cache
entry list, no ``CompiledFxGraph``, a boundary found but not called), the
result carries the reason and no probes (``Layers.reason``), and the caller
prints the reason instead of a split. Checked on torch 2.13 and 2.14.1; the
names used are those torch has kept since 2.1 (``_debug_get_cache_entry_list``,
``__compiled_fn_*`` globals, ``_torchdynamo_orig_callable``,
``CompiledFxGraph.current_callable``), with the guard check reached as
``guard_manager`` (2.3 and later) or ``check_fn`` (before), and the autograd
Function reached through its Python ``apply`` or (2.14) its C one.

Example (compiles, so tens of seconds on a small machine)::

    layers = find_layers(torch.compile(f), f, (x,), {})
    print(layers.reason or [row.part for row in layers.rows])
"""
from __future__ import annotations

import functools
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opbench.analysis.compile_boundaries import (
    KernelProxy,
    Log,
    OtherLayout,
    Patches,
    Recorder,
    guard_check,
    kernel_names,
    qualified_name,
    search,
    torch_parts,
    untraced,
)

__all__ = ["BOUNDARIES", "Layers", "Probe", "Row", "find_layers", "frame_code"]

# The chain, outermost first: key -> (layer, what the row between this boundary and the
# next one costs). "guards" is measured on the side and taken out of the first row.
BOUNDARIES: dict[str, tuple[str, str]] = {
    "compiled": ("Dynamo", "frame evaluation and cache lookup"),
    "guards": ("Dynamo", "guards"),
    "bytecode": ("Dynamo", "transformed bytecode"),
    "backend": ("Dynamo", "disable wrapper of the backend's function"),
    "aot": ("AOTAutograd", "runtime wrappers"),
    "autograd_function": ("AOTAutograd", "autograd Function"),
    "inductor": ("Inductor", "CompiledFxGraph call"),
    "module_call": ("Inductor", "compiled module call and launcher"),
    "kernels": ("Kernels", "kernels"),
}

@dataclass
class Probe:
    """One boundary: ``call()`` runs the callable a layer hands to the next, with the
    arguments it was handed in a real call. ``what`` names it for reports."""

    key: str
    call: Callable[[], Any]
    what: str


@dataclass
class Row:
    """One layer's part: its time is ``probes[plus] - sum(probes[minus])``."""

    layer: str
    part: str
    plus: str
    minus: tuple[str, ...]


@dataclass
class Layers:
    """The probes of one compiled call, outermost first, and the rows they make; or,
    when this torch's layout is not the one described above, ``reason`` and nothing else."""

    probes: dict[str, Probe] = field(default_factory=dict)
    rows: list[Row] = field(default_factory=list)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return self.reason is None


def frame_code(fn: Any) -> types.CodeType:
    """The code object whose frame Dynamo compiles for a call of ``fn``: a function's
    own, a bound method's function's, an ``nn.Module``'s ``forward``."""
    target = inspect.unwrap(fn) if isinstance(fn, types.FunctionType) else fn
    if isinstance(target, types.MethodType):
        target = target.__func__
    if isinstance(target, types.FunctionType):
        return target.__code__
    forward = getattr(type(target), "forward", None)
    if isinstance(forward, types.FunctionType):
        return forward.__code__
    raise TypeError(f"cannot tell which code torch.compile compiles for a {type(fn).__name__}: "
                    "pass a Python function, a bound method or an nn.Module")


def _frame_function(fn: Any) -> tuple[Any, tuple[Any, ...]]:
    """The function whose frame runs, and the leading arguments bound before the user's
    (``self`` for a method or a module's ``forward``)."""
    if isinstance(fn, types.MethodType):
        return fn.__func__, (fn.__self__,)
    if isinstance(fn, types.FunctionType):
        return inspect.unwrap(fn), ()  # type: ignore[return-value]
    return type(fn).forward, (fn,)


def _replay(calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]]) -> Callable[[], Any]:
    if len(calls) == 1:
        target, args, kwargs = calls[0]
        return functools.partial(target, *args, **kwargs)

    def kernels() -> None:
        for target, args, kwargs in calls:
            target(*args, **kwargs)

    return kernels


def _boxed(fn: Any, inputs: list[Any]) -> Callable[[], Any]:
    # Inductor's boxed convention empties the list it is given: a fresh copy per call,
    # as AOTAutograd builds one per call.
    def boxed() -> Any:
        return fn(list(inputs))

    return boxed


def find_layers(compiled: Callable[..., Any], fn: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Layers:
    """The probes of ``compiled(*args, **kwargs)`` (``compiled = torch.compile(fn)``, warm:
    called at least once with these arguments), or a ``Layers`` whose ``reason`` says
    why this torch's layout could not be followed. Calls ``compiled`` once more."""
    import torch

    try:
        return _find(torch, compiled, fn, args, kwargs)
    except OtherLayout as e:
        return Layers(reason=str(e))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        # An object shaped otherwise than this module expects: a layout it does not
        # know (the patches are undone by then), reported rather than guessed around.
        return Layers(reason=f"this torch's objects are laid out differently "
                             f"({type(e).__name__}: {e})")


@dataclass
class _Backend:
    """The backend's compiled function one call ran (a ``__compiled_fn_*`` frame global),
    its cache entry, the arguments it was handed and AOTAutograd's callable inside it."""

    name: str
    entry: Any
    fn: Any
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    aot: Any


def _find(torch: Any, compiled: Callable[..., Any], fn: Any, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Layers:
    cache_entries, graph_cls = torch_parts()
    code = frame_code(fn)
    function, leading = _frame_function(fn)
    backend = _backend(torch, compiled, args, kwargs, code, cache_entries(code),
                       function.__globals__)
    functions, graphs = search(backend.aot, torch, graph_cls)
    if not graphs:
        raise OtherLayout("no CompiledFxGraph is reachable from the backend's function (not the "
                          "Inductor backend, or AOTAutograd/Inductor laid out differently)")
    log = _record_inner(compiled, args, kwargs, functions, graphs)
    layers = Layers()
    _outer_probes(layers, compiled, args, kwargs, function, leading, backend)
    _inner_probes(layers, log)
    layers.rows = _rows(layers.probes)
    return layers


def _backend(torch: Any, compiled: Callable[..., Any], args: tuple[Any, ...],
             kwargs: dict[str, Any], code: types.CodeType, entries: list[Any],
             frame_globals: dict[str, Any]) -> _Backend:
    """Calls ``compiled`` once with each cache entry's backend function recorded: the one
    the call ran."""
    if not entries:
        raise OtherLayout(f"no Dynamo cache entry on {code.co_name}'s code after a call: the "
                          "frame was not compiled (skipped by Dynamo, or compiled under another "
                          "code object)")
    backends = {}
    for entry in entries:
        names = [n for n in entry.code.co_names if n.startswith("__compiled_fn")]
        if len(names) != 1 or names[0] not in frame_globals:
            raise OtherLayout(f"a cache entry's transformed code names {len(names)} "
                              "__compiled_fn globals in the frame's globals (expected one: a "
                              "graph break, or another layout)")
        backends[names[0]] = entry
    log = Log()
    with Patches() as patches:
        for name in backends:
            patches.setitem(frame_globals, name, untraced(
                torch, Recorder(name, frame_globals[name], log)))
        compiled(*args, **kwargs)
    hit = [name for name in backends if name in log.calls]
    if len(hit) != 1 or len(log.calls[hit[0]]) != 1:
        raise OtherLayout(f"a call ran {len(hit)} cache entries' compiled functions "
                          "(expected one)")
    backend_fn = frame_globals[hit[0]]
    _, backend_args, backend_kwargs = log.calls[hit[0]][0]
    aot = getattr(backend_fn, "_torchdynamo_orig_callable", None)
    if aot is None:
        raise OtherLayout("the backend's compiled function has no _torchdynamo_orig_callable "
                          "(Dynamo's disable wrapper is laid out differently)")
    return _Backend(hit[0], backends[hit[0]], backend_fn, backend_args, backend_kwargs, aot)


def _record_inner(compiled: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                  functions: list[type], graphs: list[Any]) -> Log:
    """One real call with every boundary inside the backend's function recorded."""
    log = Log()
    launchers = {id(g): kernel_names(g.current_callable) for g in graphs}
    with Patches() as patches:
        for cls in functions:
            forward = vars(cls).get("forward")
            if isinstance(forward, staticmethod):
                # autograd's apply looks `forward` up on the class at each call; the
                # arguments it hands forward (after ctx) are apply's own.
                patches.setattr(cls, "forward", staticmethod(Recorder(
                    "autograd_function", forward.__func__, log, owner=cls, drop_first=True)))
        for graph_type in {type(g) for g in graphs}:
            original = graph_type.__call__

            def recorded(self: Any, inputs: Any, _original: Any = original) -> Any:
                log.add("inductor", self, (list(inputs),), {})
                return _original(self, inputs)

            patches.setattr(graph_type, "__call__", recorded)
        for graph in graphs:
            call = graph.current_callable
            module_globals = getattr(call, "__func__", call).__globals__
            patches.setattr(graph, "current_callable", Recorder("module_call", call, log))
            for name in launchers[id(graph)]:
                patches.setitem(module_globals, name,
                                KernelProxy(module_globals[name], name, log))
        compiled(*args, **kwargs)
    for key in ("inductor", "module_call"):
        if len(log.calls.get(key, ())) != 1:
            raise OtherLayout(f"a call went through {len(log.calls.get(key, ()))} {key} "
                              "boundaries (the split follows one compiled graph per call)")
    if len(log.calls.get("autograd_function", ())) > 1:
        raise OtherLayout("a call ran more than one autograd Function")
    if not log.calls.get("kernels"):
        raise OtherLayout("the compiled module's call launched no kernel this split recognises "
                          "(async_compile kernels, extern_kernels, aten)")
    return log


def _outer_probes(layers: Layers, compiled: Callable[..., Any], args: tuple[Any, ...],
                  kwargs: dict[str, Any], function: Any, leading: tuple[Any, ...],
                  backend: _Backend) -> None:
    """The probes down to AOTAutograd: the compiled function, its guards and transformed
    bytecode (each when it can be reproduced), the backend's function."""
    layers.probes["compiled"] = Probe("compiled", functools.partial(compiled, *args, **kwargs),
                                      "the torch.compile'd function")
    guard = guard_check(backend.entry)
    f_locals = _frame_locals(function, leading + tuple(args), kwargs)
    if guard is not None and f_locals is not None and guard[0](f_locals):
        layers.probes["guards"] = Probe("guards", functools.partial(guard[0], f_locals),
                                        f"cache entry's {guard[1]}")
    else:
        layers.notes.append("guards not timed apart: the cache entry's guard check could not "
                            "be reproduced on the call's arguments")
    bytecode = _transformed(function, backend.entry.code)
    if bytecode is not None:
        layers.probes["bytecode"] = Probe(
            "bytecode", functools.partial(bytecode, *leading, *args, **kwargs),
            "the cache entry's transformed bytecode")
    else:
        layers.notes.append("the transformed bytecode's closure differs from the function's: "
                            "timed with frame evaluation")
    layers.probes["backend"] = Probe(
        "backend", functools.partial(backend.fn, *backend.args, **backend.kwargs),
        f"{backend.name} (Dynamo's disable wrapper)")
    layers.probes["aot"] = Probe(
        "aot", functools.partial(backend.aot, *backend.args, **backend.kwargs),
        qualified_name(backend.aot))


def _inner_probes(layers: Layers, log: Log) -> None:
    """The probes from the autograd Function down to the kernels, with the arguments the
    recorded call handed each."""
    if log.calls.get("autograd_function"):
        cls, fargs, fkwargs = log.calls["autograd_function"][0]
        layers.probes["autograd_function"] = Probe(
            "autograd_function", functools.partial(cls.apply, *fargs, **fkwargs),
            f"{qualified_name(cls)}.apply")
    graph, (inputs,), _ = log.calls["inductor"][0]
    layers.probes["inductor"] = Probe("inductor", _boxed(graph, inputs),
                                      f"{type(graph).__name__}.__call__")
    call_target, (call_inputs,), _ = log.calls["module_call"][0]
    layers.probes["module_call"] = Probe("module_call", _boxed(call_target, call_inputs),
                                         f"generated module's {qualified_name(call_target)}")
    kernel_calls = [(t[0], a, k) for t, a, k in log.calls["kernels"]]
    layers.kernels = [t[1] for t, _, _ in log.calls["kernels"]]
    layers.probes["kernels"] = Probe("kernels", _replay(kernel_calls),
                                     ", ".join(layers.kernels))


def _frame_locals(function: types.FunctionType, args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> dict[str, Any] | None:
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


def _transformed(function: types.FunctionType, code: types.CodeType) -> Any:
    if code.co_freevars != function.__code__.co_freevars:
        return None
    return types.FunctionType(code, function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)


def _rows(probes: dict[str, Probe]) -> list[Row]:
    chain = [key for key in BOUNDARIES if key in probes and key != "guards"]
    rows = []
    for i, key in enumerate(chain):
        minus = tuple(chain[i + 1:i + 2])
        if key == "compiled" and "guards" in probes:
            minus += ("guards",)
        layer, part = BOUNDARIES[key]
        if key == "compiled" and "bytecode" not in probes:
            part += " (with the transformed bytecode)"
        if key == "compiled" and "guards" not in probes:
            part += " (with guards)"
        rows.append(Row(layer, part, key, minus))
        if key == "compiled" and "guards" in probes:
            rows.append(Row(*BOUNDARIES["guards"], "guards", ()))
    return rows
