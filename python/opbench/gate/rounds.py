"""The decision of an ``opbench ab`` session (``opbench.revisions.session``): complete
rounds of base and head runs, each benchmark decided on one value per run.

Per benchmark, each run gives one value (the 10th percentile of the run's per-run
times by default, or its median: ``statistic``); ``opbench.stats.decide.runs``
forms the interval of the ratio with the wave as a block (what a wave shares
cancels, every run is a replicate; rounds one after the other are paired),
Student's t: the between-run variance is in it, at the level Holm's step-down gives
it among the suite's benchmarks, with the error budget spent over the looks
(``decide.run_look_confidence``): the chance of any false verdict in the whole
session is at most ``1 - confidence``. Counts (instructions, memory) are decided by
their range. A round in which a run was disturbed all along is left out of its
benchmarks' decisions when two rounds remain (``_drop_hopeless``).

The result is the gate's ``Report``, so ``ab``, ``compare`` and the pytest plugin
tell one story.

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> from opbench.store.results import Results
    >>> run = lambda t: Results([Measurement(1, [t * (1 + i / 1000) for i in range(40)],
    ...                                      TaskSpec("f()", "pass", name="f"))])
    >>> rounds = [(run(1e-6), run(2e-6 * (1 + r / 100))) for r in range(4)]
    >>> report = decide_rounds(rounds, threshold=0.05, confidence=0.95, inconclusive="fail",
    ...                        look=1, looks=1)
    >>> report.rows[0].status, report.exit_status
    ('regression', 1)
"""
from __future__ import annotations

import statistics
from collections.abc import Sequence

from opbench.core import disturbance, identity
from opbench.gate.pooling import disturbed_notes, pool
from opbench.gate.verdicts import Report, Row, counted
from opbench.stats import decide, run_figure
from opbench.store.results import Results

__all__ = ["decide_rounds"]


def _thresholds(results: Results, default: float) -> dict[str, float]:
    return {identity.key(r): r.info.get("threshold", default) for r in results.all()
            if isinstance(r.info.get("threshold", default), float)}


def decide_rounds(rounds: list[tuple[Results, Results]], *, threshold: float, confidence: float,
                  inconclusive: str, look: int, looks: int, statistic: str = "p10",
                  blocks: Sequence[int] | None = None) -> Report:
    """The gate's report on complete rounds (base, head): each benchmark decided on one
    value per run and side (``statistic``: its 10th percentile or median per-run time),
    paired by round, or in the blocks (waves) ``blocks`` labels the rounds with, at its
    Holm level for look ``look`` of ``looks``."""
    per_key: dict[str, tuple[str, list[float], list[float]]] = {}
    only_base: dict[str, None] = {}
    only_head: dict[str, None] = {}
    mismatched: dict[str, None] = {}
    own: dict[str, float] = {}
    labels = list(range(len(rounds))) if blocks is None else list(blocks)
    per_block: dict[str, list[int]] = {}
    busy_old: dict[str, str] = {}
    busy_new: dict[str, str] = {}
    hopeless: dict[str, list[int]] = {}  # key -> its rounds with a run no block of which ran clean
    full_ns = disturbance.machine_full_speed_ns(r for base, head in rounds
                                                for r in (*base.all(), *head.all()))
    for r, (base, head) in enumerate(rounds):
        busy_base: dict[str, str] = {}
        busy_head: dict[str, str] = {}
        old, new = pool(base.all(), disturbed=busy_base), pool(head.all(), disturbed=busy_head)
        for mine, theirs in ((busy_old, busy_base), (busy_new, busy_head)):
            for key, note in theirs.items():
                mine[key] = f"{mine[key]}; round {r + 1}: {note}" if key in mine else \
                    f"round {r + 1}: {note}"
        own.update(_thresholds(head, threshold))
        for key in new:
            if key not in old:
                only_head[key] = None
                continue
            (kind_old, x), (kind_new, y) = old[key], new[key]
            if kind_old != kind_new or "mixed" in (kind_old, kind_new):
                mismatched[key] = None
                continue
            entry = per_key.setdefault(key, (kind_new, [], []))
            per_block.setdefault(key, []).append(labels[r])
            entry[1].append(run_figure.value(x, statistic) if kind_new == "time"
                            else decide.count_figure(x))
            entry[2].append(run_figure.value(y, statistic) if kind_new == "time"
                            else decide.count_figure(y))
            if any(_HOPELESS in notes.get(key, "") for notes in (busy_base, busy_head)) or (
                    kind_new == "time" and _slowed(key, ((base, entry[1][-1]), (head, entry[2][-1])),
                                                   full_ns)):
                hopeless.setdefault(key, []).append(len(entry[1]) - 1)
        for key in old:
            if key not in new:
                only_base[key] = None
    _drop_hopeless(per_key, per_block, hopeless, busy_old)
    alpha = 1 - decide.run_look_confidence(look, looks, confidence)
    timed = [k for k, (kind, x, _) in per_key.items() if kind == "time" and len(x) > 1]
    levels = dict(zip(timed, decide.holm(
        [decide.runs_p_value(per_key[k][1], per_key[k][2], blocks=per_block[k])
         for k in timed], alpha)))
    rows = []
    for key, (kind, x, y) in per_key.items():
        t = own.get(key, threshold)
        if kind != "time":  # counts, by the gate's rules: a round's fewest count a value
            rows.append(counted(key, kind, x, y, t, (len(x), len(y))))
            continue
        # "Same" by the equivalence test at the look's level: Holm's correction guards
        # the verdicts that fail or praise a change, and would make "same" unreachable.
        d = decide.runs(x, y, t, 1 - levels.get(key, alpha), blocks=per_block[key],
                        equivalence_alpha=alpha)
        rows.append(Row(key, kind, statistics.geometric_mean(x), statistics.geometric_mean(y),
                        (len(x), len(y)), d, (len(x), len(y))))
    rows.sort(key=lambda r: -r.decision.ratio)
    what = "10th percentiles" if statistic == "p10" else "medians"
    grouped = ("paired by round" if len(set(labels)) == len(labels) else
               f"in {len(set(labels))} wave(s) of process pairs, each run a replicate")
    method = (f"verdicts on the runs' {what} of per-run time, {grouped} (Student's t "
              f"of the mean log ratio: the between-run variance is in the interval); Baseline "
              f"and New are the geometric means of those, so New / Baseline is the Ratio; "
              f"Holm's step-down over {len(timed)} benchmark(s) at look {look} of {looks}, so "
              f"the {confidence:.0%} holds for slower and faster verdicts over the whole "
              f"session and each interval is wider; \"same\" is each benchmark's equivalence "
              f"test at {1 - alpha:.1%} (its {1 - 2 * alpha:.0%} interval within the threshold)")
    return Report(rows=tuple(rows), only_in_baseline=tuple(only_base),
                       only_in_new=tuple(k for k in only_head if k not in per_key),
                       mismatched=tuple(mismatched), environment_notes=(),
                       threshold=threshold, confidence=confidence, inconclusive=inconclusive,
                       fail_on_missing=False, method=method, replicates="runs",
                       disturbed=tuple(disturbed_notes(busy_old, busy_new, per_key)))


