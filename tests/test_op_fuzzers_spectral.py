"""opbench.fuzz.op_fuzzers.spectral: FFT operands, sizes mostly regular numbers (2^i 3^j 5^k)."""
from __future__ import annotations

import pytest

from op_fuzzer_shapes import shape_only, takes  # noqa: F401  (fixture)

torch = pytest.importorskip("torch")
from opbench.fuzz.op_fuzzers.spectral import SpectralOpFuzzer, _regular_sizes  # noqa: E402


def _regular(n: int) -> bool:
    for p in (2, 3, 5):
        while n % p == 0:
            n //= p
    return n == 1


def test_regular_numbers_are_sorted_and_within_bounds() -> None:
    assert _regular_sizes(10, 30) == [12, 15, 16, 18, 20, 24, 25, 27, 30]


def test_all_sizes_regular_when_asked(shape_only) -> None:  # noqa: F811
    for tensors, _, _ in takes(SpectralOpFuzzer, probability_regular=1.0):
        x = tensors["x"]
        assert x.dtype == torch.float64 and 1 <= x.dim() <= 3
        assert all(_regular(k) for k in x.shape), x.shape
