"""``torch.utils.benchmark.op_fuzzers.binary``: ``BinaryOpFuzzer``.

    >>> from opbench.op_fuzzers.binary import BinaryOpFuzzer
    >>> BinaryOpFuzzer.__module__
    'opbench.fuzz.op_fuzzers.binary'
"""
from __future__ import annotations

from opbench.fuzz.op_fuzzers.binary import BinaryOpFuzzer

__all__ = ["BinaryOpFuzzer"]
