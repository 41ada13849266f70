"""Benchmark identity: which results are "the same benchmark", in every file, sweep and gate.

One definition, used by results files (collisions, merged saves), sweeps (what
a resumed sweep skips), the regression gate and the pytest plugin (what is
matched across runs), ``opbench show`` (one cell per benchmark):

* ``key(result)``: the benchmark's name across runs. The first of its
  ``name=``; its Compare coordinates (label, sub_label, description) when any
  is set; its statement. Then the thread count (when not 1), the env (when
  set) and the clock (when not torch's default host clock): the same code
  under other conditions, or timed by another clock (CUDA events, a CUDA
  graph), is another benchmark, never compared with a host-clock baseline.
* ``same_code(a, b)``: whether two results under one key measured one
  statement (same code, same kind of result, same callable's definition):
  replicates pool; different statements under one key are an error.
* ``sweep_keys(timers)``: each sweep task's key in its results file:
  a hash of the TaskSpec, the clock and device settings, and the identity of
  every global (shape, dtype and content of a tensor, not only its name), so
  a resumed sweep skips exactly the tasks already measured.
* ``callable_name(fn)`` / ``callable_source(fn)``: how a callable is known
  across runs (module-qualified name, never a repr with addresses) and where
  it is defined (tells two lambdas of one test apart).
* ``pytest_key(node_id, name, index)``: the key the pytest fixture gives.

Example:
    >>> from opbench.core.measurement import Measurement, TaskSpec
    >>> host = Measurement(1, [1e-6], TaskSpec("f()", "pass", name="f"))
    >>> device = Measurement(1, [1e-6], TaskSpec("f()", "pass", name="f"), clock="cuda-events")
    >>> key(host), key(device)
    ('f', 'f | clock=cuda-events')
"""
from __future__ import annotations

import functools
import hashlib
import json
import pickle
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["callable_name", "callable_source", "describe_callable", "key", "pytest_key",
           "same_code", "source_file", "spec_key", "sweep_keys", "value_identity"]

# Timer arguments beyond the TaskSpec that decide what a measurement's figures mean.
_TIMING_KWARGS = ("device_timing", "l2_cache", "layouts", "setup_per_block", "language")


def spec_key(spec: Any) -> str:
    """The key of a TaskSpec alone (``TaskSpec.key``): name, else coordinates, else the
    statement; then threads and env."""
    coordinates = [c for c in (spec.label, spec.sub_label, spec.description) if c]
    parts = [spec.name] if spec.name else coordinates or [" ".join(spec.stmt.split())]
    if spec.num_threads != 1:
        parts.append(f"{spec.num_threads} threads")
    if spec.env:
        parts.append(f"env={spec.env}")
    return " | ".join(parts)


def key(result: Any) -> str:
    """A result's benchmark key: ``spec_key`` plus its clock when it is not torch's
    default (``Measurement.clock``; instruction counts have none)."""
    clock = getattr(result, "clock", None)
    base = spec_key(result.task_spec)
    return f"{base} | clock={clock}" if clock else base


def same_code(a: Any, b: Any) -> bool:
    """Whether two results under one key measured the same statement (they pool)."""
    return _code(a) == _code(b)


def _code(r: Any) -> tuple[Any, ...]:
    spec = r.task_spec
    return (spec.stmt, spec.setup, spec.global_setup, r.info.get("source"), type(r).__name__)


def pytest_key(node_id: str, name: str | None, index: int) -> str:
    """The pytest fixture's key: ``node::name`` when named, else the node id for the
    test's first benchmark and ``node#1``, ``node#2``... for later ones."""
    if name is not None:
        return f"{node_id}::{name}"
    return node_id if index == 0 else f"{node_id}#{index}"


# -- callables ------------------------------------------------------------------------

