"""``torch.utils.benchmark.op_fuzzers.spectral``: ``SpectralOpFuzzer``.

    >>> from opbench.op_fuzzers.spectral import SpectralOpFuzzer
    >>> SpectralOpFuzzer.__module__
    'opbench.fuzz.op_fuzzers.spectral'
"""
from __future__ import annotations

from opbench.fuzz.op_fuzzers.spectral import SpectralOpFuzzer

__all__ = ["SpectralOpFuzzer"]
