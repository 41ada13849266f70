"""The regression gate: two sets of results matched benchmark by benchmark, one decision
each, a policy for what cannot be decided, and a report with an exit status.

``python -m opbench compare`` and the pytest plugin (``--opbench-compare``)
both call ``compare``; the statistics are ``opbench.stats.decide``'s. A gate that
says "no regression" must have looked, so nothing passes silently:

* Results are matched by ``opbench.core.identity.key`` (a benchmark's name, else
  its labels, else its statement; plus threads, env and clock: a host-clock
  baseline never meets a CUDA-event result), never by repr; replicates pool.
* A benchmark is a **regression** when its decision is "slower". When no
  interval could be formed (too few samples) or it straddles the threshold,
  while the interval shows a slowdown (lies above 1) that may reach it, or
  no interval could be formed and the ratio is beyond it, it is a
  **possible regression**: with ``inconclusive="fail"``
  (the default) it fails the gate, with "warn" it is reported, with "pass"
  it is only listed.
* One ratio everywhere: the decision's estimate (``Decision.ratio``) is the
  Ratio column, the failure line and the JSON ``ratio``.
* **One figure per run.** Each run of a benchmark counts by its figure, the
  10th percentile of its per-run times (``opbench.stats.run_figure``: the
  code's own cost, which load on the machine moves least), as history, ``ab``
  and ``find`` count it. The table's Baseline and New are the figures the
  Ratio is computed from: New / Baseline is the ratio.
* **Runs.** A key with several results on both sides (a file merged from
  several autosaved runs) is decided on its runs (``decide.runs``: the runs'
  figures are the samples, so the between-run variance is in the interval;
  Baseline and New are their geometric means). With one run a side
  (``decide.figures``), the interval comes from that run's blocks and covers
  within-run noise only; the report says so.
* A benchmark of the baseline missing from the new results is listed, and
  fails the gate with ``fail_on_missing``; new benchmarks are listed.
* Nothing in common is an error (``NothingToCompareError``), not a pass.
* ``metric="byte_rate"`` / ``"flop_rate"`` gates on throughput instead: each
  sample becomes time per byte (per FLOP) of the work declared or counted
  (``opbench.core.throughput``), so a change of work between the runs counts; a
  benchmark without known work is gated on time, and one with work on one side
  only is not compared (listed).
* Memory counts (``MemoryCounts``) give a row per figure, keyed ``key [allocations]``,
  ``[bytes]``, ``[peak]``, ``[leak]`` (and ``[cuda ...]``), decided exactly
  (``opbench.core.memory.decide_memory``): one allocation a call more is a
  regression whatever the threshold; bytes are judged against it.
* Times and instruction counts are compared each with their own kind;
  results from different machines, torch versions or thread settings are
  compared with a warning that names the differences.

The package decides and reports; it runs nothing at a revision (``opbench.revisions``
does, and calls it):

- ``__init__``: ``compare``, the two-file gate, and ``decided``, one benchmark's Row.
- ``pooling``: results matched by key, replicates kept as runs, disturbed blocks left out.
- ``verdicts``: ``Report`` and ``Row``, the verdicts rendered as text, Markdown or JSON.
- ``rounds``: ``decide_rounds``, the decision of an ``opbench ab`` session's rounds.
- ``session_verdicts``: ``ABReport``, an ``opbench ab`` session's verdicts with its
  commits, environments, failed runs and changed functions.
- ``ab``: ``compare_ab`` (``opbench.compare_ab``: interleaved A/B timing in one process).

Floor: analysis; what it may import is the ``floors`` contract in pyproject.toml
(``[tool.importlinter]``, checked by ``lint-imports``).

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> old = [Measurement(1, [1e-6 * (1 + i / 100) for i in range(40)], TaskSpec("f()", "pass"))]
    >>> new = [Measurement(1, [2e-6 * (1 + i / 100) for i in range(40)], TaskSpec("f()", "pass"))]
    >>> report = compare(old, new, threshold=0.05)
    >>> report.rows[0].status, report.exit_status
    ('regression', 1)
"""
from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from opbench import _choices
from opbench.core import identity
from opbench.core.memory import KINDS as _MEMORY_KINDS
from opbench.errors import NothingToCompareError
from opbench.gate.pooling import METRICS, by_run, disturbed_notes, pool, remeasured
from opbench.gate.verdicts import FORMATS, Report, Row, counted, describe_environment, environment_differences
from opbench.stats import decide, run_figure

__all__ = ["FORMATS", "METRICS", "POLICIES", "Report", "Row", "compare", "decided",
           "describe_environment", "disturbed_notes", "environment_differences", "pool",
           "remeasured"]

