"""C++ side of opbench: the header-only timing library and C++ Timers.

``include_dir()`` is the directory to add to a compiler's include path
(``-I``, ``load_inline(extra_include_paths=[...])``, CMake's
``target_include_directories``) so that ``#include "opbench/opbench.h"``
works::

    >>> import os, opbench.cpp
    >>> os.path.isfile(os.path.join(opbench.cpp.include_dir(), "opbench", "loop.h"))
    True

Importing this package is cheap: it imports neither torch nor a compiler
driver. The C++ engine (``Timer(..., language="c++")``) is
``opbench.engines.cpp``.
"""
from __future__ import annotations

import os

__all__ = ["include_dir"]


def include_dir() -> str:
    """Directory holding ``opbench/*.h``: the installed copy inside the package,
    or ``csrc/include`` of a source checkout (development builds)."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
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
