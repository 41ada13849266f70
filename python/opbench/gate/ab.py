"""Paired A/B comparison: is B faster than A, slower, or the same within a threshold?

Timing A for a while and then B for a while compares two different moments of
the machine: a frequency change, a noisy neighbour or thermal drift between
them reads as a speed difference. ``compare_ab`` instead runs A and B in
interleaved blocks of one shared size, in ABBA order (A,B then B,A, ...) so a
linear drift cancels within each four blocks, and compares each block of B
with its neighbouring block of A: ``log(time_B / time_A)`` per pair.

The verdict ("faster", "slower", "same" or "inconclusive" against the
threshold, symmetric in log space) comes from ``opbench.stats.decide.paired``: the
order-statistic interval of the median log ratio, looked at on a fixed
schedule of pair counts (``min_pairs``, then 25% more each time) until it is
decisive and at least ``min_run_time`` was measured, or ``max_run_time`` is
spent. Each look spends a shrinking share of the error budget, so the chance
of a false verdict over all looks is at most ``1 - confidence``.

Example (on a clock that only the statements move, every block costs exactly its runs'
ticks, so the verdicts are certain: B 10% slower, then A against itself):
    >>> import opbench
    >>> from opbench.gate.ab import compare_ab
    >>> class Clock:
    ...     now = 0.0
    ...     def tick(self, seconds):
    ...         self.now += seconds
    ...     def __call__(self):
    ...         return self.now
    >>> clock = Clock()
    >>> def timer(cost):
    ...     return opbench.Timer(f"clock.tick({cost})", timer=clock, globals={"clock": clock})
    >>> r = compare_ab(timer(2e-6), timer(2.2e-6), min_run_time=1e-3)
    >>> r.verdict, round(r.ratio, 3)
    ('slower', 1.1)
    >>> compare_ab(timer(2e-6), timer(2e-6), min_run_time=1e-3).verdict
    'same'
"""
from __future__ import annotations

import bisect
import dataclasses
import math
from typing import Any

from opbench import environment
from opbench._checks import check_count, check_run_times
from opbench.core.measurement import Measurement
from opbench.errors import attach
from opbench.stats import DEFAULT_CONFIDENCE, check_confidence, decide
from opbench.stats import numerics as _numerics
from opbench.stats.decide import verdict

__all__ = ["ABResult", "compare_ab", "verdict"]


@dataclasses.dataclass(frozen=True)
class ABResult:
    """The outcome of ``compare_ab``. ``ratio`` is time(B) / time(A): above 1, B is slower.

    ``ci_low``/``ci_high`` are the interval of the last look; its level is higher
    than ``confidence``, which holds for all looks together (opbench.stats.decide).
    """

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

    @property
    def layout_spread(self) -> float | None:
        """The larger code-placement spread of A and B (C++ timers with ``layouts=N``)."""
        spreads = [m.info.get("layout_spread") for m in (self.a, self.b)]
        known = [s for s in spreads if isinstance(s, float)]
        return max(known) if known else None

    @property
    def within_layout_spread(self) -> bool:
        """The whole interval lies within 1 +- the code-placement spread: the difference,
        whatever the verdict, is no larger than moving the code gives."""
        spread = self.layout_spread
        return spread is not None and 1 - spread <= self.ci_low and self.ci_high <= 1 + spread

    def __str__(self) -> str:
        name_a, name_b = (_name(m) for m in (self.a, self.b))
        change = (self.ratio - 1) * 100
        return (
            f"B ({name_b}) vs A ({name_a}): ratio {self.ratio:.4f} ({change:+.2f}%), "
            + (f"CI {self.ci_low:.4f} to {self.ci_high:.4f} ({self.confidence:.0%} over all "
               "looks); " if math.isfinite(self.ci_high) else
               f"no interval: {self.n_pairs} pairs are too few at the level of the last look "
               "(measure longer: max_run_time); ")
            +
            f"verdict: {self.verdict} (threshold {self.threshold:.1%}; {self.n_pairs} pairs "
            f"of {self.number_per_run} runs)"
            + (f"; within the code-placement spread ({self.layout_spread:.1%}): possibly an "
               "address accident" if self.within_layout_spread else "")
        )


def _name(m: Measurement) -> str:
    spec = m.task_spec
    return spec.name or spec.description or spec.sub_label or spec.title


def compare_ab(
    timer_a: Any,
    timer_b: Any,
    *,
    threshold: float = 0.05,
    confidence: float = DEFAULT_CONFIDENCE,
    min_pairs: int = 10,
    min_run_time: float = 0.2,
    max_run_time: float = 10.0,
) -> ABResult:
    """Times ``timer_a`` and ``timer_b`` (opbench Timers) in interleaved pairs; see the module doc.

    Args:
        threshold: relative difference that matters (default 0.05: 5%, as the gate's).
        confidence: of the ratio's interval.
        min_pairs: pairs to measure at least (also at least what ``confidence`` needs).
        min_run_time / max_run_time: measured seconds, A and B together, at least / at most.

    Raises:
        ValueError: a threshold outside (0, 1), bad confidence, pairs or times.
    """
    decide.check_threshold(threshold)
    check_confidence(confidence)
    check_count("min_pairs", min_pairs)
    check_run_times(min_run_time, max_run_time)

    # One block size for both, large enough for either: equal work per block is
    # what makes the pairs comparable. Estimating also warms both up.
    number = max(timer_a.block_size(min_run_time), timer_b.block_size(min_run_time))
    times: dict[int, list[float]] = {0: [], 1: []}
    timers = (timer_a, timer_b)
    log_ratios: list[float] = []
    total = 0.0
    schedule = iter(decide.looks(min_pairs))
    next_look, look = next(schedule), 0
    decision: decide.Decision | None = None
    while True:
        order = (0, 1) if len(log_ratios) % 2 == 0 else (1, 0)  # ABBA
        for side in order:
            t = timers[side].run(number)
            times[side].append(t)
            total += t
        bisect.insort(log_ratios, math.log(times[1][-1] / times[0][-1]))
        if len(log_ratios) == next_look:
            look += 1
            decision = decide.paired(log_ratios, threshold, confidence, look)
            next_look = next(schedule)
            if decision.verdict != "inconclusive" and total >= min_run_time:
                break
        if total >= max_run_time:
            break

    warnings = []
    if decision is None or decision.ci is None:
        # The level the last look needed, not the overall one: a warning that says "needs
        # 6" under a verdict drawn from 7 pairs would contradict it.
        level = decide.look_confidence(max(look, 1), confidence)
        warnings.append(environment.warn_too_few_samples(len(log_ratios), level))
    ci = decision.ci if decision is not None and decision.ci is not None else (0.0, math.inf)
    measurements = []
    for side, role in ((0, "A"), (1, "B")):
        m = timers[side].measurement(number, times[side])
        m.info["ab_role"] = role
        for record in warnings:
            attach(m.info, record)
        measurements.append(m)
    return ABResult(
        ratio=math.exp(_numerics.quantile(log_ratios, 0.5)),
        ci_low=ci[0],
        ci_high=ci[1],
        verdict="inconclusive" if decision is None else decision.verdict,
        n_pairs=len(log_ratios),
        number_per_run=number,
        a=measurements[0],
        b=measurements[1],
        threshold=threshold,
        confidence=confidence,
    )
