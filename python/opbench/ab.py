"""Paired A/B comparison: is B faster than A, slower, or the same within a threshold?

Timing A for a while and then B for a while compares two different moments of
the machine: a frequency change, a noisy neighbour or thermal drift between
them reads as a speed difference. ``compare_ab`` instead runs A and B in
interleaved blocks of one shared size, in ABBA order (A,B then B,A, ...) so a
linear drift cancels within each four blocks, and compares each block of B
with its neighbouring block of A: ``log(time_B / time_A)`` per pair. The
verdict rests on the order-statistic confidence interval of the median of
those log ratios (distribution-free, deterministic; see ``opbench.stats``):

- "faster" / "slower": the whole interval lies beyond the threshold;
- "same": the whole interval lies within +-threshold;
- "inconclusive": neither (the interval straddles a threshold), said plainly.

The threshold is symmetric in log space: with 2%, "slower" means a ratio
above 1.02 and "faster" one below 1/1.02. It measures at least ``min_pairs``
pairs and ``min_run_time`` seconds, then checks the verdict at
geometrically spaced pair counts (few looks keep repeated testing from
inflating the error rate) until it is decisive or ``max_run_time`` is spent.

Example:
    >>> import opbench
    >>> from opbench.ab import compare_ab
    >>> r = compare_ab(opbench.Timer("sum(range(50))"), opbench.Timer("sum(range(50))"),
    ...                min_run_time=0.02, max_run_time=0.2)
    >>> r.verdict in ("same", "inconclusive", "faster", "slower")
    True
"""
from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Any

from opbench import _numerics, environment
from opbench._checks import check_count, check_run_times
from opbench.measurement import Measurement
from opbench.stats import DEFAULT_CONFIDENCE, _check_confidence, _median_ci_sorted

__all__ = ["ABResult", "compare_ab", "verdict"]

# Verdict checks happen at min_pairs, then each time the pair count grows by this factor.
_CHECK_GROWTH = 1.25


@dataclasses.dataclass(frozen=True)
class ABResult:
    """The outcome of ``compare_ab``. ``ratio`` is time(B) / time(A): above 1, B is slower."""

    ratio: float
    ci_low: float
    ci_high: float
    verdict: str
    n_pairs: int
    number_per_run: int
    a: Measurement
    b: Measurement
    threshold: float
    confidence: float

    def __str__(self) -> str:
        name_a, name_b = (_name(m) for m in (self.a, self.b))
        change = (self.ratio - 1) * 100
        return (
            f"B ({name_b}) vs A ({name_a}): ratio {self.ratio:.4f} ({change:+.2f}%), "
            f"{self.confidence:.0%} CI {self.ci_low:.4f} to {self.ci_high:.4f}; "
            f"verdict: {self.verdict} (threshold {self.threshold:.1%}; {self.n_pairs} pairs "
            f"of {self.number_per_run} runs)"
        )


def _name(m: Measurement) -> str:
    spec = m.task_spec
    return spec.description or spec.sub_label or spec.title


def verdict(ci_low: float, ci_high: float, threshold: float) -> str:
    """"faster", "slower", "same" or "inconclusive" for a ratio interval (B / A) and a
    relative threshold (0.02 for 2%).

    Example:
        >>> verdict(1.05, 1.12, 0.02), verdict(0.99, 1.01, 0.02), verdict(0.99, 1.05, 0.02)
        ('slower', 'same', 'inconclusive')
    """
    if not (0 < ci_low <= ci_high < math.inf):  # no interval: nothing to conclude
        return "inconclusive"
    bound = math.log1p(threshold)
    lo, hi = math.log(ci_low), math.log(ci_high)
    if lo > bound:
        return "slower"
    if hi < -bound:
        return "faster"
    if -bound <= lo and hi <= bound:
        return "same"
    return "inconclusive"



def compare_ab(
    timer_a: Any,
    timer_b: Any,
    *,
    threshold: float = 0.02,
    confidence: float = DEFAULT_CONFIDENCE,
    min_pairs: int = 10,
    min_run_time: float = 0.2,
    max_run_time: float = 10.0,
) -> ABResult:
    """Times ``timer_a`` and ``timer_b`` (opbench Timers) in interleaved pairs; see the module doc.

    Args:
        threshold: relative difference that matters (0.02: 2%).
        confidence: of the ratio's interval.
        min_pairs: pairs to measure at least (also at least what ``confidence`` needs).
        min_run_time / max_run_time: measured seconds, A and B together, at least / at most.

    Raises:
        ValueError: a threshold outside (0, 1), bad confidence, pairs or times.
    """
    if not 0 < threshold < 1:
        raise ValueError(f"threshold must be a relative difference in (0, 1), e.g. 0.02; "
                         f"got {threshold!r}")
    _check_confidence(confidence)
    check_count("min_pairs", min_pairs)
    check_run_times(min_run_time, max_run_time)
    environment.check_machine()

    # One block size for both, large enough for either: equal work per block is
    # what makes the pairs comparable. Estimating also warms both up.
    number = max(timer_a.block_size(min_run_time), timer_b.block_size(min_run_time))
    times: dict[int, list[float]] = {0: [], 1: []}
    timers = (timer_a, timer_b)
    log_ratios: list[float] = []
    total = 0.0
    next_check = min_pairs
    ci: tuple[float, float] | None = None
    result = "inconclusive"
    while True:
        order = (0, 1) if len(log_ratios) % 2 == 0 else (1, 0)  # ABBA
        for side in order:
            t = timers[side].run(number)
            times[side].append(t)
            total += t
        bisect.insort(log_ratios, math.log(times[1][-1] / times[0][-1]))
        n = len(log_ratios)
        out_of_time = total >= max_run_time
        if (n >= next_check and total >= min_run_time) or out_of_time:
            next_check = max(n + 1, math.ceil(n * _CHECK_GROWTH))
            ci = _median_ci_sorted(log_ratios, confidence)
            if ci is not None:
                result = verdict(math.exp(ci[0]), math.exp(ci[1]), threshold)
            if result != "inconclusive" or out_of_time:
                break

    if ci is None:
        environment.warn_too_few_samples(len(log_ratios), confidence)
        ci = (-math.inf, math.inf)
    measurements = []
    for side, role in ((0, "A"), (1, "B")):
        m = timers[side].measurement(number, times[side])
        m.info["ab_role"] = role
        measurements.append(m)
    return ABResult(
        ratio=math.exp(_numerics.quantile(log_ratios, 0.5)),
        ci_low=math.exp(ci[0]),
        ci_high=math.exp(ci[1]),
        verdict=result,
        n_pairs=len(log_ratios),
        number_per_run=number,
        a=measurements[0],
        b=measurements[1],
        threshold=threshold,
        confidence=confidence,
    )
