"""``torch.utils.benchmark.utils.sparse_fuzzer``: ``FuzzedSparseTensor``.

    >>> from opbench.utils.sparse_fuzzer import FuzzedSparseTensor
    >>> FuzzedSparseTensor.__module__
    'opbench.fuzz.sparse_fuzzer'
"""
from __future__ import annotations

from opbench.fuzz.sparse_fuzzer import FuzzedSparseTensor

__all__ = ["FuzzedSparseTensor"]