def _target(fn: Callable[..., Any]) -> Any:
    """What a callable runs: the function of a partial or a bound method, else itself."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__func__", fn)


def _qualname(fn: Callable[..., Any]) -> str:
    target = _target(fn)
    if not hasattr(target, "__qualname__"):  # an instance with __call__: its class
        target = type(target)
    return str(getattr(target, "__qualname__", None) or getattr(target, "__name__", "callable"))


def describe_callable(fn: Callable[..., Any]) -> str:
    """``f()``, ``Model.forward()``, ``partial(f)()``: the text a callable stands for in
    results. Never a repr: those hold memory addresses and argument values."""
    name = _qualname(fn).rpartition("<locals>.")[2]
    return f"partial({name})()" if isinstance(fn, functools.partial) else f"{name}()"


def callable_name(fn: Callable[..., Any]) -> str:
    """The module-qualified name a callable is known by across runs (``pkg.mod.f``,
    ``tests.test_x.test_sort.<locals>.<lambda>``): stable, unlike its repr."""
    target = _target(fn)
    module = getattr(target, "__module__", None) or getattr(type(target), "__module__", "")
    name = f"{module}.{_qualname(fn)}" if module else _qualname(fn)
    return f"partial({name})" if isinstance(fn, functools.partial) else name


def callable_source(fn: Callable[..., Any]) -> str | None:
    """Where a Python callable is defined (``file.py:LINE``), plus a partial's argument
    kinds: tells apart two callables with one name (two lambdas in one test). The file
    is named relative to the project (``source_file``): a results file records no
    folder of the machine it was measured on."""
    code = getattr(_target(fn), "__code__", None)
    if code is None:
        return None
    where = f"{source_file(code.co_filename)}:{code.co_firstlineno}"
    if isinstance(fn, functools.partial):
        simple = (int, float, str, bool, type(None))
        args = [repr(a) if isinstance(a, simple) else type(a).__name__
                for a in (*fn.args, *fn.keywords.values())]
        where += f" partial({', '.join([*args[:len(fn.args)], *fn.keywords])})"
    return where


def source_file(filename: str) -> str:
    """``filename`` (a code object's) relative to the project root
    (``environment.project_root``: where the benchmarks' repository is), else to the
    ``sys.path`` folder it was imported from (``torch/nn/modules/linear.py``), else its
    name alone; a name that is no path (``<stdin>``) as it is.

    >>> import os
    >>> source_file(os.path.join(os.getcwd(), "bench", "test_sort.py"))
    'bench/test_sort.py'
    """
    import os
    import sys

    from opbench.environment import project_root

    if not os.path.isabs(filename):
        return filename
    path = os.path.normpath(filename)
    bases = sorted({os.path.abspath(p) for p in sys.path if p}, key=len, reverse=True)
    for base in (str(project_root()), *bases):
        if path.startswith(base.rstrip(os.sep) + os.sep):
            return os.path.relpath(path, base).replace(os.sep, "/")
    return os.path.basename(path)


# -- sweeps ---------------------------------------------------------------------------

def value_identity(value: Any) -> str:
    """A global's identity, the same in every process for the same value: its type, a
    tensor's shape, dtype and device, and a digest of its content (pickled); a
    callable's name; else the type alone (a value that cannot be pickled)."""
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    if callable(value) and hasattr(_target(value), "__code__"):
        return f"{kind}:{callable_name(value)}@{callable_source(value)}"
    facts = [kind]
    for attr in ("shape", "dtype", "device"):
        if hasattr(value, attr):
            facts.append(f"{attr}={getattr(value, attr)}")
    try:
        facts.append(hashlib.sha256(_content(value)).hexdigest()[:16])
    except Exception:  # an open file, a lock: the type (and shape) is all there is
        pass
    return " ".join(facts)


def _content(value: Any) -> bytes:
    """A value's content as bytes: a tensor's elements (its pickle holds storage ids
    that differ between two equal tensors), else its pickle."""
    if all(hasattr(value, a) for a in ("data_ptr", "numel", "element_size", "detach")):
        import ctypes

        flat = value.detach().cpu().contiguous()
        return ctypes.string_at(flat.data_ptr(), flat.numel() * flat.element_size())
    return pickle.dumps(value, protocol=4)


def sweep_keys(timers: list[Any]) -> list[str]:
    """Each sweep task's key in its results file: a hash of its TaskSpec, its timing
    settings (clock, device timing, code layouts), every global's identity, and how
    many earlier timers of the sweep share all of that."""
    import collections

    seen: collections.Counter[str] = collections.Counter()
    keys = []
    for timer in timers:
        kwargs: Mapping[str, Any] = timer.kwargs
        settings = {k: repr(kwargs.get(k)) for k in _TIMING_KWARGS
                    if kwargs.get(k) is not None}
        globals_ = {name: value_identity(v)
                    for name, v in sorted((kwargs.get("globals") or {}).items())}
        text = json.dumps({"spec": timer.task_spec.to_dict(), "settings": settings,
                           "globals": globals_}, sort_keys=True)
        seen[text] += 1
        keys.append(hashlib.sha256(f"{text}#{seen[text]}".encode()).hexdigest()[:20])
    return keys
