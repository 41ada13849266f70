"""Change points: where a benchmark's history steps up or down, or starts to drift.

A history is one value per commit (the median of that commit's runs), in commit
order, each weighed by how many runs it holds (``detect_runs`` takes the runs
themselves). The values are taken as logarithms (a change is a ratio, whatever the
benchmark's scale) and fitted with a **piecewise-linear** function chosen by a
penalised least-squares fit: the segmentation that minimises

    sum over segments of RSS(segment) / sigma**2  +  penalty * (number of segments)

solved exactly by PELT (Killick, Fearnhead & Eckley, "Optimal detection of
changepoints with a linear computational cost", JASA 107(500), 2012), where a
segment is fitted by its mean, or, from three points on, by a straight line
when the line's slope pays for itself (its RSS lower by ``z_min**2`` sigma^2: the
slope is beyond the noise, as a drift is reported); the RSS is weighted by each
commit's runs (a commit of three runs knows its level three times as well as
one of one run), and sigma is the noise of one run. A segment holds at least
two *runs*: one run is never a new level, but one commit measured three times
is, so a step after the first commit stays a step, and a spike (one commit
slower, the next fixed) is two steps. Each
boundary whose two fits disagree at the boundary is a **step**; each segment
whose slope is not zero is a **drift**.

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
cancel levels and slopes, the median ignores the few that straddle a step. Where
commits hold several runs, the spread between the runs of one commit (pooled,
by the median absolute difference of pairs: a run that load pushed up does not
inflate it) estimates it instead, free of any change that second differences
straddle (a spike in a short history spoils most of them). It is
floored at ``noise_floor`` (relative), so a history of identical instruction
counts does not make every last-digit change infinitely significant. A single
run far from both its neighbours (a burst of load on the machine), while they
agree with each other, is replaced by their mean before fitting (a one-point
spike is not a change: the next commit would show it); a commit measured more
than once is never replaced, its runs agree on its level. The penalty defaults to
``3 * log(n)`` per segment (the BIC's, for three parameters a segment: start,
level, slope).

Tests against the noise. After the fit, sigma becomes the larger of that
estimate and the fit's own residual sigma (on a short history either alone can
come out low by chance). A step's ``z`` is a likelihood-ratio statistic: the
square root of what a *continuous* fit (two lines meeting at the boundary)
adds to the residual sum of squares, over sigma, so a drift that the fit happened
to split is not also a step. A drift's ``z`` is its slope over the slope's
standard error. Levels are the default because a line fits a step almost as
well: with lines free, a step with a little noise came out as "a drift over
eleven commits" (issue 38); a slope must earn its place, as a new segment must.
A change ``exceeds_noise`` when ``z >= z_min``, 5 by
default: in 400 flat histories of 40 runs with 1% noise, one had a false change
(``tests/test_changepoints.py``, ``benchmarks/history.py``).

Paired rounds. A step between two commits whose levels are a few runs each is
often within the noise when it is real: a 10% step between two single-commit
levels of three runs each, against 3% run-to-run noise, is z = 4.2. More runs
of one commit added later do not settle it: they share that later state of the
machine, and their offset against the other commits' runs becomes a "change" of
its own (``benchmarks/real_history.py`` measured five false changes in nine
histories that way). Runs in *rounds* do: each round runs the commit before the
step and the one after it back to back, so what the machine did then is in both,
and their log ratio is the step, free of it. ``detect_runs(runs, rounds={i:
[(before, after), ...]})`` tests the step between commits ``i`` and ``i + 1``
on the two estimates together (inverse-variance weighted): the fit's (its levels'
difference, or, where the fit has no boundary there, the two commits' medians')
and the rounds' mean log ratio, whose standard error is their spread over the
square root of their number, never below what the runs' own noise gives a ratio
of two runs (a few rounds can agree by chance). A round whose ratio lies
``_SPIKE_SIGMAS`` robust sigmas or more from the rounds' median (their MAD, never
below two runs' noise) is left out first, as a lone run is despiked: one of its
runs shared its core with another tenant's work short of what the speed probe
leaves out. Where the two estimates disagree
beyond chance (``_DISAGREE_Z`` standard errors of their difference), the rounds
alone decide: the fit's standard error counts the runs' noise, not an offset
that all the runs of a commit shared (a stretch of time, a core shared all
along), and splitting the difference would keep half of that offset. A step in
doubt (the fit's ``z`` below ``CONFIRM_Z``, or no boundary there) holds only where
the rounds alone read it the same way by ``_SEEN_Z`` (1.96) standard errors or
more, their 95% interval clear of 0; else, too, the rounds alone decide. Where that is beyond the noise
and the fit had no boundary there, the fit is made again with one (``breaks``).
A commit with one run (its others left out) is no level, and is despiked as one;
where rounds ran it against both of its neighbours and put it beyond the noise from
one of them at least, it is a level of its own all the same: the rounds ran it at
full speed against each, and placed it. A step's
``rounds`` says how many rounds its ``z`` holds. ``doubts`` names the steps worth
rounds: the commits apart by ``DOUBT_Z`` with no change beyond the
noise between them, and the changes beyond the noise by less than ``CONFIRM_Z``
(the false changes of ``benchmarks/real_history.py`` were such: rounds settle a
step either way).

Example:
    >>> values = [1.0] * 10 + [1.15] * 10
    >>> [(c.kind, c.start, c.end, round(c.size, 2)) for c in detect(values).changes]
    [('step', 9, 10, 0.15)]
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Collection, Mapping, Sequence
from typing import Any

__all__ = ["CONFIRM_Z", "DOUBT_Z", "Z_MIN", "Change", "Detection", "detect", "detect_runs", "doubts",
           "replicate_noise"]

#: How many standard errors of the noise a change must reach to be beyond it, by default
#: (module doc: one false change in 400 flat histories).
Z_MIN = 5.0
#: Two neighbouring commits whose levels differ by this many standard errors of the runs'
#: own noise, with no change beyond the noise between them, are a step in doubt
#: (``doubts``): in the histories of ``benchmarks/real_history.py`` the last release's
#: -10% step read 2.5 or more in 11 of 13, and three to ten such steps came per history
#: of seven benchmarks over thirteen commits.
DOUBT_Z = 2.5
#: A step beyond the noise by fewer standard errors than this, by its levels, is in doubt
#: too (``doubts``): its commits' runs can share an offset their noise does not count (a
#: stretch of time, a core shared all along). In ``benchmarks/real_history.py`` under load
#: the false changes read z = 5.2 to 5.3 and the real steps of 10% or more from z = 5.2 up;
#: the real ones pass their rounds, the false ones do not.
CONFIRM_Z = 8.0
# The fit's estimate and the rounds' disagree beyond chance at this many standard errors of
# their difference: the fit's carries an offset, and the rounds alone say the step.
_DISAGREE_Z = 3.0
# Rounds that read a step in doubt by fewer standard errors than this (their 95% interval
# reaches 0) do not confirm it: the levels alone may owe it to an offset (module doc).
_SEEN_Z = 1.96
# Rounds fewer than this say nothing of their own spread: they are not used.
_MIN_ROUNDS = 3
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
    ``z >= z_min``. ``rounds``: the paired rounds a step's ``z`` also holds (module doc).
    """

    kind: str
    start: int
    end: int
    size: float
    before: float
    after: float
    z: float
    exceeds_noise: bool
    rounds: int = 0

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
    """Weighted prefix sums that give any segment's least-squares fit in O(1)."""

    def __init__(self, y: Sequence[float], w: Sequence[float] | None = None) -> None:
        self.s = [(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)]
        for i, v in enumerate(y):
            c = 1.0 if w is None else w[i]
            sx, sxx, sy, sxy, syy, sw = self.s[-1]
            self.s.append((sx + c * i, sxx + c * i * i, sy + c * v, sxy + c * i * v,
                           syy + c * v * v, sw + c))

    def weight(self, a: int, b: int) -> float:
        return self.s[b][5] - self.s[a][5]

    def mean(self, a: int, b: int) -> float:
        return (self.s[b][2] - self.s[a][2]) / self.weight(a, b)

    def fit(self, a: int, b: int) -> tuple[float, float, float]:
        """(intercept at point a, slope, weighted RSS) of points [a, b): a line from three
        points on, the mean below."""
        sx, sxx, sy, sxy, syy, n = (hi - lo for hi, lo in zip(self.s[b], self.s[a]))
        mx, my = sx / n, sy / n
        cyy = max(syy - sy * my, 0.0)
        cxx = sxx - sx * mx
        if b - a < 3 or cxx <= 1e-12:
            return my, 0.0, cyy
        slope = (sxy - sx * my) / cxx
        return my - slope * (mx - a), slope, max(cyy - slope * slope * cxx, 0.0)

    def level_rss(self, a: int, b: int) -> float:
        """Weighted RSS of points [a, b) about their mean."""
        sy, syy, n = (self.s[b][k] - self.s[a][k] for k in (2, 4, 5))
        return max(syy - sy * sy / n, 0.0)

    def cost(self, a: int, b: int, sigma2: float, slope_cost: float) -> float:
        """What points [a, b) cost as one segment, in units of sigma^2: a level's RSS, or a
        line's when its slope pays for itself (``slope_cost``: z_min^2, so a line is used
        exactly where its slope would be reported beyond the noise)."""
        level = self.level_rss(a, b) / sigma2
        if b - a < 3:
            return level
        return min(level, self.fit(a, b)[2] / sigma2 + slope_cost)

    def spread(self, a: int, b: int) -> float:
        """The weighted sum of squared distances of points [a, b) from their mean
        position: what a slope's standard error divides by."""
        sx, sxx, n = (self.s[b][k] - self.s[a][k] for k in (0, 1, 5))
        return max(sxx - sx * sx / n, 0.0)


