"""Fuzzer for elementwise unary ops.

Example::

    from opbench.fuzz.op_fuzzers.unary import UnaryOpFuzzer
    tensors, properties, params = next(iter(UnaryOpFuzzer(seed=0).take(1)))
    tensors["x"].exp()
"""

from __future__ import annotations

import torch

from opbench.fuzz.fuzzer import Fuzzer
from opbench.fuzz.op_fuzzers import (
    _DENSE_ELEMENT_LIMITS,
    _POW_TWO_MIX,
    _POW_TWO_SIZES,
    _SIZE_NAMES,
    _dense_tensor,
    _dim_parameter,
    _random_value_parameter,
    _shape_parameters,
    _step_parameters,
)

__all__ = ["UnaryOpFuzzer"]


class UnaryOpFuzzer(Fuzzer):
    """One 1-3 D strided tensor ``x`` of 4 Ki to 32 Mi elements, sizes biased to powers of 2."""

    def __init__(self, seed: int | None, dtype: torch.dtype = torch.float32,
                 cuda: bool = False) -> None:
        steps = tuple(f"x_step_{i}" for i in range(3))
        super().__init__(
            parameters=[
                _dim_parameter("dim"),
                *_shape_parameters("pow2", _POW_TWO_SIZES, _POW_TWO_MIX),
                _step_parameters(steps),
                _random_value_parameter(),
            ],
            tensors=[_dense_tensor("x", _SIZE_NAMES, steps, "dim", dtype, cuda,
                                   **_DENSE_ELEMENT_LIMITS)],
            seed=seed,
        )
