"""Fuzzer for FFTs: shapes biased towards regular numbers (only prime factors 2, 3 and 5).

Example::

    import torch
    from opbench.fuzz.op_fuzzers.spectral import SpectralOpFuzzer
    tensors, properties, params = next(iter(SpectralOpFuzzer(seed=0).take(1)))
    torch.fft.fftn(tensors["x"])
"""

from __future__ import annotations

import torch

from opbench.fuzz.fuzzer import Fuzzer
from opbench.fuzz.op_fuzzers import (
    _DENSE_ELEMENT_LIMITS,
    _SIZE_NAMES,
    _dense_tensor,
    _dim_parameter,
    _shape_parameters,
    _step_parameters,
)

__all__ = ["SpectralOpFuzzer"]

MIN_DIM_SIZE = 16
MAX_DIM_SIZE = 16 * 1024


def _regular_sizes(low: int, high: int) -> list[int]:
    """Sorted numbers ``2**i * 3**j * 5**k`` in ``(low, high]``: FFTs are fastest on them.

    The lower bound is exclusive, as in torch's table (16 itself is not included).
    """
    sizes = []
    power2 = 1
    while power2 <= high:
        power3 = power2
        while power3 <= high:
            power5 = power3
            while power5 <= high:
                if power5 > low:
                    sizes.append(power5)
                power5 *= 5
            power3 *= 3
        power2 *= 2
    return sorted(sizes)


REGULAR_SIZES = _regular_sizes(MIN_DIM_SIZE, MAX_DIM_SIZE)


class SpectralOpFuzzer(Fuzzer):
    """One 1-3 D strided tensor ``x`` (float64 by default) whose sizes are regular numbers with
    probability ``probability_regular`` and any loguniform size otherwise."""

    def __init__(self, *, seed: int | None, dtype: torch.dtype = torch.float64,
                 cuda: bool = False, probability_regular: float = 1.0) -> None:
        steps = tuple(f"step_{i}" for i in range(3))
        mix = (("k_regular", probability_regular), ("k_any", 1 - probability_regular))
        super().__init__(
            parameters=[
                _dim_parameter("ndim"),
                *_shape_parameters("regular", REGULAR_SIZES, mix, max_size=MAX_DIM_SIZE),
                _step_parameters(steps),
            ],
            tensors=[_dense_tensor("x", _SIZE_NAMES, steps, "ndim", dtype, cuda,
                                   **_DENSE_ELEMENT_LIMITS)],
            seed=seed,
        )
