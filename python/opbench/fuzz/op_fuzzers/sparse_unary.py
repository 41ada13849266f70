"""Fuzzer for unary ops on sparse COO tensors.

Example::

    from opbench.fuzz.op_fuzzers.sparse_unary import UnaryOpSparseFuzzer
    tensors, properties, params = next(iter(UnaryOpSparseFuzzer(seed=0).take(1)))
    tensors["x"].coalesce()
"""

from __future__ import annotations

import torch

from opbench.fuzz.fuzzer import Fuzzer
from opbench.fuzz.op_fuzzers import (
    _POW_TWO_MIX,
    _POW_TWO_SIZES,
    _SIZE_NAMES,
    _random_value_parameter,
    _shape_parameters,
    _sparse_dim_parameters,
    _sparse_parameters,
    _sparse_tensor,
)

__all__ = ["UnaryOpSparseFuzzer"]


class UnaryOpSparseFuzzer(Fuzzer):
    """One sparse ``x`` with 1-3 dimensions, 1-3 of them sparse, density 1-10%."""

    def __init__(self, seed: int | None, dtype: torch.dtype | None = None,
                 cuda: bool = False) -> None:
        super().__init__(
            parameters=[
                *_sparse_dim_parameters(),
                *_shape_parameters("pow2", _POW_TWO_SIZES, _POW_TWO_MIX),
                *_sparse_parameters(),
                _random_value_parameter(),
            ],
            tensors=[_sparse_tensor("x", _SIZE_NAMES, dtype or torch.float32, cuda)],
            seed=seed,
        )
