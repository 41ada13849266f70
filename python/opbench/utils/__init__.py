"""torch.utils.benchmark's module paths: ``torch.utils.benchmark.utils.X`` is ``opbench.utils.X``.

Code written against torch's modules imports from the same paths under
opbench (``from opbench.utils.common import Measurement``), and code that
swaps the package (``sys.modules["torch.utils.benchmark"] = opbench``) finds
them too. Each module re-exports opbench's own objects under torch's names,
so a class reached by either path is the same class, and pickles naming
torch's paths (``torch.utils.benchmark.utils.timer.Language``) load as
opbench's objects under the swap.

As in torch, the submodules are attributes once the package is imported:

    >>> import opbench
    >>> opbench.utils.common.Measurement is opbench.Measurement
    True

Floor: front; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).
"""
from __future__ import annotations

import importlib
from types import ModuleType

# torch's utils/__init__.py is empty, but `import torch.utils.benchmark` imports
# these, so torch code reaches them as attributes (`benchmark.utils.common`).
_SUBMODULES = ("_stubs", "common", "compare", "compile", "cpp_jit", "fuzzer", "sparse_fuzzer",
               "timer", "valgrind_wrapper")


def __getattr__(name: str) -> ModuleType:
    if name in _SUBMODULES:
        # __name__, not "opbench.utils": under the sys.modules swap this package is
        # torch.utils.benchmark.utils, and its submodules are named after it.
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_SUBMODULES})
