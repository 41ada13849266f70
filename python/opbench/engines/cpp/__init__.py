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

__all__ = ["include_dir", "load_inline", "template_path"]


def _package_or_checkout(installed: str, checkout: str, probe: str, what: str) -> str:
    """``installed`` inside the package (a wheel: CMake installs it there) or
    ``checkout`` under the source tree (development builds), whichever holds ``probe``."""
    # This file is opbench/engines/cpp/__init__.py: three folders up is the package.
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidates = (
        os.path.join(package, installed),
        os.path.join(os.path.dirname(os.path.dirname(package)), checkout),
    )
    for path in candidates:
        if os.path.isfile(os.path.join(path, probe)):
            return path
    raise FileNotFoundError(
        f"opbench's {what} is missing (looked in " + ", ".join(candidates) + "); reinstall opbench"
    )


def include_dir() -> str:
    """Directory holding ``opbench/*.h``: the installed copy inside the package,
    or ``csrc/include`` of a source checkout (development builds)."""
    return _package_or_checkout("include", os.path.join("csrc", "include"),
                                os.path.join("opbench", "opbench.h"), "C++ headers")


def template_path() -> str:
    """The C++ source a C++ Timer's statement is compiled in (``templates/timer.cpp``
    in the package, ``csrc/templates/timer.cpp`` in a checkout).

        >>> import opbench.engines.cpp
        >>> opbench.engines.cpp.template_path().endswith("timer.cpp")
        True
    """
    folder = _package_or_checkout("templates", os.path.join("csrc", "templates"), "timer.cpp",
                                  "C++ statement template")
    return os.path.join(folder, "timer.cpp")


def __getattr__(name: str) -> Any:
    # Lazy, so `import opbench` stays free of subprocess/ctypes/hashlib work.
    if name == "load_inline":
        from opbench.engines.cpp.extension import load_inline

        return load_inline
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
