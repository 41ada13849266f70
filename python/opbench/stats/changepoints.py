"""Change points: where a benchmark's history steps up or down, or starts to drift.

A history is one value per commit (the median of that commit's runs), in commit
order. The values are taken as logarithms (a change is a ratio, whatever the
benchmark's scale) and fitted with a **piecewise-linear** function chosen by a
penalised least-squares fit: the segmentation that minimises

    sum over segments of RSS(segment) / sigma**2  +  penalty * (number of segments)

solved exactly by PELT (Killick, Fearnhead & Eckley, "Optimal detection of
changepoints with a linear computational cost", JASA 107(500), 2012), where a
segment of three points or more is fitted by a straight line and a shorter one
(at least two points: one run is never a new level) by its mean. Each boundary
whose two fits disagree at the boundary is a **step**; each segment whose slope
is not zero is a **drift**.

Why not asv's fit (``asv.step_detect``: a piecewise-*constant* fit with an L1
cost, Friedrich et al. 2008)? A constant fit has no way to express a slow drift:
1% per commit over fifteen commits is 16% slower, and asv reports nothing (its
penalty reads the ramp as noise) or a staircase of small steps, each below any
threshold, which is exactly how a benchmark decays unnoticed. A line per segment
names the drift, its first commit and its total. ``benchmarks/history.py``
measures both on synthetic histories.

Noise. sigma, the run-to-run noise of the history, is estimated from the data
by the median absolute second difference (a difference-based variance estimate,
Gasser, Sroka & Jennen-Steinmetz, Biometrika 73(3), 1986): second differences
cancel levels and slopes, the median ignores the few that straddle a step. It is
floored at ``noise_floor`` (relative), so a history of identical instruction
counts does not make every last-digit change infinitely significant. A single
run far from both its neighbours (a burst of load on the machine), while they
agree with each other, is replaced by their mean before fitting (a one-point
spike is not a change: the next commit would show it). The penalty defaults to
``3 * log(n)`` per segment (the BIC's, for three parameters a segment: start,
level, slope).

Tests against the noise. After the fit, sigma becomes the larger of that
estimate and the fit's own residual sigma (on a short history either alone can
come out low by chance). A step's ``z`` is a likelihood-ratio statistic: the
square root of what a *continuous* fit (two lines meeting at the boundary)
adds to the residual sum of squares, over sigma, so a drift that the fit happened
to split is not also a step. A drift's ``z`` is its slope over the slope's
standard error. Neighbouring segments that slope the same way and that one line
fits within the noise are joined first (a long ramp under noise can fit best as a
saw of short lines). A change ``exceeds_noise`` when ``z >= z_min``, 5 by
default: in 400 flat histories of 40 runs with 1% noise, one had a false change
(``tests/test_changepoints.py``, ``benchmarks/history.py``).

Example:
    >>> values = [1.0] * 10 + [1.15] * 10
    >>> [(c.kind, c.start, c.end, round(c.size, 2)) for c in detect(values).changes]
    [('step', 9, 10, 0.15)]
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

__all__ = ["Change", "Detection", "detect"]

# Second differences of iid noise have variance 6 sigma^2; 1.4826 makes a MAD a sigma.
_MAD_TO_SIGMA = 1.4826 / math.sqrt(6)
# A one-point spike: this many sigmas from both neighbours, which agree within it.
_SPIKE_SIGMAS = 5.0


@dataclasses.dataclass(frozen=True)
class Change:
    """One change in a history.

    ``kind`` is ``"step"`` (the level jumps between points ``start`` and ``end``,
    ``end == start + 1``: ``end`` is the first point at the new level) or
    ``"drift"`` (the value moves steadily from point ``start`` to ``end``). Every
    boundary between segments is a step, beyond the noise or not; a drift is listed
    only for a segment whose slope is beyond it (any other segment is a level).
    ``size`` is relative: new / old - 1 (+0.15 is 15% higher). ``before`` and
    ``after`` are the fitted values on either side (the history's units). ``z`` is
    ``size`` in standard errors of the history's noise; ``exceeds_noise`` is
    ``z >= z_min``.
    """

    kind: str
    start: int
    end: int
    size: float
    before: float
    after: float
    z: float
    exceeds_noise: bool

    @property
    def per_point(self) -> float:
        """A drift's relative change per point (commit); a step's whole size."""
        if self.kind == "step" or self.end == self.start:
            return self.size
        return (1 + self.size) ** (1 / (self.end - self.start)) - 1


@dataclasses.dataclass(frozen=True)
class Detection:
    """What ``detect`` found: the changes (in order), the noise sigma (relative, as a
    fraction), the fitted value at each point and the segments (start, end
    exclusive)."""

    changes: list[Change]
    noise: float
    fit: list[float]
    segments: list[tuple[int, int]]


class _Sums:
    """Prefix sums that give any segment's least-squares fit in O(1)."""

    def __init__(self, y: Sequence[float]) -> None:
        self.s = [(0.0, 0.0, 0.0, 0.0, 0.0)]
        for i, v in enumerate(y):
            sx, sxx, sy, sxy, syy = self.s[-1]
            self.s.append((sx + i, sxx + i * i, sy + v, sxy + i * v, syy + v * v))

    def mean(self, a: int, b: int) -> float:
        return (self.s[b][2] - self.s[a][2]) / (b - a)

    def fit(self, a: int, b: int) -> tuple[float, float, float]:
        """(intercept at point a, slope, RSS) of points [a, b): a line from three points
        on, the mean below."""
        n = b - a
        sx, sxx, sy, sxy, syy = (hi - lo for hi, lo in zip(self.s[b], self.s[a]))
        mx, my = sx / n, sy / n
        cyy = max(syy - sy * my, 0.0)
        cxx = sxx - sx * mx
        if n < 3 or cxx <= 0:
            return my, 0.0, cyy
        slope = (sxy - sx * my) / cxx
        return my - slope * (mx - a), slope, max(cyy - slope * slope * cxx, 0.0)


def noise_sigma(y: Sequence[float]) -> float:
    """The noise sigma of ``y`` from its median absolute second difference (0 below 3
    points)."""
    d2 = [y[i + 1] - 2 * y[i] + y[i - 1] for i in range(1, len(y) - 1)]
    if not d2:
        return 0.0
    center = statistics.median(d2)
    return _MAD_TO_SIGMA * statistics.median(abs(d - center) for d in d2)


def _despike(y: list[float], sigma: float) -> list[float]:
    out = list(y)
    for i in range(1, len(y) - 1):
        left, right = y[i] - y[i - 1], y[i] - y[i + 1]
        if (abs(left) > _SPIKE_SIGMAS * sigma and abs(right) > _SPIKE_SIGMAS * sigma
                and left * right > 0 and abs(y[i - 1] - y[i + 1]) < _SPIKE_SIGMAS * sigma):
            out[i] = (y[i - 1] + y[i + 1]) / 2
    # At either end a lone run far from two that agree is a spike too: one run is not a
    # new level (min_size), and the next commit will show whether it was.
    for end, a, b in ((0, 1, 2), (len(y) - 1, len(y) - 2, len(y) - 3)):
        if (len(y) >= 4 and abs(y[end] - y[a]) > _SPIKE_SIGMAS * sigma
                and abs(y[a] - y[b]) < _SPIKE_SIGMAS * sigma):
            out[end] = y[a]
    return out


def _pelt(sums: _Sums, n: int, penalty: float, sigma2: float, min_size: int) -> list[int]:
    """Segment starts of the optimal segmentation (Killick et al. 2012, with pruning)."""
    best = [0.0] * (n + 1)
    best[0] = -penalty
    last = [0] * (n + 1)
    candidates = [0]
    for t in range(min_size, n + 1):
        costs = {s: best[s] + sums.fit(s, t)[2] / sigma2 + penalty
                 for s in candidates if t - s >= min_size}
        if not costs:  # t < 2 * min_size beyond a candidate: one segment from 0
            costs = {0: sums.fit(0, t)[2] / sigma2}
        s_best = min(costs, key=costs.__getitem__)
        best[t], last[t] = costs[s_best], s_best
        # PELT's pruning: a start that cannot beat the best now never will (K = 0 for RSS).
        candidates = [s for s in candidates if t - s < min_size or costs[s] - penalty <= best[t]]
        if t + 1 - min_size >= 0 and t <= n - min_size:
            candidates.append(t)
    starts, t = [], n
    while t > 0:
        starts.append(last[t])
        t = last[t]
    return sorted(set(starts))


def detect(values: Sequence[float], *, z_min: float = 5.0, penalty: float | None = None,
           noise_floor: float = 1e-4, min_size: int = 2) -> Detection:
    """Steps and drifts in ``values`` (positive numbers, one per commit, in order).

    Args:
        z_min: how many standard errors of the history's noise a change must reach
            to be ``exceeds_noise``.
        penalty: the cost of one more segment, in units of sigma^2; default
            ``3 * log(n)``.
        noise_floor: the least relative noise assumed (1e-4: 0.01%); raise it for
            series known to be noisier than they look, lower it for counts.
        min_size: the fewest points a level holds (2: one run is not a new level).

    Raises:
        ValueError: a value that is not a finite positive number.
    """
    bad = [v for v in values if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"change points need finite positive values, got {bad[0]!r}")
    n = len(values)
    if n == 0:
        return Detection([], 0.0, [], [])
    center = math.log(statistics.median(values))
    raw = [math.log(v) - center for v in values]
    sigma = max(noise_sigma(raw), math.log1p(noise_floor))
    y = _despike(raw, sigma)
    if n < 2 * min_size:
        starts = [0]
    else:
        beta = 3 * math.log(n) if penalty is None else penalty
        starts = _pelt(_Sums(y), n, beta, sigma * sigma, min_size)
    segments = _fuse_staircases(y, list(zip(starts, [*starts[1:], n])), sigma, z_min)
    sums = _Sums(y)
    fits = [sums.fit(a, b) for a, b in segments]
    # The tests use the larger of the difference-based sigma and the fit's own residual
    # sigma (its degrees of freedom counted): on a short history either alone can come
    # out low by chance, and a low sigma is what makes noise look like a change.
    dof = n - sum(3 if b - a >= 3 else 1 for a, b in segments)
    if dof > 0:
        sigma = max(sigma, math.sqrt(sum(f[2] for f in fits) / dof))
    # A segment is a line only where its slope is beyond the noise; otherwise it is a
    # level (its mean), which is what the step between two levels is tested on.
    sloped = [_slope_z(a, b, f[1], sigma) >= z_min for (a, b), f in zip(segments, fits)]
    levels = [f[:2] if line else (sums.mean(a, b), 0.0)
              for (a, b), f, line in zip(segments, fits, sloped)]
    fit = [math.exp(center + levels[j][0] + levels[j][1] * (i - a))
           for j, (a, b) in enumerate(segments) for i in range(a, b)]
    changes: list[Change] = []
    for j, (a, b) in enumerate(segments):
        level = levels[j][0]
        if j > 0:
            (a0, b0), (before_level, before_slope) = segments[j - 1], levels[j - 1]
            before = before_level + before_slope * (b0 - 1 - a0)
            if sloped[j - 1] or sloped[j]:
                z = _step_z(y, (a0, b0), (a, b), sigma)
            else:  # two levels: a two-sample z on their means
                z = abs(level - before) / (sigma * math.sqrt(1 / (b0 - a0) + 1 / (b - a)))
            changes.append(Change("step", a - 1, a, math.expm1(level - before),
                                  math.exp(center + before), math.exp(center + level), z,
                                  z >= z_min))
        if sloped[j]:  # a level has no drift to report
            z = _slope_z(a, b, fits[j][1], sigma)
            start, end = fits[j][0], fits[j][0] + fits[j][1] * (b - 1 - a)
            changes.append(Change("drift", a, b - 1, math.expm1(end - start),
                                  math.exp(center + start), math.exp(center + end), z,
                                  z >= z_min))
    return Detection(changes, math.expm1(sigma), fit, segments)


def _slope_z(a: int, b: int, slope: float, sigma: float) -> float:
    """A segment's slope in standard errors (0 for a segment fitted flat)."""
    if b - a < 3 or slope == 0:
        return 0.0
    mean_x = (a + b - 1) / 2
    return abs(slope) * math.sqrt(sum((x - mean_x) ** 2 for x in range(a, b))) / sigma


def _step_z(y: Sequence[float], left: tuple[int, int], right: tuple[int, int],
            sigma: float) -> float:
    """How far the jump between two segments exceeds the noise: the square root of the
    residual sum of squares a continuous fit (two lines meeting at the boundary, a
    likelihood-ratio test of the jump) adds, over sigma. A drift that starts between
    two points is continuous, so it is no step, however the fit split it."""
    sums = _Sums(y)
    (a0, b0), (a1, b1) = left, right
    rss_jump = sums.fit(a0, b0)[2] + sums.fit(a1, b1)[2]
    # The knot within a point of the boundary: where a ramp starts is uncertain by one.
    rss_hinge = min(_hinge_rss(y, a0, b1, knot) for knot in range(max(a0, b0 - 2), min(b1, b0 + 2)))
    return math.sqrt(max(rss_hinge - rss_jump, 0.0)) / sigma


def _hinge_rss(y: Sequence[float], a: int, b: int, knot: int) -> float:
    """RSS of points [a, b) fitted by two lines that meet at point ``knot``."""
    rows = [(1.0, float(min(x - knot, 0)), float(max(x - knot, 0))) for x in range(a, b)]
    ys = [y[x] for x in range(a, b)]
    coef = _least_squares(rows, ys)
    return sum((v - sum(c * r for c, r in zip(coef, row))) ** 2 for row, v in zip(rows, ys))


def _least_squares(rows: Sequence[tuple[float, ...]], ys: Sequence[float]) -> list[float]:
    """Least squares by the normal equations (tiny, well-conditioned systems only);
    a column with no information gets a zero coefficient."""
    k = len(rows[0])
    a: list[list[float]] = [[sum(r[i] * r[j] for r in rows) for j in range(k)]
                            + [sum(r[i] * v for r, v in zip(rows, ys))] for i in range(k)]
    for col in range(k):  # Gauss-Jordan with partial pivoting
        pivot = max(range(col, k), key=lambda i: abs(a[i][col]))
        if abs(a[pivot][col]) < 1e-12:
            for row in a:
                row[col] = 0.0
            continue
        a[col], a[pivot] = a[pivot], a[col]
        for i in range(k):
            if i != col and a[i][col]:
                f = a[i][col] / a[col][col]
                a[i] = [x - f * p for x, p in zip(a[i], a[col])]
    return [a[i][k] / a[i][i] if abs(a[i][i]) >= 1e-12 else 0.0 for i in range(k)]


def _fuse_staircases(y: Sequence[float], segments: list[tuple[int, int]], sigma: float,
                     z_min: float) -> list[tuple[int, int]]:
    """Joins neighbouring segments that slope the same way when one line fits both as
    well, within the noise (the residual sum of squares it adds under z_min^2 sigma^2):
    a long ramp under noise can fit best as a saw of short lines, yet it is one drift."""
    sums = _Sums(y)
    fused = True
    while fused:
        fused = False
        for j in range(1, len(segments)):
            (a0, b0), (a1, b1) = segments[j - 1], segments[j]
            (_, s0, rss0), (_, s1, rss1) = sums.fit(a0, b0), sums.fit(a1, b1)
            extra = sums.fit(a0, b1)[2] - rss0 - rss1
            # A two-point segment has no slope of its own: it continues its neighbour's.
            same_way = s0 * s1 > 0 or (b0 - a0 < 3 and s1 != 0) or (b1 - a1 < 3 and s0 != 0)
            if same_way and extra < (z_min * sigma) ** 2:
                segments[j - 1:j + 1] = [(a0, b1)]
                fused = True
                break
    return segments
