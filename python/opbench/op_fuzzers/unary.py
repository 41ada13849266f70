"""``torch.utils.benchmark.op_fuzzers.unary``: ``UnaryOpFuzzer``.

    >>> from opbench.op_fuzzers.unary import UnaryOpFuzzer
    >>> UnaryOpFuzzer.__module__
    'opbench.fuzz.op_fuzzers.unary'
"""
from __future__ import annotations

from opbench.fuzz.op_fuzzers.unary import UnaryOpFuzzer

__all__ = ["UnaryOpFuzzer"]