def noise_sigma(y: Sequence[float]) -> float:
    """The noise sigma of ``y`` from its median absolute second difference (0 below 3
    points)."""
    d2 = [y[i + 1] - 2 * y[i] + y[i - 1] for i in range(1, len(y) - 1)]
    if not d2:
        return 0.0
    center = statistics.median(d2)
    return _MAD_TO_SIGMA * statistics.median(abs(d - center) for d in d2)


def _despike(y: list[float], sigma: float, w: Sequence[float]) -> list[float]:
    """A lone single run far from its neighbours, which agree, replaced by them (a run
    measured more than once is a level, never replaced); ``sigma``: one run's noise."""
    out = list(y)

    def far(a: int, b: int) -> bool:
        return abs(y[a] - y[b]) > _SPIKE_SIGMAS * sigma * math.sqrt(1 / w[a] + 1 / w[b])

    for i in range(1, len(y) - 1):
        if w[i] > 1:
            continue
        left, right = y[i] - y[i - 1], y[i] - y[i + 1]
        if far(i, i - 1) and far(i, i + 1) and left * right > 0 and not far(i - 1, i + 1):
            out[i] = (y[i - 1] + y[i + 1]) / 2
    # At either end a lone run far from two that agree is a spike too: one run is not a
    # new level (min_size), and the next commit will show whether it was.
    for end, a, b in ((0, 1, 2), (len(y) - 1, len(y) - 2, len(y) - 3)):
        if len(y) >= 4 and w[end] <= 1 and far(end, a) and not far(a, b):
            out[end] = y[a]
    return out


