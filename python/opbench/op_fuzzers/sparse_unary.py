"""``torch.utils.benchmark.op_fuzzers.sparse_unary``: ``UnaryOpSparseFuzzer``.

    >>> from opbench.op_fuzzers.sparse_unary import UnaryOpSparseFuzzer
    >>> UnaryOpSparseFuzzer.__module__
    'opbench.fuzz.op_fuzzers.sparse_unary'
"""
from __future__ import annotations

from opbench.fuzz.op_fuzzers.sparse_unary import UnaryOpSparseFuzzer

__all__ = ["UnaryOpSparseFuzzer"]
