"""``torch.utils.benchmark.utils.compile``: ``bench_all`` and ``benchmark_compile``.

    >>> from opbench.utils.compile import benchmark_compile
    >>> benchmark_compile.__module__
    'opbench.analysis.compile'
"""
from __future__ import annotations

from opbench.analysis.compile import bench_all, benchmark_compile

__all__ = ["bench_all", "benchmark_compile"]
