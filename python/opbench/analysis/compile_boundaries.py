"""The boundaries between a compiled call's layers, in the running torch's objects.

``opbench.analysis.compile_layers`` follows a warm ``torch.compile``'d call down its
chain of callables (Dynamo, AOTAutograd, Inductor, kernels). This module holds the two
means it has: the *search* that finds each layer's callable among the objects torch
holds (cache entries, guard managers, closures of the backend's function, the
generated module's globals), bounded to a fixed number of objects, and the
*recorders* installed at each boundary for one real call, which note the arguments
each layer hands the next, every patch undone afterwards. Where this torch lays the
chain out otherwise, ``OtherLayout`` says how.
"""
from __future__ import annotations

import ast
import functools
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["KernelProxy", "Log", "OtherLayout", "Patches", "Recorder", "function_apply",
           "guard_check", "kernel_names", "qualified_name", "search", "torch_parts", "untraced"]

_SEARCH_LIMIT = 20000  # objects visited looking for a boundary inside the backend's function


class OtherLayout(Exception):
    """This torch lays the chain out differently: the message says how."""

# -- recorders ------------------------------------------------------------------

class Log:
    def __init__(self) -> None:
        self.calls: dict[str, list[tuple[Any, tuple[Any, ...], dict[str, Any]]]] = {}

    def add(self, key: str, target: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self.calls.setdefault(key, []).append((target, args, kwargs))


class Recorder:
    """Calls ``target``, first noting the arguments (lists copied: Inductor's boxed
    calling convention empties the list it is handed)."""

    def __init__(self, key: str, target: Any, log: Log, *, owner: Any = None,
                 drop_first: bool = False) -> None:
        self._key, self._target, self._log, self._drop = key, target, log, drop_first
        self._owner = target if owner is None else owner  # what the log names as called

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        kept = tuple(list(a) if isinstance(a, list) else a for a in args)
        self._log.add(self._key, self._owner, kept[1:] if self._drop else kept, kwargs)
        return self._target(*args, **kwargs)


def untraced(torch: Any, recorder: Recorder) -> Callable[..., Any]:
    """The recorder as a function Dynamo does not trace: the transformed bytecode calls
    it with the frame-evaluation callback set, and a traced recorder would be compiled
    (a graph of its own, and recompiled for the next setting)."""
    def record(*args: Any, **kwargs: Any) -> Any:
        return recorder(*args, **kwargs)

    return torch._dynamo.disable(record)  # type: ignore[no-any-return]


class KernelProxy:
    """Stands for a kernel (or a namespace of them: ``extern_kernels``, ``aten``) in the
    generated module's globals: attribute chains are followed, each call recorded."""

    def __init__(self, target: Any, name: str, log: Log) -> None:
        self._target, self.qualified_name, self._log = target, name, log

    def __getattr__(self, attr: str) -> Any:
        return KernelProxy(getattr(self._target, attr), f"{self.qualified_name}.{attr}", self._log)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self._log.add("kernels", (self._target, self.qualified_name), args, kwargs)
        return self._target(*args, **kwargs)


class Patches:
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

    def __enter__(self) -> Patches:
        return self

    def __exit__(self, *exc: object) -> None:
        while self._undo:
            self._undo.pop()()

# -- finding the boundaries --------------------------------------------------------

def torch_parts() -> tuple[Callable[[types.CodeType], list[Any]], type]:
    try:
        from torch._C._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError as e:
        raise OtherLayout("this torch has no torch._C._dynamo.eval_frame._debug_get_cache_entry_list "
                    "(Dynamo's cache entries cannot be read)") from e
    graph_cls = None
    for where in ("torch._inductor.output_code", "torch._inductor.codecache"):
        module = sys.modules.get(where) or _import(where)
        graph_cls = getattr(module, "CompiledFxGraph", None)
        if graph_cls is not None:
            break
    if graph_cls is None:
        raise OtherLayout("this torch has no CompiledFxGraph in torch._inductor.output_code or "
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


def _function_children(fn: types.FunctionType) -> Iterator[Any]:
    """What a function holds: its closure, what it wraps, and its globals when they are
    its own (generated code's) rather than a whole module's."""
    for cell in fn.__closure__ or ():
        try:
            yield cell.cell_contents
        except ValueError:  # an empty cell
            pass
    for name in ("__wrapped__", "_torchdynamo_orig_callable"):
        if name in vars(fn):
            yield vars(fn)[name]
    if not _module_globals(fn.__globals__):  # generated code gets its own globals
        yield from fn.__globals__.values()


def _children(obj: Any, torch: Any) -> Iterator[Any]:
    """The objects the search goes on to from ``obj``."""
    if isinstance(obj, (torch.Tensor, torch.nn.Module, types.ModuleType, str, bytes, int, float)):
        return
    if isinstance(obj, types.FunctionType):
        yield from _function_children(obj)
    elif isinstance(obj, types.MethodType):
        yield obj.__self__
        yield obj.__func__
    elif function_apply(obj, torch) is not None:
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


def function_apply(obj: Any, torch: Any) -> type | None:
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


def search(root: Any, torch: Any, graph_cls: type) -> tuple[list[type], list[Any]]:
    """The autograd Function subclasses (reached through their bound ``apply``) and the
    CompiledFxGraph objects reachable from ``root``."""
    seen: set[int] = set()
    stack, functions, graphs = [root], [], []
    while stack and len(seen) < _SEARCH_LIMIT:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        cls = function_apply(obj, torch)
        if cls is not None and cls not in functions:
            functions.append(cls)
        if isinstance(obj, graph_cls):
            graphs.append(obj)
            continue  # its insides are Inductor's, found from current_callable
        stack.extend(_children(obj, torch))
    return functions, graphs


def kernel_names(call: Any) -> list[str]:
    """Names in the generated module's globals that ``call`` launches kernels through:
    those assigned from ``async_compile.*(...)`` in the module's source, and the ATen
    namespaces ``extern_kernels`` and ``aten``."""
    func = getattr(call, "__func__", call)
    g = getattr(func, "__globals__", None)
    if g is None or not g.get("__file__"):
        raise OtherLayout("Inductor's compiled callable is not a function of a generated module "
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

def qualified_name(obj: Any) -> str:
    obj = getattr(obj, "__func__", obj)
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', type(obj).__name__)}"


def guard_check(entry: Any) -> tuple[Callable[[Any], Any], str] | None:
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
