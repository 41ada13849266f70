"""Instruction counts with callgrind (valgrind). Importing this package never imports torch.

``opbench.Timer(...).collect_callgrind()`` returns a :class:`CallgrindStats`;
its per-function counts are :class:`FunctionCounts`. Globals crossing into the
callgrind child process must be wrapped in :class:`CopyIfCallgrind`.

Floor: callgrind; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).

Example:
    >>> from opbench.callgrind import FunctionCount, FunctionCounts
    >>> FunctionCounts((FunctionCount(7, "a.c:f"),), inclusive=False).sum()
    7
"""
from opbench.callgrind.function_counts import FunctionCount, FunctionCounts
from opbench.callgrind.globals import CopyIfCallgrind
from opbench.callgrind.stats import CallgrindStats

__all__ = ["CallgrindStats", "CopyIfCallgrind", "FunctionCount", "FunctionCounts"]