def _pelt(sums: _Sums, n: int, penalty: float, sigma2: float, min_size: float,
          slope_cost: float) -> list[int]:
    """Segment starts of the optimal segmentation (Killick et al. 2012, with pruning); a
    segment weighs ``min_size`` (runs) at least."""
    best = [0.0] * (n + 1)
    best[0] = -penalty
    last = [0] * (n + 1)
    candidates = [0]
    for t in range(1, n + 1):
        if sums.weight(0, t) < min_size:
            continue
        costs = {s: best[s] + sums.cost(s, t, sigma2, slope_cost) + penalty
                 for s in candidates if sums.weight(s, t) >= min_size}
        if not costs:  # too little beyond a candidate: one segment from 0
            costs = {0: sums.cost(0, t, sigma2, slope_cost)}
        s_best = min(costs, key=costs.__getitem__)
        best[t], last[t] = costs[s_best], s_best
        # PELT's pruning: a start that cannot beat the best now never will. Splitting a
        # segment can cost up to one slope more, so K = slope_cost (Killick et al.'s K).
        candidates = [s for s in candidates if sums.weight(s, t) < min_size
                      or costs[s] - penalty - slope_cost <= best[t]]
        if sums.weight(t, n) >= min_size:
            candidates.append(t)
    starts, t = [], n
    while t > 0:
        starts.append(last[t])
        t = last[t]
    return sorted(set(starts))


