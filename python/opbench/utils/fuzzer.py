"""``torch.utils.benchmark.utils.fuzzer``: ``Fuzzer`` and its parameters and tensors.

    >>> from opbench.utils.fuzzer import FuzzedParameter
    >>> FuzzedParameter("n", minval=1, maxval=8, distribution="uniform").name
    'n'
"""
from __future__ import annotations

from opbench.fuzz.fuzzer import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias

__all__ = ["FuzzedParameter", "FuzzedTensor", "Fuzzer", "ParameterAlias"]
