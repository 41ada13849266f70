"""Ready-made fuzzers for common operator families, seed-for-seed equal to torch's.

``binary.BinaryOpFuzzer``, ``unary.UnaryOpFuzzer``, ``spectral.SpectralOpFuzzer``,
``sparse_binary.BinaryOpSparseFuzzer`` and ``sparse_unary.UnaryOpSparseFuzzer`` take the same
arguments as their ``torch.utils.benchmark.op_fuzzers`` counterparts. (torch 2.13.0's raise on
construction because of an inverted normalisation check; these work.)

Example::

    from opbench.fuzz.op_fuzzers.binary import BinaryOpFuzzer
    for tensors, properties, params in BinaryOpFuzzer(seed=0).take(2):
        print(tensors["x"].shape, tensors["y"].shape)

This module holds the parameter families the fuzzers share. Their order of declaration is the
order in which they are drawn, so each fuzzer lists them exactly as torch does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opbench.fuzz._deps import require
from opbench.fuzz.fuzzer import FuzzedParameter, FuzzedTensor, ParameterAlias
from opbench.fuzz.sparse_fuzzer import FuzzedSparseTensor

require()  # the fuzzers below need torch; fail here with the install hint

_MIN_DIM_SIZE = 16
_MAX_DIM_SIZE = 16 * 1024 ** 2
# Powers of two deserve extra coverage: many kernels have fast paths for them.
_POW_TWO_SIZES = tuple(2 ** i for i in range(4, 25))
assert _POW_TWO_SIZES[0] == _MIN_DIM_SIZE and _POW_TWO_SIZES[-1] == _MAX_DIM_SIZE

# Each dense tensor gets 1-3 dimensions; strided access is the exception, not the rule.
_DIM_DISTRIBUTION = {1: 0.3, 2: 0.4, 3: 0.3}
_STEP_DISTRIBUTION = {1: 0.8, 2: 0.06, 4: 0.06, 8: 0.04, 16: 0.04}

# Limits shared by every dense operand that sets them: at least 4 Ki and at most 32 Mi
# elements, and no more than 2 GB allocated before slicing for steps.
_DENSE_ELEMENT_LIMITS = {"min_elements": 4 * 1024, "max_elements": 32 * 1024 ** 2}
_MAX_ALLOCATION_BYTES = 2 * 1024 ** 3


def _dim_parameter(name: str) -> FuzzedParameter:
    """How many dimensions the operands have (strict: resampling must not bias towards 1-D)."""
    return FuzzedParameter(name, distribution=_DIM_DISTRIBUTION, strict=True)


def _shape_parameters(special: str, special_sizes: Sequence[int], mix: Sequence[tuple[str, float]],
                     max_size: int = _MAX_DIM_SIZE) -> list[list[FuzzedParameter]]:
    """``k_any_i`` (loguniform), ``k_<special>_i`` (uniform over special sizes) and ``k<i>``.

    ``k<i>`` picks between the two families with the probabilities in ``mix`` (pairs of family
    prefix and probability, in torch's order) so special sizes are well covered while every
    size stays possible.
    """
    special_distribution = {size: 1.0 / len(special_sizes) for size in special_sizes}
    return [
        [FuzzedParameter(f"k_any_{i}", minval=_MIN_DIM_SIZE, maxval=max_size,
                         distribution="loguniform") for i in range(3)],
        [FuzzedParameter(f"k_{special}_{i}", distribution=special_distribution)
         for i in range(3)],
        [FuzzedParameter(f"k{i}", distribution={
            ParameterAlias(f"{family}_{i}"): probability for family, probability in mix},
            strict=True) for i in range(3)],
    ]


def _step_parameters(names: Sequence[str]) -> list[FuzzedParameter]:
    return [FuzzedParameter(name, distribution=_STEP_DISTRIBUTION) for name in names]


def _random_value_parameter() -> FuzzedParameter:
    """Repeatable entropy for downstream use (e.g. seeding an op's own randomness)."""
    return FuzzedParameter("random_value", minval=0, maxval=2 ** 32 - 1, distribution="uniform")


def _dense_tensor(name: str, size: tuple[str, ...], steps: tuple[str, ...], dim: str,
                 dtype: Any, cuda: bool, **limits: Any) -> FuzzedTensor:
    """A 75%-contiguous strided operand capped at a 2 GB allocation."""
    return FuzzedTensor(name=name, size=size, steps=steps, probability_contiguous=0.75,
                        max_allocation_bytes=_MAX_ALLOCATION_BYTES, dim_parameter=dim,
                        dtype=dtype, cuda=cuda, **limits)


def _sparse_parameters() -> list[FuzzedParameter]:
    """Density and coalescing of sparse operands (drawn after the shapes)."""
    return [
        FuzzedParameter("density", distribution={0.1: 0.4, 0.05: 0.3, 0.01: 0.3}),
        FuzzedParameter("coalesced", distribution={True: 0.5, False: 0.5}),
    ]


def _sparse_dim_parameters() -> list[FuzzedParameter]:
    """Dimensionality and number of sparse dimensions (both strict, drawn first)."""
    return [
        _dim_parameter("dim_parameter"),
        FuzzedParameter("sparse_dim", distribution={1: 0.4, 2: 0.4, 3: 0.2}, strict=True),
    ]


def _sparse_tensor(name: str, size: tuple[str, ...], dtype: Any, cuda: bool) -> Any:
    return FuzzedSparseTensor(name=name, size=size, dim_parameter="dim_parameter",
                              sparse_dim="sparse_dim", density="density", coalesced="coalesced",
                              dtype=dtype, cuda=cuda,
                              min_elements=_DENSE_ELEMENT_LIMITS["min_elements"],
                              max_elements=_DENSE_ELEMENT_LIMITS["max_elements"])


_POW_TWO_MIX = (("k_any", 0.8), ("k_pow2", 0.2))
_SIZE_NAMES = ("k0", "k1", "k2")