def replicate_noise(runs: Sequence[Sequence[float]]) -> float | None:
    """The noise of one run (a log-space sigma) from the spread between the runs of each
    commit: the median absolute difference of every pair of runs of one commit, pooled
    over the commits, made a sigma (for normal noise, the median |difference| of two runs
    is 0.6745 * sqrt(2) sigma). None when no commit has two runs.

    >>> round(replicate_noise([[1.0, 1.02], [2.0, 2.04, 1.96]]), 4)
    0.021
    """
    diffs = [abs(math.log(a) - math.log(b)) for values in runs
             for i, a in enumerate(values) for b in values[i + 1:]]
    if not diffs:
        return None
    return statistics.median(diffs) / (0.6745 * math.sqrt(2))


def detect_runs(runs: Sequence[Sequence[float]], *, trusted: Sequence[bool] | None = None,
                rounds: Mapping[int, Sequence[tuple[float, float]]] | None = None,
                **options: Any) -> Detection:
    """``detect`` on runs grouped by commit (one list of run values per commit, in commit
    order): each commit's value is its runs' median, weighed by how many there are, and
    the spread between them is a second estimate of the noise (``replicate_noise``); a
    commit whose runs scatter weighs less, unless it stands between its neighbours
    beyond its own scatter (``_apart``). A commit not ``trusted`` (its runs all measured
    in a state of the machine the others were not) weighs as one run at most: no level
    of its own, despiked as a lone run.
    ``rounds`` maps a step (``i``: between commits ``i`` and ``i + 1``) to paired rounds,
    (run before, run after) each, that its test also holds (module doc).

    Example:
        >>> runs = [[1.0, 1.01, 0.99]] * 2 + [[1.5, 1.49, 1.52]] + [[1.0, 0.99, 1.01]] * 3
        >>> [(c.kind, c.start, c.end) for c in detect_runs(runs).changes if c.exceeds_noise]
        [('step', 1, 2), ('step', 2, 3)]
    """
    if any(not values for values in runs):
        raise ValueError("every commit needs at least one run")
    noise = options.setdefault("run_noise", replicate_noise(runs))
    values = [statistics.median(v) for v in runs]
    weights = [_weight(v, noise) for v in runs]
    z_min, least = options.get("z_min", Z_MIN), options.get("min_size", 2)
    weights = [max(w, least) if i in _apart(runs, noise, z_min) else w
               for i, w in enumerate(weights)]
    if trusted is not None:
        weights = [w if ok else min(w, 1.0) for w, ok in zip(weights, trusted)]
    detection = detect(values, weights=weights, **options)
    if not rounds:
        return detection
    tested = _paired(detection, values, weights, rounds, noise)
    # A step the rounds put beyond the noise where the fit drew no boundary (the two
    # commits' levels merged with their neighbours'): the fit again, with that boundary,
    # where each of the two commits can be a level. A commit short of one (its runs left
    # out: another tenant's) would join the other level across it and read as its step.
    starts = {a for a, _ in detection.segments}
    # A commit that rounds ran against both of its neighbours, putting it beyond the noise
    # from one of them at least, is a level of its own even where fewer runs than a
    # level's count (another tenant took the others' minutes): the rounds ran it at full
    # speed, back to back with each neighbour, and placed it. Weighed as less, it was
    # despiked into its neighbours (a +86% spike between two releases vanished), or
    # joined the level across its step, which was then drawn a commit late, where its
    # rounds read no change (a -23% step lost; benchmarks/real_history.py).
    # So is one that rounds put beyond the noise from one neighbour, where its runs stand
    # apart from both beyond their own scatter (``_apart``): a +86% release whose runs
    # read 37.9, 40.4 and 59.6 us between two of 21 and 24, its rounds against the one
    # before reading +81% to +102%, had been drawn into a "drift" from the level before.
    # The first and the last commit have one neighbour: rounds against it place them (the
    # newest release's -24% step, its runs at 1.47 to 1.54 us, joined the level before it).
    beyond = {i for i, (z, _) in tested.items() if z >= z_min}
    apart = _apart(runs, noise, z_min, spikes=True)
    vouched = set()
    for i in range(len(values)):
        sides = {i - 1, i} & set(range(len(values) - 1))  # the steps beside commit i
        if weights[i] < least and sides & beyond and (sides <= set(tested) or i in apart):
            vouched.add(i)
    if vouched:
        weights = [max(w, least) if i in vouched else w for i, w in enumerate(weights)]
    forced = {i + 1 for i in beyond if min(weights[i], weights[i + 1]) >= least} - starts
    if forced:
        detection = detect(values, weights=weights, breaks=forced, **options)
        tested = _paired(detection, values, weights, rounds, noise)
    changes = [dataclasses.replace(c, z=tested[c.start][0], exceeds_noise=tested[c.start][0] >= z_min,
                                   rounds=tested[c.start][1])
               if c.kind == "step" and c.start in tested else c for c in detection.changes]
    return dataclasses.replace(detection, changes=changes)


