"""Fuzzer for elementwise binary ops: ``x`` and a ``y`` that sometimes broadcasts.

Example::

    from opbench.fuzz.op_fuzzers.binary import BinaryOpFuzzer
    tensors, properties, params = next(iter(BinaryOpFuzzer(seed=0).take(1)))
    tensors["x"] + tensors["y"]
"""

from __future__ import annotations

import torch

from opbench.fuzz.fuzzer import FuzzedParameter, Fuzzer, ParameterAlias
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

__all__ = ["BinaryOpFuzzer"]

# y reuses the x steps, as in torch (its own y_step_i are drawn but unused).
_X_STEPS = ("x_step_0", "x_step_1", "x_step_2")


class BinaryOpFuzzer(Fuzzer):
    """1-3 D ``x`` and ``y`` of equal shape, except that each ``y`` dimension is 1 with
    probability 0.2 (broadcasting). Steps ``x_step_i``/``y_step_i`` are drawn, but (as in torch)
    both tensors use the ``x`` steps."""

    def __init__(self, seed: int | None, dtype: torch.dtype = torch.float32,
                 cuda: bool = False) -> None:
        super().__init__(
            parameters=[
                _dim_parameter("dim"),
                *_shape_parameters("pow2", _POW_TWO_SIZES, _POW_TWO_MIX),
                [FuzzedParameter(f"y_k{i}", distribution={ParameterAlias(f"k{i}"): 0.8, 1: 0.2},
                                 strict=True) for i in range(3)],
                _step_parameters([f"{t}_step_{i}" for i in range(3) for t in ("x", "y")]),
                _random_value_parameter(),
            ],
            tensors=[
                _dense_tensor("x", _SIZE_NAMES, _X_STEPS, "dim", dtype, cuda,
                              **_DENSE_ELEMENT_LIMITS),
                _dense_tensor("y", ("y_k0", "y_k1", "y_k2"), _X_STEPS, "dim", dtype, cuda),
            ],
            seed=seed,
        )

