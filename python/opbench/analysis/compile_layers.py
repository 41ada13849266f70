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

import ast
import functools
import inspect
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

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

_SEARCH_LIMIT = 20000  # objects visited looking for a boundary inside the backend's function


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


class _Skip(Exception):
    """This torch lays the chain out differently: the message says how."""


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


# -- recorders ------------------------------------------------------------------

class _Log:
    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[Any, tuple[Any, ...], dict[str, Any]]]] = {}

    def add(self, key: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.calls.setdefault(key, []).append((target, args, kwargs))


class _Recorder:
    """Calls ``target``, first noting the arguments (lists copied: Inductor's boxed
    calling convention empties the list it is handed)."""

    def __init__(self, key: str, target: Any, log: _Log, *, owner: Any = None,
                 drop_first: bool = False) -> None:
        self._key, self._target, self._log, self._drop = key, target, log, drop_first
        self._owner = target if owner is None else owner  # what the log names as called

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kept = tuple(list(a) if isinstance(a, list) else a for a in args)
        self._log.add(self._key, self._owner, kept[1:] if self._drop else kept, kwargs)
        return self._target(*args, **kwargs)


def _untraced(torch: Any, recorder: _Recorder) -> Callable[..., Any]:
    """The recorder as a function Dynamo does not trace: the transformed bytecode calls
    it with the frame-evaluation callback set, and a traced recorder would be compiled
    (a graph of its own, and recompiled for the next setting)."""
    def record(*args: Any, **kwargs: Any) -> Any:
        return recorder(*args, **kwargs)

    return torch._dynamo.disable(record)  # type: ignore[no-any-return]


class _KernelProxy:
    """Stands for a kernel (or a namespace of them: ``extern_kernels``, ``aten``) in the
    generated module's globals: attribute chains are followed, each call recorded."""

    def __init__(self, target: Any, name: str, log: _Log) -> None:
        self._target, self._name, self._log = target, name, log

    def __getattr__(self, attr: str) -> Any:
        return _KernelProxy(getattr(self._target, attr), f"{self._name}.{attr}", self._log)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._log.add("kernels", (self._target, self._name), args, kwargs)
        return self._target(*args, **kwargs)


class _Patches:
    """Attribute and mapping patches, all undone on exit, in reverse order."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setitem(self, mapping: dict[str, Any], key: str, value: Any) -> None:
        old = mapping[key]
        mapping[key] = value
        self._undo.append(lambda: mapping.__setitem__(key, old))

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        had = name in vars(obj)
        old = vars(obj).get(name)
        setattr(obj, name, value)
        self._undo.append(lambda: setattr(obj, name, old) if had else delattr(obj, name))

    def __enter__(self) -> _Patches:
        return self

    def __exit__(self, *exc: object) -> None:
        while self._undo:
            self._undo.pop()()


# -- finding the boundaries --------------------------------------------------------

def _torch_parts() -> tuple[Callable[[types.CodeType], list[Any]], type]:
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError as e:
        raise _Skip("this torch has no torch._C._dynamo.eval_frame._debug_get_cache_entry_list "
                    "(Dynamo's cache entries cannot be read)") from e
    graph_cls = None
    for where in ("torch._inductor.output_code", "torch._inductor.codecache"):
        module = sys.modules.get(where) or _import(where)
        graph_cls = getattr(module, "CompiledFxGraph", None)
        if graph_cls is not None:
            break
    if graph_cls is None:
        raise _Skip("this torch has no CompiledFxGraph in torch._inductor.output_code or "
                    "torch._inductor.codecache (Inductor's compiled graph cannot be found)")
    return _debug_get_cache_entry_list, graph_cls


def _import(name: str) -> Any:
    try:
        return __import__(name, fromlist=["_"])
    except ImportError:
        return None


def _module_globals(g: dict[str, Any]) -> bool:
    """Whether a function's globals are a whole module's (not searched: too wide)."""
    module = sys.modules.get(g.get("__name__", ""))  # type: ignore[arg-type]
    return module is not None and getattr(module, "__dict__", None) is g


def _children(obj: Any, torch: Any) -> Iterator[Any]:
    if isinstance(obj, (torch.Tensor, torch.nn.Module, types.ModuleType, str, bytes, int, float)):
        return
    if isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                yield cell.cell_contents
            except ValueError:  # an empty cell
                pass
        for name in ("__wrapped__", "_torchdynamo_orig_callable"):
            if name in vars(obj):
                yield vars(obj)[name]
        if not _module_globals(obj.__globals__):  # generated code gets its own globals
            yield from obj.__globals__.values()
    elif isinstance(obj, types.MethodType):
        yield obj.__self__
        yield obj.__func__
    elif _function_apply(obj, torch) is not None:
        yield obj.__self__  # the autograd Function whose C apply this is
    elif isinstance(obj, functools.partial):
        yield obj.func
        yield from obj.args
        yield from obj.keywords.values()
    elif isinstance(obj, (staticmethod, classmethod)):
        yield obj.__func__
    elif isinstance(obj, type):
        if issubclass(obj, torch.autograd.Function):
            yield from vars(obj).values()
    elif isinstance(obj, (list, tuple, set, frozenset)):
        yield from list(obj)[:200]
    elif isinstance(obj, dict):
        yield from list(obj.values())[:200]
    elif type(obj).__module__.startswith("torch.") and hasattr(obj, "__dict__"):
        yield from vars(obj).values()


def _function_apply(obj: Any, torch: Any) -> type | None:
    """The autograd Function subclass when ``obj`` is its bound ``apply``: a Python
    classmethod (torch 2.13 and before) or the C ``_FunctionBase.apply`` bound to the
    class (torch 2.14 calls that directly); else None."""
    if not isinstance(obj, (types.MethodType, types.BuiltinMethodType)):
        return None
    owner = getattr(obj, "__self__", None)
    if (isinstance(owner, type) and issubclass(owner, torch.autograd.Function)
            and getattr(obj, "__name__", None) == "apply"):
        return owner
    return None


def _search(root: Any, torch: Any, graph_cls: type) -> tuple[list[type], list[Any]]:
    """The autograd Function subclasses (reached through their bound ``apply``) and the
    CompiledFxGraph objects reachable from ``root``."""
    seen: set[int] = set()
    stack, functions, graphs = [root], [], []
    while stack and len(seen) < _SEARCH_LIMIT:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        cls = _function_apply(obj, torch)
        if cls is not None and cls not in functions:
            functions.append(cls)
        if isinstance(obj, graph_cls):
            graphs.append(obj)
            continue  # its insides are Inductor's, found from current_callable
        stack.extend(_children(obj, torch))
    return functions, graphs


def _kernel_names(call: Any) -> list[str]:
    """Names in the generated module's globals that ``call`` launches kernels through:
    those assigned from ``async_compile.*(...)`` in the module's source, and the ATen
    namespaces ``extern_kernels`` and ``aten``."""
    func = getattr(call, "__func__", call)
    g = getattr(func, "__globals__", None)
    if g is None or not g.get("__file__"):
        raise _Skip("Inductor's compiled callable is not a function of a generated module "
                    f"with a source file ({type(call).__name__})")
    with open(g["__file__"], encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = []
    for node in tree.body:
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Attribute)
                and isinstance(node.value.func.value, ast.Name)
                and node.value.func.value.id == "async_compile"):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return [n for n in [*names, "extern_kernels", "aten"] if n in g]


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


def _name(obj: Any) -> str:
    obj = getattr(obj, "__func__", obj)
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def _guard_check(entry: Any) -> tuple[Callable[[Any], Any], str] | None:
    manager = getattr(entry, "guard_manager", None)
    if manager is not None:  # torch 2.3+: C++ guard managers; the C lookup runs root.check
        root = getattr(manager, "root", None)
        if root is not None and hasattr(root, "check"):
            return root.check, "guard_manager.root.check"
        if hasattr(manager, "check"):
            return manager.check, "guard_manager.check"
    check_fn = getattr(entry, "check_fn", None)
    if callable(check_fn):  # torch 2.1-2.2: a generated Python guard function
        return check_fn, "check_fn"
    return None


def find_layers(compiled: Callable[..., Any], fn: Any, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Layers:
    """The probes of ``compiled(*args, **kwargs)`` (``compiled = torch.compile(fn)``, warm:
    called at least once with these arguments), or a ``Layers`` whose ``reason`` says
    why this torch's layout could not be followed. Calls ``compiled`` once more."""
    import torch

    try:
        return _find(torch, compiled, fn, args, kwargs)
    except _Skip as e:
        return Layers(reason=str(e))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
        # An object shaped otherwise than this module expects: a layout it does not
        # know (the patches are undone by then), reported rather than guessed around.
        return Layers(reason=f"this torch's objects are laid out differently "
                             f"({type(e).__name__}: {e})")


def _find(torch: Any, compiled: Callable[..., Any], fn: Any, args: tuple[Any, ...],
          kwargs: dict[str, Any]) -> Layers:
    cache_entries, graph_cls = _torch_parts()
    code = frame_code(fn)
    function, leading = _frame_function(fn)
    frame_globals = function.__globals__
    entries = cache_entries(code)
    if not entries:
        raise _Skip(f"no Dynamo cache entry on {code.co_name}'s code after a call: the frame "
                    "was not compiled (skipped by Dynamo, or compiled under another code object)")
    backends = {}
    for entry in entries:
        names = [n for n in entry.code.co_names if n.startswith("__compiled_fn")]
        if len(names) != 1 or names[0] not in frame_globals:
            raise _Skip(f"a cache entry's transformed code names {len(names)} __compiled_fn "
                        "globals in the frame's globals (expected one: a graph break, or "
                        "another layout)")
        backends[names[0]] = entry

    log = _Log()
    with _Patches() as patches:
        for name in backends:
            patches.setitem(frame_globals, name, _untraced(
                torch, _Recorder(name, frame_globals[name], log)))
        compiled(*args, **kwargs)
    hit = [name for name in backends if name in log.calls]
    if len(hit) != 1 or len(log.calls[hit[0]]) != 1:
        raise _Skip(f"a call ran {len(hit)} cache entries' compiled functions (expected one)")
    backend_name = hit[0]
    entry = backends[backend_name]
    backend_fn = frame_globals[backend_name]
    _, backend_args, backend_kwargs = log.calls[backend_name][0]
    aot = getattr(backend_fn, "_torchdynamo_orig_callable", None)
    if aot is None:
        raise _Skip("the backend's compiled function has no _torchdynamo_orig_callable "
                    "(Dynamo's disable wrapper is laid out differently)")

    functions, graphs = _search(aot, torch, graph_cls)
    if not graphs:
        raise _Skip("no CompiledFxGraph is reachable from the backend's function (not the "
                    "Inductor backend, or AOTAutograd/Inductor laid out differently)")

    # One real call with every inner boundary recorded.
    log = _Log()
    kernel_names = {id(g): _kernel_names(g.current_callable) for g in graphs}
    with _Patches() as patches:
        for cls in functions:
            forward = vars(cls).get("forward")
            if isinstance(forward, staticmethod):
                # autograd's apply looks `forward` up on the class at each call; the
                # arguments it hands forward (after ctx) are apply's own.
                patches.setattr(cls, "forward", staticmethod(_Recorder(
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
            patches.setattr(graph, "current_callable", _Recorder("module_call", call, log))
            for name in kernel_names[id(graph)]:
                patches.setitem(module_globals, name,
                                _KernelProxy(module_globals[name], name, log))
        compiled(*args, **kwargs)

    for key in ("inductor", "module_call"):
        if len(log.calls.get(key, ())) != 1:
            raise _Skip(f"a call went through {len(log.calls.get(key, ()))} {key} boundaries "
                        "(the split follows one compiled graph per call)")
    if len(log.calls.get("autograd_function", ())) > 1:
        raise _Skip("a call ran more than one autograd Function")
    if not log.calls.get("kernels"):
        raise _Skip("the compiled module's call launched no kernel this split recognises "
                    "(async_compile kernels, extern_kernels, aten)")

    layers = Layers()
    layers.probes["compiled"] = Probe("compiled", functools.partial(compiled, *args, **kwargs),
                                      "the torch.compile'd function")
    guard = _guard_check(entry)
    f_locals = _frame_locals(function, leading + tuple(args), kwargs)
    if guard is not None and f_locals is not None and guard[0](f_locals):
        layers.probes["guards"] = Probe("guards", functools.partial(guard[0], f_locals),
                                        f"cache entry's {guard[1]}")
    else:
        layers.notes.append("guards not timed apart: the cache entry's guard check could not "
                            "be reproduced on the call's arguments")
    bytecode = _transformed(function, entry.code)
    if bytecode is not None:
        layers.probes["bytecode"] = Probe(
            "bytecode", functools.partial(bytecode, *leading, *args, **kwargs),
            "the cache entry's transformed bytecode")
    else:
        layers.notes.append("the transformed bytecode's closure differs from the function's: "
                            "timed with frame evaluation")
    layers.probes["backend"] = Probe(
        "backend", functools.partial(backend_fn, *backend_args, **backend_kwargs),
        f"{backend_name} (Dynamo's disable wrapper)")
    layers.probes["aot"] = Probe("aot", functools.partial(aot, *backend_args, **backend_kwargs),
                                 _name(aot))
    if log.calls.get("autograd_function"):
        cls, fargs, fkwargs = log.calls["autograd_function"][0]
        layers.probes["autograd_function"] = Probe(
            "autograd_function", functools.partial(cls.apply, *fargs, **fkwargs),
            f"{_name(cls)}.apply")
    graph, (inputs,), _ = log.calls["inductor"][0]
    layers.probes["inductor"] = Probe("inductor", _boxed(graph, inputs),
                                      f"{type(graph).__name__}.__call__")
    call_target, (call_inputs,), _ = log.calls["module_call"][0]
    layers.probes["module_call"] = Probe("module_call", _boxed(call_target, call_inputs),
                                         f"generated module's {_name(call_target)}")
    kernel_calls = [(t[0], a, k) for t, a, k in log.calls["kernels"]]
    layers.kernels = [t[1] for t, _, _ in log.calls["kernels"]]
    layers.probes["kernels"] = Probe("kernels", _replay(kernel_calls),
                                     ", ".join(layers.kernels))
    layers.rows = _rows(layers.probes)
    return layers


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
