"""C++ side of opbench: the header-only timing library and C++ Timers.

``include_dir()`` is the directory to add to a compiler's include path
(``-I``, ``load_inline(extra_include_paths=[...])``, CMake's
``target_include_directories``) so that ``#include "opbench/opbench.h"``
works::

    >>> import os, opbench.engines.cpp
    >>> os.path.isfile(os.path.join(opbench.engines.cpp.include_dir(), "opbench", "loop.h"))
    True

``load_inline`` is ``torch.utils.cpp_extension.load_inline`` with torch's
headers precompiled and builds cached by content (``opbench.engines.cpp.extension``).

Importing this package is cheap: it imports neither torch nor a compiler
driver. The C++ engine (``Timer(..., language="c++")``) is
``opbench.engines.cpp.engine``; ``load_inline`` loads on first access.
"""
from __future__ import annotations

import os
from typing import Any

__all__ = ["include_dir", "load_inline"]


def include_dir() -> str:
    """Directory holding ``opbench/*.h``: the installed copy inside the package,
    or ``csrc/include`` of a source checkout (development builds)."""
    # This file is opbench/engines/cpp/__init__.py: three folders up is the package.
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidates = (
        os.path.join(package, "include"),  # wheel: CMake installs the headers here
        os.path.join(os.path.dirname(os.path.dirname(package)), "csrc", "include"),  # checkout
    )
    for path in candidates:
        if os.path.isfile(os.path.join(path, "opbench", "opbench.h")):
            return path
    raise FileNotFoundError(
        "opbench's C++ headers are missing (looked in " + ", ".join(candidates) + "); "
        "reinstall opbench"
    )


def __getattr__(name: str) -> Any:
    # Lazy, so `import opbench` stays free of subprocess/ctypes/hashlib work.
    if name == "load_inline":
        from opbench.engines.cpp.extension import load_inline

        return load_inline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
