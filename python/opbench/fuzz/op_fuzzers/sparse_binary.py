"""Fuzzer for binary ops on two sparse COO tensors of the same shape.

Example::

    from opbench.fuzz.op_fuzzers.sparse_binary import BinaryOpSparseFuzzer
    tensors, properties, params = next(iter(BinaryOpSparseFuzzer(seed=0).take(1)))
    tensors["x"] + tensors["y"]
"""

from __future__ import annotations

import torch

from opbench.fuzz.fuzzer import FuzzedParameter, Fuzzer, ParameterAlias
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

__all__ = ["BinaryOpSparseFuzzer"]


class BinaryOpSparseFuzzer(Fuzzer):
    """Sparse ``x`` and ``y`` with equal shapes (``y_k<i>`` always alias ``k<i>``; torch keeps
    them as separate draws, which parity preserves), shared density and coalescing."""

    def __init__(self, seed: int | None, dtype: torch.dtype = torch.float32,
                 cuda: bool = False) -> None:
        super().__init__(
            parameters=[
                *_sparse_dim_parameters(),
                *_shape_parameters("pow2", _POW_TWO_SIZES, _POW_TWO_MIX),
                [FuzzedParameter(f"y_k{i}", distribution={ParameterAlias(f"k{i}"): 1.0},
                                 strict=True) for i in range(3)],
                *_sparse_parameters(),
                _random_value_parameter(),
            ],
            tensors=[
                _sparse_tensor("x", _SIZE_NAMES, dtype, cuda),
                _sparse_tensor("y", ("y_k0", "y_k1", "y_k2"), dtype, cuda),
            ],
            seed=seed,
        )