def _paired(detection: Detection, values: Sequence[float], weights: Sequence[float],
            rounds: Mapping[int, Sequence[tuple[float, float]]],
            run_noise: float | None) -> dict[int, tuple[float, int]]:
    """Each step with enough rounds -> (its z on the fit's estimate and the rounds' together,
    the rounds): inverse-variance weighted, the rounds' standard error their spread over
    the square root of their number, never below two runs' noise (module doc)."""
    sigma = math.log1p(detection.noise)
    steps = {c.start: c for c in detection.changes if c.kind == "step"}
    tested = {}
    for i, pairs in rounds.items():
        floor = math.sqrt(2) * (run_noise or sigma)  # two runs' noise: a round's least
        ratios = _kept([math.log(b / a) for a, b in pairs if a > 0 and b > 0], floor)
        if not 0 <= i < len(values) - 1 or len(ratios) < _MIN_ROUNDS:
            continue
        spread = max(statistics.stdev(ratios), floor)
        paired, paired_var = statistics.fmean(ratios), spread**2 / len(ratios)
        step = steps.get(i)
        if step is not None and step.z > 0 and step.size != 0:  # the fit's levels
            fitted = math.log1p(step.size)
            fitted_var = (fitted / step.z) ** 2
        else:  # no boundary there: the two commits' own levels
            fitted = math.log(values[i + 1] / values[i])
            fitted_var = sigma**2 * (1 / weights[i] + 1 / weights[i + 1])
        alone = paired / math.sqrt(paired_var)
        # The rounds alone decide where the levels may owe the step to an offset their
        # runs shared (their noise does not count it; the rounds' cancels in each ratio,
        # and together the two would split the difference): where the two disagree beyond
        # chance, or where the step is in doubt and the rounds do not see it themselves
        # (their 95% interval reaches 0, or they read it the other way).
        disagree = abs(fitted - paired) >= _DISAGREE_Z * math.sqrt(fitted_var + paired_var)
        unseen = (step is None or step.z < CONFIRM_Z) and (alone * fitted <= 0 or abs(alone) < _SEEN_Z)
        if disagree or unseen:
            tested[i] = (abs(alone), len(ratios))
            continue
        both = (fitted / fitted_var + paired / paired_var) / (1 / fitted_var + 1 / paired_var)
        tested[i] = (abs(both) * math.sqrt(1 / fitted_var + 1 / paired_var), len(ratios))
    return tested


def _kept(ratios: list[float], floor: float) -> list[float]:
    """A step's rounds (log ratios) less those ``_SPIKE_SIGMAS`` or more robust sigmas from
    their median (their MAD made a sigma, never below ``floor``): a round one of whose runs
    another tenant slowed, short of what the speed probe leaves out, as a lone run is a
    spike. One such round of ten (+27% among rounds of -6% to -16%) took a -10% step's z
    from 9 to 1.7 (``benchmarks/real_history.py``)."""
    if len(ratios) < _MIN_ROUNDS:
        return ratios
    middle = statistics.median(ratios)
    spread = max(1.4826 * statistics.median(abs(r - middle) for r in ratios), floor)
    return [r for r in ratios if abs(r - middle) < _SPIKE_SIGMAS * spread]


