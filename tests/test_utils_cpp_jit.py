"""opbench.utils.cpp_jit: torch's names for compiling C++ statements, on opbench's C++ engine."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from opbench.engines.cpp.engine import CFLAGS
from opbench.errors import Error, UnsupportedError
from opbench.utils import cpp_jit
from opbench.utils._stubs import TimeitModuleType


def test_the_constants_say_how_statements_are_compiled() -> None:
    assert cpp_jit.CXX_FLAGS is not None and set(CFLAGS) <= set(cpp_jit.CXX_FLAGS)
    assert os.path.isfile(os.path.join(cpp_jit.SOURCE_ROOT, "timer.cpp"))
    assert os.path.isfile(os.path.join(cpp_jit.EXTRA_INCLUDE_PATHS[0], "opbench", "opbench.h"))
    assert cpp_jit.CONDA_PREFIX == os.getenv("CONDA_PREFIX")
    with cpp_jit.LOCK:  # a lock, as torch's
        pass


def test_compat_bindings_are_built_once_and_are_no_ops_outside_valgrind() -> None:
    bindings = cpp_jit.get_compat_bindings()
    assert cpp_jit.get_compat_bindings() is bindings is cpp_jit.COMPAT_CALLGRIND_BINDINGS
    assert isinstance(bindings._valgrind_supported_platform(), bool)
    bindings._valgrind_toggle()
    bindings._valgrind_toggle_and_dump_stats()


def test_the_callgrind_executable_is_refused_with_what_to_use() -> None:
    with pytest.raises(UnsupportedError, match="collect_callgrind") as info:
        cpp_jit.compile_callgrind_template(stmt="", setup="", global_setup="")
    assert isinstance(info.value, Error) and isinstance(info.value, NotImplementedError)


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("g++") and not shutil.which("c++"), reason="no C++ compiler")
def test_a_compiled_template_times_as_torchs_module_does(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path))
    module = cpp_jit.compile_timeit_template(
        stmt="v.push_back(1);", setup="std::vector<int> v;", global_setup="#include <vector>")
    assert isinstance(module, TimeitModuleType)
    assert module.timeit(1000) > 0 and module.timeit(0) >= 0
