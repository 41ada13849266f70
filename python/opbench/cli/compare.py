"""``python -m opbench compare BASELINE.json NEW.json [--threshold 5%]``: did anything regress?

Matches Measurements of the two results files by TaskSpec (statement, setup,
labels, env, threads; replicates of one task are pooled) and prints, per
task, both medians, the ratio NEW / BASELINE with its confidence interval and
a verdict: "slower" / "faster" when the whole interval lies beyond the
threshold, "same" when it lies within it, "inconclusive" otherwise. Tasks
found in only one file are listed, never dropped silently.

The ratio and its interval come from the two samples' log times by the
Hodges-Lehmann method: the ratio is exp of the median of all pairwise
differences log(new_j) - log(base_i), and the interval is a pair of order
statistics of those differences chosen with the Mann-Whitney distribution
(normal approximation). It is distribution-free apart from assuming the
change is a common factor on all times, and deterministic: no resampling. A
task with a single time on either side has no interval ("inconclusive").
Samples above 500 times are thinned to 500 evenly spaced order statistics,
which only widens the interval.

Exit status: 1 when any task is significantly slower beyond the threshold
(for CI gating), 0 otherwise, 2 for bad input (missing, corrupt or newer
files, a bad threshold).
"""
from __future__ import annotations

import argparse
import collections
import math
import statistics
import sys
from typing import Any

from opbench.cli import UsageError, command_parser

_MAX_SAMPLE = 500


def add_parser(subparsers: argparse._SubParsersAction) -> argparse.ArgumentParser:
    p = command_parser(
        subparsers,
        "compare",
        "compare two results files: ratios, confidence intervals, verdicts",
        __doc__,
    )
    p.add_argument("baseline", help="results file (opbench.save) to compare against")
    p.add_argument("new", help="results file with the new timings")
    p.add_argument("--threshold", default="5%",
                   help="relative change that matters, '5%%' or '0.05' (default 5%%)")
    p.add_argument("--confidence", type=float, default=0.95,
                   help="confidence level of the intervals (default 0.95)")
    return p


def parse_threshold(text: str, option: str = "--threshold") -> float:
    """'5%' or '0.05' -> 0.05; raises UsageError, naming ``option``, outside (0, 1)."""
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        raise UsageError(f"{option} must look like '5%' or '0.05', got {text!r}") from None
    if not 0 < value < 1:
        raise UsageError(f"{option} must be between 0% and 100% (exclusive), got {text!r}")
    return value


def _thin(values: list[float]) -> list[float]:
    if len(values) <= _MAX_SAMPLE:
        return values
    step = (len(values) - 1) / (_MAX_SAMPLE - 1)
    return [values[round(i * step)] for i in range(_MAX_SAMPLE)]


def ratio_ci(
    base: list[float], new: list[float], confidence: float
) -> tuple[float, float, float] | None:
    """(ratio, low, high) of new / base by Hodges-Lehmann on log times; None when the
    samples are too small for any interval at ``confidence``."""
    x = _thin(sorted(math.log(v) for v in base))
    y = _thin(sorted(math.log(v) for v in new))
    n, m = len(x), len(y)
    diffs = sorted(b - a for a in x for b in y)
    estimate = math.exp(statistics.median(diffs))
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    # Mann-Whitney: the k-th smallest and k-th largest pairwise differences.
    k = math.floor(n * m / 2 - z * math.sqrt(n * m * (n + m + 1) / 12))
    if k < 1:
        return None
    return estimate, math.exp(diffs[k - 1]), math.exp(diffs[n * m - k])


def _row_name(spec: Any) -> str:
    parts = [" ".join(spec.title.split())]
    if spec.description:
        parts.append(f"[{spec.description}]")
    if spec.env:
        parts.append(f"({spec.env})")
    if spec.num_threads != 1:
        parts.append(f"{spec.num_threads} threads")
    return " ".join(parts)


def _time(seconds: float) -> str:
    from opbench.measurement import select_unit

    unit, scale = select_unit(seconds)
    return f"{seconds / scale:.4g} {unit}"


def _load(path: str) -> Any:
    from opbench.results import ResultsFileError, load

    try:
        return load(path)
    except (OSError, ResultsFileError) as e:
        raise UsageError(f"cannot load {path}: {e}") from None


def _pool(results: Any) -> dict[Any, list[float]]:
    """TaskSpec -> per-run times, replicates pooled, in file order."""
    pooled: dict[Any, list[float]] = collections.defaultdict(list)
    for m in results:
        pooled[m.task_spec].extend(m.times)
    return pooled


def compare_files(baseline: str, new: str, threshold: float,
                  confidence: float = 0.95) -> tuple[str, bool]:
    """The comparison table's text, and whether a significant regression was found."""
    text, regressed = compare_results(_load(baseline), _load(new), threshold, confidence)
    return text, bool(regressed)


def compare_results(baseline: Any, new: Any, threshold: float,
                    confidence: float = 0.95) -> tuple[str, list[str]]:
    """Compares two sets of Measurements: the table's text, and the names of the
    tasks significantly slower beyond ``threshold``."""
    from opbench.ab import verdict

    base, cand = _pool(baseline), _pool(new)
    header = ("Benchmark", "Baseline", "New", "Ratio", f"{confidence:.0%} CI", "Verdict")
    rows = []
    regressed: list[str] = []
    for spec, base_times in base.items():
        if spec not in cand or not base_times or not cand[spec]:
            continue
        new_times = cand[spec]
        found = ratio_ci(base_times, new_times, confidence)
        if found is None:
            ratio_text, ci_text, result = "-", "too few times", "inconclusive"
        else:
            ratio, lo, hi = found
            result = verdict(lo, hi, threshold)
            ratio_text, ci_text = f"{ratio:.3f}", f"{lo:.3f} to {hi:.3f}"
        if result == "slower":
            regressed.append(_row_name(spec))
        rows.append((_row_name(spec), _time(statistics.median(base_times)),
                     _time(statistics.median(new_times)), ratio_text, ci_text, result))
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
             for row in [header, *rows]]
    for name, only, other in (("baseline", base, cand), ("new", cand, base)):
        missing = [s for s in only if s not in other or not only[s] or not other[s]]
        if missing:
            lines.append(f"\nOnly in {name} (not compared):")
            lines.extend(f"  {_row_name(s)}" for s in missing)
    lines.append(f"\nRatio: new / baseline; threshold {threshold:.1%}. "
                 + ("REGRESSION: a task is significantly slower beyond the threshold."
                    if regressed else "No significant regression beyond the threshold."))
    return "\n".join(lines), regressed


def run(args: argparse.Namespace) -> int:
    threshold = parse_threshold(args.threshold)
    if not 0 < args.confidence < 1:
        raise UsageError(f"--confidence must be in (0, 1), got {args.confidence!r}")
    text, regression = compare_files(args.baseline, args.new, threshold, args.confidence)
    print(text)
    sys.stdout.flush()
    return 1 if regression else 0
