"""``torch.utils.benchmark.op_fuzzers.sparse_binary``: ``BinaryOpSparseFuzzer``.

    >>> from opbench.op_fuzzers.sparse_binary import BinaryOpSparseFuzzer
    >>> BinaryOpSparseFuzzer.__module__
    'opbench.fuzz.op_fuzzers.sparse_binary'
"""
from __future__ import annotations

from opbench.fuzz.op_fuzzers.sparse_binary import BinaryOpSparseFuzzer

__all__ = ["BinaryOpSparseFuzzer"]
