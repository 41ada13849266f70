"""opbench.engines.cuda.quantum: per-call figures whose median is unbiased under the timer's step."""
from __future__ import annotations

import math
import random
import statistics

import pytest

from opbench.engines.cuda.quantum import dequantise, per_call_figures

Q = 5e-7


def readings(duration: float, n: int, seed: int = 1) -> list[float]:
    """Windows of a kernel of ``duration`` on a timer of step Q, each starting at a random phase."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        start = rng.random() * Q
        out.append(Q * (math.floor((start + duration) / Q) - math.floor(start / Q)))
    return out


@pytest.mark.parametrize("duration", [2.0e-6, 2.1e-6, 2.2e-6, 2.3e-6, 2.45e-6, 3.7e-6, 5.0e-6])
def test_the_median_is_unbiased_whatever_the_phase(duration):
    raw = readings(duration, 2000)
    assert statistics.median(dequantise(raw, Q)) == pytest.approx(duration, abs=0.02 * Q)


def test_the_raw_median_was_off_by_up_to_half_a_step():
    assert statistics.median(readings(2.2e-6, 2000)) == pytest.approx(2.0e-6)  # 9% low


def test_the_sum_and_the_order_within_a_step_are_kept():
    raw = [2.0e-6, 2.5e-6, 2.0e-6, 2.0e-6 + 1e-9, 2.5e-6]
    spread = dequantise(raw, Q)
    assert sum(spread) == pytest.approx(sum(raw), abs=1e-15)
    assert spread[0] < spread[2] < spread[3]  # the readings of one step keep their order
    assert all(abs(s - r) < Q for s, r in zip(spread, raw))


def test_an_unknown_quantum_leaves_the_readings_alone():
    assert dequantise([1e-6, 2e-6], None) == [1e-6, 2e-6]
    assert dequantise([], Q) == []


def test_per_call_figures_subtract_the_offset_and_never_go_below_zero():
    assert per_call_figures([1e-5], Q, 2e-7) == pytest.approx([1e-5 - 2e-7])
    assert min(per_call_figures([0.0, 0.0], Q, 1e-8)) == 0.0
    assert per_call_figures([1e-5], None, None) == [1e-5]
