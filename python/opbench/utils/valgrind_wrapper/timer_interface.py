"""``torch.utils.benchmark.utils.valgrind_wrapper.timer_interface``: callgrind's results.

``CallgrindStats``, ``FunctionCounts``, ``FunctionCount`` and
``CopyIfCallgrind``, and ``Serialization``, the enum a pickled torch
``CopyIfCallgrind`` names (opbench picks the serialization from the value's type,
as torch does, so it only has to load):

    >>> from opbench.utils.valgrind_wrapper.timer_interface import FunctionCount
    >>> FunctionCount(7, "f").count
    7
"""
from __future__ import annotations

import enum

from opbench.callgrind import CallgrindStats, CopyIfCallgrind, FunctionCount, FunctionCounts

__all__ = ["CallgrindStats", "CopyIfCallgrind", "FunctionCount", "FunctionCounts"]


class Serialization(enum.Enum):
    """How ``collect_callgrind`` copies a global into its child process (torch's values)."""

    PICKLE = 0
    TORCH = 1
    TORCH_JIT = 2