def doubts(runs: Sequence[Sequence[float]], detection: Detection, *,
           z: float = DOUBT_Z, confirm: float = CONFIRM_Z) -> list[int]:
    """The steps in doubt (``i``: between commits ``i`` and ``i + 1``; ``runs`` and
    ``detection`` as ``detect_runs`` takes and gives them): neighbouring commits whose
    medians differ by ``z`` or more standard errors of the runs' own noise
    (``replicate_noise``, else the history's), with no step beyond the noise between them,
    and the steps beyond the noise by less than ``confirm`` (``CONFIRM_Z``). Paired rounds
    there settle them, either way (module doc).

    Example:
        >>> runs = [[1.0, 1.02, 0.98]] * 4 + [[0.95, 0.94, 0.96]]
        >>> doubts(runs, detect_runs(runs))
        [3]
        >>> rounds = {3: [(1.0, 0.95), (1.01, 0.95), (0.99, 0.94), (1.0, 0.96)] * 2}
        >>> step = detect_runs(runs, rounds=rounds).changes[0]
        >>> step.exceeds_noise, step.rounds
        (True, 8)
    """
    noise = replicate_noise(runs) or math.log1p(detection.noise)
    beyond = {c.start: c.z for c in detection.changes if c.kind == "step" and c.exceeds_noise}
    values = [statistics.median(v) for v in runs]
    found = []
    for i in range(len(runs) - 1):
        if i in beyond:  # beyond the noise, but only just?
            in_doubt = beyond[i] < confirm
        else:  # within the noise, but are the two commits apart?
            in_doubt = abs(math.log(values[i + 1] / values[i])) \
                >= z * noise * math.sqrt(1 / len(runs[i]) + 1 / len(runs[i + 1]))
        if in_doubt:
            found.append(i)
    return found


def _apart(runs: Sequence[Sequence[float]], noise: float | None, z_min: float, *,
           spikes: bool = False) -> set[int]:
    """The commits (not the first or last) whose median lies between their neighbours',
    ``z_min`` or more standard errors from each, by the larger of their own runs' robust
    spread and the history's ``noise``: a level of its own however its runs scatter (``_weight``
    weighs a scattered commit as fewer runs than a level's count). No scatter of its runs
    explains where it stands, and with its runs short of a level it was drawn into a line
    from one neighbour to the other: packaging 26.0, between a -64% and a -57% step, its
    runs at 16.0, 16.6 and 18.0 us, made the two steps a "drift" and one step was lost
    (``benchmarks/real_history.py``). With ``spikes``, a commit above or below both
    neighbours too: two of three runs that shared a slowed core make such a median, so
    ``detect_runs`` takes it as a level only where rounds confirm it."""
    found = set()
    for i in range(1, len(runs) - 1):
        if len(runs[i]) < 2:
            continue
        logs = [math.log(v) for v in runs[i]]
        centre = statistics.median(logs)
        sigma = max(1.4826 * statistics.median(abs(x - centre) for x in logs), noise or 0.0)
        if sigma <= 0:
            continue
        steps = [centre - math.log(statistics.median(runs[j])) for j in (i - 1, i + 1)]
        if (spikes or steps[0] * steps[1] < 0) and all(  # between them: a stair
                abs(step) >= z_min * sigma * math.sqrt(1 / len(runs[i]) + 1 / len(runs[j]))
                for step, j in zip(steps, (i - 1, i + 1))):
            found.add(i)
    return found


def _weight(values: Sequence[float], noise: float | None) -> float:
    """How many runs' worth a commit's median is: its runs, fewer when they disagree far
    beyond the history's noise (runs scattered by load make a median that is no level:
    it weighs as one run, or less, and is despiked as one). "Far": their robust spread
    beyond what chance gives one commit in a thousand."""
    if len(values) < 2 or not noise:
        return float(len(values))
    # Their spread about the median (a robust sigma: one run of three far off leaves the
    # median where the other two are, and the commit's weight with it).
    logs = [math.log(v) for v in values]
    centre = statistics.median(logs)
    sigma = 1.4826 * statistics.median(abs(x - centre) for x in logs)
    spread = sigma**2 / noise**2
    return len(values) / max(1.0, spread / _chi2_ratio(len(values) - 1, 0.999))


