"""``torch.utils.benchmark.utils._stubs``: the protocols torch's type hints name.

``TimerClass`` is what ``Timer`` drives (``timeit(number)``: opbench's
engines satisfy it), ``TimeitModuleType`` what ``cpp_jit.compile_timeit_template``
returns, ``CallgrindModuleType`` what ``cpp_jit.get_compat_bindings`` returns.

    >>> from opbench.utils._stubs import TimeitModuleType
    >>> from opbench.engines.python import PythonEngine
    >>> isinstance(PythonEngine("pass", "pass", lambda: 0.0, {}), TimeitModuleType)
    True
"""
from __future__ import annotations

from typing import Any, Callable, Protocol, runtime_checkable


class TimerClass(Protocol):
    """The part of ``timeit.Timer``'s interface that Timer uses."""

    def __init__(self, stmt: str, setup: str, timer: Callable[[], float],
                 globals: dict[str, Any], **kwargs: Any) -> None: ...

    def timeit(self, number: int) -> float: ...


@runtime_checkable
class TimeitModuleType(Protocol):
    """A compiled C++ statement: ``timeit(number)`` returns seconds for ``number`` runs."""

    def timeit(self, number: int) -> float: ...


class CallgrindModuleType(Protocol):
    """The valgrind client requests torch binds (``torch._C._valgrind_*``)."""

    __file__: str
    __name__: str

    def _valgrind_supported_platform(self) -> bool: ...

    def _valgrind_toggle(self) -> None: ...

    def _valgrind_toggle_and_dump_stats(self) -> None: ...
