"""``torch.utils.benchmark.utils.cpp_jit``: C++ statements compiled for timing.

torch compiles a C++ Timer's statement into an extension module here;
opbench compiles it into a library that its C++ engine drives
(``opbench.engines.cpp``), cached on disk by content. The names are torch's:

* ``compile_timeit_template(stmt=..., setup=..., global_setup=...)`` returns an
  object whose ``timeit(number)`` runs setup and one warm-up run, then times
  ``number`` runs (seconds), as torch's module does;
* ``get_compat_bindings()`` returns the valgrind client requests under torch's
  names (``_valgrind_supported_platform``, ``_valgrind_toggle``,
  ``_valgrind_toggle_and_dump_stats``);
* ``compile_callgrind_template`` raises ``UnsupportedError``: opbench counts a
  C++ statement's instructions in the library it times
  (``Timer(..., language="c++").collect_callgrind()``), not in an executable;
* ``CXX_FLAGS``, ``EXTRA_INCLUDE_PATHS`` and ``SOURCE_ROOT`` say what statements
  are compiled with and where the template is (read-only: the engine does not
  read them back, unlike torch's).

    >>> from opbench.utils import cpp_jit
    >>> "-O2" in cpp_jit.CXX_FLAGS
    True
"""
from __future__ import annotations

import os
import threading
from types import SimpleNamespace
from typing import Any

from opbench.engines.cpp import include_dir, template_path
from opbench.engines.cpp.engine import CFLAGS, CODE_PLACEMENT_FLAGS, CppEngine
from opbench.errors import UnsupportedError

LOCK = threading.Lock()
SOURCE_ROOT = os.path.dirname(template_path())
CXX_FLAGS: list[str] | None = [*CFLAGS, *CODE_PLACEMENT_FLAGS]
EXTRA_INCLUDE_PATHS: list[str] = [include_dir()]
CONDA_PREFIX = os.getenv("CONDA_PREFIX")
if CONDA_PREFIX is not None:
    EXTRA_INCLUDE_PATHS.append(os.path.join(CONDA_PREFIX, "include"))
COMPAT_CALLGRIND_BINDINGS: Any = None


def get_compat_bindings() -> Any:
    """The valgrind client requests, named as torch's ``torch._C._valgrind_*``."""
    global COMPAT_CALLGRIND_BINDINGS
    with LOCK:
        if COMPAT_CALLGRIND_BINDINGS is None:
            from opbench._C import callgrind

            def toggle_and_dump_stats() -> None:
                callgrind.toggle_collect()
                callgrind.dump_stats()

            COMPAT_CALLGRIND_BINDINGS = SimpleNamespace(
                __file__=__file__, __name__=f"{__name__}.callgrind_bindings",
                _valgrind_supported_platform=callgrind.available,
                _valgrind_toggle=callgrind.toggle_collect,
                _valgrind_toggle_and_dump_stats=toggle_and_dump_stats,
            )
        return COMPAT_CALLGRIND_BINDINGS


def compile_timeit_template(*, stmt: str, setup: str, global_setup: str) -> CppEngine:
    """The statement compiled now (or loaded from the cache); ``.timeit(number)`` times it.

    Raises:
        CompileError: the compiler rejected the code.
    """
    engine = CppEngine(stmt=stmt, setup=setup, global_setup=global_setup, setup_per_block=True)
    engine.prepare()
    return engine


def compile_callgrind_template(*, stmt: str, setup: str, global_setup: str) -> str:
    """torch's standalone callgrind executable, which opbench does not build.

    Raises:
        UnsupportedError: always; use ``Timer(stmt, setup, global_setup=...,
            language="c++").collect_callgrind(...)``.
    """
    raise UnsupportedError(
        "opbench builds no standalone callgrind executable for a C++ statement: count its "
        "instructions with Timer(stmt, setup, global_setup=..., language='c++')"
        ".collect_callgrind(number=...), which runs the library it times under valgrind")