def _chi2_ratio(df: int, p: float) -> float:
    """The ``p`` quantile of chi-squared over its ``df`` (Wilson-Hilferty, within 1% from
    df = 2 at p = 0.999): how far a variance of ``df`` degrees may exceed sigma^2 by
    chance."""
    z = statistics.NormalDist().inv_cdf(p)
    c = 2 / (9 * df)
    return (1 - c + z * math.sqrt(c)) ** 3


def detect(values: Sequence[float], *, weights: Sequence[float] | None = None,
           run_noise: float | None = None, z_min: float = Z_MIN, penalty: float | None = None,
           noise_floor: float = 1e-4, min_size: int = 2,
           breaks: Collection[int] = ()) -> Detection:
    """Steps and drifts in ``values`` (positive numbers, one per commit, in order).

    Args:
        weights: how many runs each value is worth (default one each: its runs, or fewer
            where they disagree; ``detect_runs``).
        run_noise: one run's noise as a log-space sigma, from replicates
            (``replicate_noise``), used instead of the second differences' estimate.
        z_min: how many standard errors of the history's noise a change must reach
            to be ``exceeds_noise``.
        penalty: the cost of one more segment, in units of sigma^2; default
            ``3 * log(n)``.
        noise_floor: the least relative noise assumed (1e-4: 0.01%); raise it for
            series known to be noisier than they look, lower it for counts.
        min_size: the fewest runs a level holds (2: one run is not a new level).
        breaks: points where a segment must start (a step paired rounds settled), each
            kept where ``min_size`` runs lie on both of its sides.

    Raises:
        ValueError: a value that is not a finite positive number, or weights that do not
            match the values.
    """
    bad = [v for v in values if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0)]
    if bad:
        raise ValueError(f"change points need finite positive values, got {bad[0]!r}")
    n = len(values)
    w = [1.0] * n if weights is None else [float(c) for c in weights]
    if len(w) != n or any(not (math.isfinite(c) and c > 0) for c in w):
        raise ValueError(f"weights must be one positive run count per value: {len(w)} for "
                         f"{n}")
    if n == 0:
        return Detection([], 0.0, [], [])
    center = math.log(statistics.median(values))
    raw = [math.log(v) - center for v in values]
    # Replicates measure one run's noise free of any change; without them, the second
    # differences of commit values (whose noise is one run's over sqrt(runs)) do. The
    # fit's residuals check either below.
    sigma = max(run_noise if run_noise is not None else
                noise_sigma(raw) * math.sqrt(statistics.median(w)), math.log1p(noise_floor))
    y = _despike(raw, sigma, w)
    sums = _Sums(y, w)
    if sum(w) < 2 * min_size or n < 2:
        starts = [0]
    else:
        beta = 3 * math.log(n) if penalty is None else penalty
        starts = []  # each piece between the breaks is segmented on its own
        for a, b in _pieces(w, breaks, min_size):
            starts += [a + s for s in _pelt(_Sums(y[a:b], w[a:b]), b - a, beta, sigma * sigma,
                                            min_size, z_min * z_min)]
    segments = list(zip(starts, [*starts[1:], n]))
    fits = [sums.fit(a, b) for a, b in segments]
    # The tests use the larger of that sigma and the fit's own residual sigma (its degrees
    # of freedom counted): on a short history either alone can come out low by chance, and
    # a low sigma is what makes noise look like a change. With replicates the residual
    # sigma is robust (the median residual, each weighed by its runs): one commit a busy
    # machine pushed off is not the noise of the others, which its runs measured.
    dof = n - sum(3 if b - a >= 3 else 1 for a, b in segments)
    if dof > 0:
        if run_noise is None:
            residual = math.sqrt(sum(f[2] for f in fits) / dof)
        else:
            residual = _residual_sigma(y, w, sums, segments) * math.sqrt(n / dof)
        sigma = max(sigma, residual)
    # A segment is a line only where its slope is beyond the noise; otherwise it is a
    # level (its mean), which is what the step between two levels is tested on.
    sloped = [_slope_z(sums, a, b, f[1], sigma) >= z_min for (a, b), f in zip(segments, fits)]
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
                z = _step_z(y, w, (a0, b0), (a, b), sigma)
            else:  # two levels: a two-sample z on their means
                z = abs(level - before) / (sigma * math.sqrt(1 / sums.weight(a0, b0)
                                                             + 1 / sums.weight(a, b)))
            changes.append(Change("step", a - 1, a, math.expm1(level - before),
                                  math.exp(center + before), math.exp(center + level), z,
                                  z >= z_min))
        if sloped[j]:  # a level has no drift to report
            z = _slope_z(sums, a, b, fits[j][1], sigma)
            start, end = fits[j][0], fits[j][0] + fits[j][1] * (b - 1 - a)
            changes.append(Change("drift", a, b - 1, math.expm1(end - start),
                                  math.exp(center + start), math.exp(center + end), z,
                                  z >= z_min))
    return Detection(changes, math.expm1(sigma), fit, segments)


