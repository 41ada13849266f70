"""opbench.utils._stubs: the protocols torch's type hints name, met by opbench's objects."""
from __future__ import annotations

from opbench.engines.python import PythonEngine
from opbench.utils import cpp_jit
from opbench.utils._stubs import CallgrindModuleType, TimeitModuleType, TimerClass


def test_engines_are_timeit_modules_and_others_are_not() -> None:
    assert isinstance(PythonEngine("pass", "pass", lambda: 0.0, {}), TimeitModuleType)
    assert not isinstance(object(), TimeitModuleType)


def test_the_compat_bindings_have_the_callgrind_module_shape() -> None:
    bindings = cpp_jit.get_compat_bindings()
    members = {n for n in dir(CallgrindModuleType) if n.startswith("_valgrind")}
    assert members == {"_valgrind_supported_platform", "_valgrind_toggle",
                       "_valgrind_toggle_and_dump_stats"}
    assert all(callable(getattr(bindings, n)) for n in members)
    assert "timeit" in dir(TimerClass)