# What pool notes of a run none of whose blocks ran undisturbed.
_HOPELESS = "no block ran undisturbed"


def _slowed(key: str, runs: Sequence[tuple[Results, float]], full_ns: float | None) -> bool:
    """Whether a run of ``runs`` (results, its figure of ``key``) took its figure on a core
    the speed probe read beyond ``FULL_SPEED`` against the session's full speed ``full_ns``,
    as a history leaves such a run out (``opbench.store.history``). Beside two spinning
    processes, 4 of 24 sessions of packaging 25.0 against 26.0 (+86% sorting) were
    inconclusive, with intervals up to [0.16, 27.8]; the 7 runs that scattered were exactly
    those the probe read 1.19x to 2.11x slow, and none of the other 137 read beyond 1.06x
    (``benchmarks/real_history.py``, the changelog)."""
    for results, figure in runs:
        for m in results.all():
            if identity.key(m) != key:
                continue
            slowdown = disturbance.figure_slowdown(m, figure) or 1.0
            if disturbance.machine_slowdown(slowdown, disturbance.full_speed_ns(m),
                                            full_ns) > disturbance.FULL_SPEED:
                return True
    return False


def _drop_hopeless(per_key: dict[str, tuple[str, list[float], list[float]]],
                   per_block: dict[str, list[int]], hopeless: dict[str, list[int]],
                   notes: dict[str, str]) -> None:
    """Leaves out of each benchmark's decision the rounds in which a run was disturbed all
    along (no block of it ran undisturbed: its figure is the busy machine's, measured in
    another state than the other runs'), when at least two rounds remain; ``notes`` gets
    what was done, for the report.

    Runs on a shared machine are not all alike: a core whose hardware sibling another
    tenant keeps busy runs code markedly slower, and a run that spent its benchmark there
    reads that much
    slower, every block alike. One such run among three decided in Student's t, on four
    degrees of freedom, moves the mean log ratio by a third of that and its variance
    with it; two on one side read as a change. Such a run is no replicate of the others."""
    for key, rounds in hopeless.items():
        kind, x, y = per_key[key]
        keep = [i for i in range(len(x)) if i not in rounds]
        if len(keep) < 2 or len(keep) == len(x):
            continue
        per_key[key] = (kind, [x[i] for i in keep], [y[i] for i in keep])
        per_block[key] = [per_block[key][i] for i in keep]
        dropped = f"{len(x) - len(keep)} of {len(x)} round(s) left out of the decision: a run of " \
                  "theirs was disturbed all along, or on a core the speed probe read slowed " \
                  "(its figure is the busy machine's)"
        notes[key] = f"{notes[key]}; {dropped}" if key in notes else dropped