POLICIES = _choices.POLICIES


def _all(results: Any) -> list[Any]:
    return results.all() if hasattr(results, "all") else list(results)


def compare(
    baseline: Iterable[Any],
    new: Iterable[Any],
    *,
    threshold: float = 0.05,
    confidence: float = 0.95,
    inconclusive: str = "fail",
    fail_on_missing: bool = False,
    metric: str = "time",
    enforced: bool = True,
) -> Report:
    """Matches ``new`` against ``baseline`` (results files as loaded, or lists of
    Measurements and InstructionCounts) and decides each benchmark, on time or
    (``metric="byte_rate"`` / ``"flop_rate"``) on throughput.

    A benchmark's own threshold (``info["threshold"]`` of its new result, set by the
    pytest fixture's ``threshold=``) replaces ``threshold`` for it. ``enforced=False``
    reports problems without failing (exit status 0), in words that say so.

    Raises:
        NothingToCompareError: no benchmark is in both (an empty file, the wrong file).
        ValueError: a bad threshold, confidence or policy.
    """
    if inconclusive not in POLICIES:
        raise ValueError(f"inconclusive must be one of {', '.join(POLICIES)}, got {inconclusive!r}")
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    decide.check_threshold(threshold)
    old_results, new_results = _all(baseline), _all(new)
    busy_old: dict[str, str] = {}
    busy_new: dict[str, str] = {}
    old, cand = by_run(old_results, metric, busy_old), by_run(new_results, metric, busy_new)
    own = {identity.key(r): r.info["threshold"] for r in new_results
           if isinstance(r.info.get("threshold"), float)}
    common = [k for k in cand if k in old]
    if not common:
        raise NothingToCompareError(
            f"no benchmark is in both sets of results ({len(old)} in the baseline, {len(cand)} "
            "in the new): nothing was compared. Check the files, or the benchmarks' names "
            "(a key is the name=, else the labels, else the statement)")
    rows, mismatched = [], []
    for key in common:
        (kind_old, x_runs), (kind_new, y_runs) = old[key], cand[key]
        if kind_old != kind_new or "mixed" in (kind_old, kind_new):
            mismatched.append(key)
            continue
        t = own.get(key, threshold)
        decide.check_threshold(t)
        rows.append(decided(key, kind_old, x_runs, y_runs, t, confidence))
    rows.sort(key=lambda r: -r.decision.ratio)  # the worst first
    return Report(
        rows=tuple(rows),
        only_in_baseline=tuple(k for k in old if k not in cand),
        only_in_new=tuple(k for k in cand if k not in old),
        mismatched=tuple(mismatched),
        environment_notes=tuple(_environment_notes(baseline, new)),
        threshold=threshold, confidence=confidence, inconclusive=inconclusive,
        fail_on_missing=fail_on_missing, enforced=enforced,
        remeasured=tuple(remeasured(new_results)),
        disturbed=tuple(disturbed_notes(busy_old, busy_new, common)),
        environments=(dict(getattr(baseline, "environment", None) or {}),
                      dict(getattr(new, "environment", None) or {})),
    )


def decided(key: str, kind: str, x_runs: list[list[float]], y_runs: list[list[float]],
            threshold: float, confidence: float) -> Row:
    """The Row of one benchmark from each side's runs (their per-run values): counts by
    their range, several runs a side by the runs' figures, else the two sides' figures
    of their pooled blocks; Baseline and New are what the ratio divides."""
    x = [v for values in x_runs for v in values]
    y = [v for values in y_runs for v in values]
    runs = (len(x_runs), len(y_runs))
    if kind == "instructions" or kind in _MEMORY_KINDS:
        return counted(key, kind, x, y, threshold, runs)
    if len(x_runs) > 1 and len(y_runs) > 1:  # runs are the replicates (unpaired)
        fx = [run_figure.value(v) for v in x_runs]
        fy = [run_figure.value(v) for v in y_runs]
        decision = decide.runs(fx, fy, threshold, confidence, paired=False)
        base, head = statistics.geometric_mean(fx), statistics.geometric_mean(fy)
    else:
        decision = decide.figures(x, y, threshold, confidence)
        base, head = run_figure.value(x), run_figure.value(y)
    return Row(key, kind, base, head, (len(x), len(y)), decision, runs)


def _environment_notes(baseline: Any, new: Any) -> list[str]:
    old_env, new_env = getattr(baseline, "environment", None), getattr(new, "environment", None)
    if not old_env or not new_env:
        return []
    differences = environment_differences(old_env, new_env)
    return [f"the results come from different environments ({'; '.join(differences)}): "
            "differences may come from there rather than from the code"] if differences else []
