"""The Python engine: a Python string or callable run `number` times between two clock reads.

``PythonEngine`` is opbench's default ``Timer._timer_cls``: the same protocol
as ``timeit.Timer`` (``__init__(stmt, setup, timer, globals)`` and
``timeit(number) -> seconds``), which is what torch's tests inject mocks
through. Three paths, each the cheapest harness for its kind of statement:

* a callable implemented in C (builtins, pybind11 and torch functions, bound
  C methods) runs in the native loop (``_C.time_call``): vectorcall from C,
  no Python loop, native clock reads;
* a Python function (or bound method) is called from an unrolled Python loop
  (``_call_unrolled``). On CPython 3.11+ a call made by the interpreter's own
  loop does not re-enter the interpreter, while a call from C does
  (``benchmarks/overhead.py`` measures both loops against torch's
  ``Timer("f()")``);
* a string is compiled into timeit's template, the statement inlined in a
  Python ``for`` loop, so its cost is the statement and one loop iteration.

Setup runs before each ``timeit`` call, as in ``timeit`` and torch.
"""
from __future__ import annotations

import itertools
import linecache
import sys
import time
import types
from collections.abc import Callable
from typing import Any

from opbench import _C
from opbench.engines import Engine

# Not timeit's private template: our own, with the same shape, so the cost
# per iteration is one FOR_ITER plus the statement.
_TEMPLATE = """
def inner(_it, _timer{init}):
{setup}
    _t0 = _timer()
    for _i in _it:
{stmt}
        pass
    _t1 = _timer()
    return _t1 - _t0
"""


# Calls per iteration of the unrolled loop: enough that the loop's own
# FOR_ITER is noise against the calls (measured: 8 -> 0.84x, 32 -> 0.81x).
_UNROLL = 16
_UNROLLED_SOURCE = f"""
def call_unrolled(_blocks, _timer, _f, _rest):
    _t0 = _timer()
    for _i in _blocks:
        {"; ".join(["_f()"] * _UNROLL)}
    for _i in _rest:
        _f()
    _t1 = _timer()
    return _t1 - _t0
"""
_namespace: dict[str, Any] = {}
exec(compile(_UNROLLED_SOURCE, "<opbench-unrolled-loop>", "exec"), _namespace)
_call_unrolled: Callable[..., float] = _namespace["call_unrolled"]


def is_python_code(fn: Any) -> bool:
    """A function or bound method whose body is Python bytecode."""
    return isinstance(getattr(fn, "__func__", fn), types.FunctionType)


def _indent(src: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in src.split("\n"))


def check_syntax(src: str, what: str) -> types.CodeType:
    """Compiles ``src`` alone so a SyntaxError names ``what`` and points at its own
    line; returns the code object."""
    return compile(src, f"<{what}>", "exec")


def accelerator_sync() -> Callable[[], None] | None:
    """The device synchronize the default timer needs, or None when there is nothing to sync.

    torch's default timer synchronizes the accelerator around every clock
    read when one is available. We do the same, but only once torch is
    imported: a process that never imported torch cannot have queued device
    work, and checking costs nothing then.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and accelerator.is_available():
        return accelerator.synchronize
    return None


def default_timer() -> float:
    """The default clock: synchronizes the accelerator (if torch uses one), then reads
    a monotonic clock. Seconds, as ``timeit.default_timer``."""
    sync = accelerator_sync()
    if sync is not None:
        sync()
    return time.perf_counter()


class PythonEngine(Engine):
    """Runs ``stmt`` (source or zero-argument callable) ``number`` times per ``timeit`` call."""

    def __init__(
        self,
        stmt: str | Callable[[], Any],
        setup: str | Callable[[], Any],
        timer: Callable[[], float],
        globals: dict[str, Any],
    ) -> None:
        self._timer = timer
        self._globals = globals
        self._setup_fn = setup if callable(setup) else None
        if callable(stmt):
            self._stmt_fn: Callable[[], Any] | None = stmt
            self._inner = None
            if not callable(setup):
                self._setup_code = check_syntax(setup, "setup")
            return
        self._stmt_fn = None
        self._stmt_src = stmt
        self._setup_src = setup if isinstance(setup, str) else ""
        self._inner = self._compile_template(stmt, setup)

    def _compile_template(self, stmt: str, setup: str | Callable[[], Any]) -> Callable[..., float]:
        check_syntax(stmt, "stmt")
        init = ""
        if callable(setup):
            init, setup = ", _setup=_setup", "_setup()"
        else:
            check_syntax(setup, "setup")
        src = _TEMPLATE.format(stmt=_indent(stmt, 8), setup=_indent(setup, 4), init=init)
        # A unique file name registered with linecache: a traceback from inside
        # the timed statement shows the statement's own source line.
        filename = f"<opbench-timer-{id(self):x}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        local_ns: dict[str, Any] = {}
        namespace = dict(self._globals)
        if init:
            namespace["_setup"] = self._setup_fn
        exec(compile(src, filename, "exec"), namespace, local_ns)
        return local_ns["inner"]

    def _run_setup(self) -> None:
        if self._setup_fn is not None:
            self._setup_fn()
        else:
            exec(self._setup_code, self._globals)

    def timeit(self, number: int) -> float:
        """Seconds taken by ``number`` runs (``number`` >= 0), setup excluded."""
        if self._inner is not None:
            return self._inner(itertools.repeat(None, number), self._timer)
        self._run_setup()
        fn = self._stmt_fn
        assert fn is not None  # a string statement ran in the template above
        if self._timer is default_timer and not is_python_code(fn):
            # The native loop: C clock reads, vectorcall, no Python loop.
            return _C.time_call(fn, number, accelerator_sync())
        blocks, rest = divmod(number, _UNROLL)
        return _call_unrolled(
            itertools.repeat(None, blocks), self._timer, fn, itertools.repeat(None, rest)
        )

    def as_callable(self) -> Callable[[], Any]:
        """The statement as a zero-argument callable, setup run once (now), for
        loops that drive the calls themselves (device timers, profilers)."""
        if self._stmt_fn is not None:
            self._run_setup()
            return self._stmt_fn
        namespace = dict(self._globals)
        if self._setup_fn is not None:
            self._setup_fn()
        else:
            exec(compile(self._setup_src, "<setup>", "exec"), namespace)
        # Module-level code run as a function body: names resolve in (and
        # assignments go to) `namespace`, so `x += 1` works as in the template.
        return types.FunctionType(compile(self._stmt_src, "<stmt>", "exec"), namespace)
