"""opbench.stats.numerics: torch's float32 printing arithmetic, without torch."""
from __future__ import annotations

import math
import random

import pytest

from opbench.stats import numerics


def test_f32_rounds_and_overflows_as_a_float32_tensor() -> None:
    assert numerics.f32(0.1) == 0.10000000149011612
    assert numerics.f32(1e39) == math.inf and numerics.f32(-1e39) == -math.inf
    assert numerics.log10_f32(0) == -math.inf and math.isnan(numerics.log10_f32(-1))


def test_quantile_interpolates_linearly() -> None:
    assert numerics.quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert numerics.quantile([1.0, 2.0, 3.0, 4.0], 0.25) == 1.75
    assert numerics.quantile([5.0], 0.75) == 5.0


def test_round_is_half_to_even() -> None:
    assert [numerics.round_half_even_f32(x) for x in (0.5, 1.5, 2.5, -0.5)] == [0.0, 2.0, 2.0, -0.0]
    assert math.isinf(numerics.round_half_even_f32(math.inf))


def test_matches_torch_on_random_values() -> None:
    torch = pytest.importorskip("torch")
    rng = random.Random(0)
    for _ in range(200):
        values = sorted(rng.lognormvariate(-12, 2) for _ in range(rng.randint(1, 20)))
        q = rng.choice((0.25, 0.5, 0.75))  # the quantiles Measurement takes
        x = values[0]
        assert numerics.f32(x) == torch.tensor(x).item()
        assert numerics.log10_f32(x) == torch.tensor(x).log10().item()
        assert numerics.quantile(values, q) == torch.tensor(values, dtype=torch.float64).quantile(q).item()
        # torch's reduction order is its own: the std agrees within one float32 ulp (it
        # feeds significant_figures only, through a floor of a log10).
        theirs = torch.tensor(values).std(unbiased=False).item()
        assert numerics.std_f32(values) == pytest.approx(theirs, rel=2**-23, abs=0)
        assert numerics.round_half_even_f32(x * 1e7) == torch.tensor(x * 1e7).round().item()