def _pieces(w: Sequence[float], breaks: Collection[int],
            min_size: float) -> list[tuple[int, int]]:
    """[start, end) of the pieces ``breaks`` cut the points into, a break kept where each
    side holds ``min_size`` runs."""
    cuts, total, start = [0], sum(w), 0.0
    for b in sorted(breaks):
        before = sum(w[cuts[-1]:b]) if 0 < b < len(w) else 0.0
        if 0 < b < len(w) and before >= min_size and total - start - before >= min_size:
            cuts.append(b)
            start += before
    return list(zip(cuts, [*cuts[1:], len(w)]))


def _residual_sigma(y: Sequence[float], w: Sequence[float], sums: _Sums,
                    segments: list[tuple[int, int]]) -> float:
    """One run's noise from the fit's residuals, each scaled by the square root of its
    commit's weight: 1.4826 times their median absolute value (a normal's sigma)."""
    scaled = []
    for a, b in segments:
        intercept, slope, _ = sums.fit(a, b)
        line = b - a >= 3 and slope != 0
        for i in range(a, b):
            fitted = intercept + slope * (i - a) if line else sums.mean(a, b)
            scaled.append(abs(y[i] - fitted) * math.sqrt(w[i]))
    return 1.4826 * statistics.median(scaled) if scaled else 0.0


def _slope_z(sums: _Sums, a: int, b: int, slope: float, sigma: float) -> float:
    """A segment's slope in standard errors (0 for a segment fitted flat)."""
    if b - a < 3 or slope == 0:
        return 0.0
    return abs(slope) * math.sqrt(sums.spread(a, b)) / sigma


def _step_z(y: Sequence[float], w: Sequence[float], left: tuple[int, int],
            right: tuple[int, int], sigma: float) -> float:
    """How far the jump between two segments exceeds the noise: the square root of the
    residual sum of squares a continuous fit (two lines meeting at the boundary, a
    likelihood-ratio test of the jump) adds, over sigma. A drift that starts between
    two points is continuous, so it is no step, however the fit split it."""
    sums = _Sums(y, w)
    (a0, b0), (a1, b1) = left, right
    rss_jump = sums.fit(a0, b0)[2] + sums.fit(a1, b1)[2]
    # The knot within a point of the boundary: where a ramp starts is uncertain by one.
    rss_hinge = min(_hinge_rss(y, w, a0, b1, knot)
                    for knot in range(max(a0, b0 - 2), min(b1, b0 + 2)))
    return math.sqrt(max(rss_hinge - rss_jump, 0.0)) / sigma


def _hinge_rss(y: Sequence[float], w: Sequence[float], a: int, b: int, knot: int) -> float:
    """Weighted RSS of points [a, b) fitted by two lines that meet at point ``knot``."""
    rows = [(1.0, float(min(x - knot, 0)), float(max(x - knot, 0))) for x in range(a, b)]
    roots = [math.sqrt(w[x]) for x in range(a, b)]
    scaled = [tuple(r * c for c in row) for row, r in zip(rows, roots)]
    ys = [y[x] * r for x, r in zip(range(a, b), roots)]
    coef = _least_squares(scaled, ys)
    return sum((v - sum(c * r for c, r in zip(coef, row))) ** 2 for row, v in zip(scaled, ys))


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
