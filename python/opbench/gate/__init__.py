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
  (``opbench.throughput``), so a change of work between the runs counts; a
  benchmark without known work is gated on time, and one with work on one side
  only is not compared (listed).
* Memory counts (``MemoryCounts``) give a row per figure, keyed ``key [allocations]``,
  ``[bytes]``, ``[peak]``, ``[leak]`` (and ``[cuda ...]``), decided exactly
  (``opbench.core.memory.decide_memory``): one allocation a call more is a
  regression whatever the threshold; bytes are judged against it.
* Times and instruction counts are compared each with their own kind;
  results from different machines, torch versions or thread settings are
  compared with a warning that names the differences.

The package also holds ``ab`` (``opbench.compare_ab``: interleaved A/B runs, decided).

Floor: analysis (may import from native, base, stats, engines, core, callgrind, memory,
timer, store and its own floor).

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> old = [Measurement(1, [1e-6 * (1 + i / 100) for i in range(40)], TaskSpec("f()", "pass"))]
    >>> new = [Measurement(1, [2e-6 * (1 + i / 100) for i in range(40)], TaskSpec("f()", "pass"))]
    >>> report = compare(old, new, threshold=0.05)
    >>> report.rows[0].status, report.exit_status
    ('regression', 1)
"""
from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Iterable
from typing import Any

from opbench import _choices, _redact
from opbench import _markdown as md
from opbench._text import printable, report_html
from opbench.core import disturbance as _disturbance
from opbench.core import identity
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement, select_unit
from opbench.core.memory import KINDS as _MEMORY_KINDS
from opbench.core.memory import MemoryCounts, decide_memory
from opbench.core.memory import format_value as _memory_value
from opbench.core.throughput import declared_or_counted
from opbench.errors import NothingToCompareError
from opbench.stats import decide, run_figure

__all__ = ["FORMATS", "POLICIES", "Report", "Row", "compare", "decided", "describe_environment",
           "disturbed_notes", "environment_differences", "format_value", "pool", "remeasured"]

POLICIES = _choices.POLICIES
# Gated metric -> the work a throughput divides by (None: time itself).
METRICS = _choices.GATE_METRICS
FORMATS = _choices.FORMATS

# Environment facts a report shows for each side (the JSON has them all).
_SHOWN = (("git_commit", "commit"), ("commit", "commit"), ("python", "Python"),
          ("torch", "torch"), ("cpu_model", "CPU"), ("cpu_count", "CPUs"),
          ("hostname", "host"))
# Environment facts whose difference makes a comparison suspect, with their names.
_ENVIRONMENT_FACTS = {
    "hostname": "machine", "cpu_model": "CPU", "cpu_count": "CPU count",
    "cpu_affinity": "usable CPUs", "torch": "torch", "python": "Python",
    "num_threads": "torch threads", "governor": "CPU governor", "device": "GPU",
}


@dataclasses.dataclass(frozen=True)
class Row:
    """One benchmark found in both sets.

    Attributes:
        key: its ``opbench.core.identity.key``.
        kind: "time" (seconds per run), "instructions" (per run), or "byte_rate" /
            "flop_rate" (seconds per byte / FLOP: throughput gated as time per unit of work).
        baseline, new: the figures the ratio is computed from (``decision.ratio`` is
            new / baseline): each side's run figure (the 10th percentile of its per-run
            times), the geometric mean of its runs' figures when both sides have
            several runs, the median count for instructions.
        samples: how many values each side had.
        decision: ``opbench.stats.decide``'s decision on them.
        runs: how many runs (results of the key) each side had.
    """

    key: str
    kind: str
    baseline: float
    new: float
    samples: tuple[int, int]
    decision: decide.Decision
    runs: tuple[int, int] = (1, 1)

    @property
    def status(self) -> str:
        """regression, possible regression, improvement, possible improvement, same
        or inconclusive."""
        d = self.decision
        if d.verdict == "slower":
            return "regression"
        if d.verdict == "faster":
            return "improvement"
        if d.possible_regression:
            return "possible regression"
        if d.possible_improvement:
            return "possible improvement"
        return d.verdict


@dataclasses.dataclass(frozen=True)
class Report:
    """Everything the gate found; ``exit_status`` is what a CI step should exit with."""

    rows: tuple[Row, ...]
    only_in_baseline: tuple[str, ...]
    only_in_new: tuple[str, ...]
    mismatched: tuple[str, ...]
    environment_notes: tuple[str, ...]
    threshold: float
    confidence: float
    inconclusive: str
    fail_on_missing: bool
    # How the verdicts were formed (the report's method note; "" for the two-file gate's).
    method: str = ""
    # False: problems are reported but do not fail (exit status 0), and the words say so.
    enforced: bool = True
    # Benchmarks measured again because they looked slower, and how (info["remeasured"]).
    remeasured: tuple[str, ...] = ()
    # What "no interval" counts on each side: samples (blocks) or runs.
    replicates: str = "samples"
    # Benchmarks the busy machine disturbed, and what the gate did about each.
    disturbed: tuple[str, ...] = ()
    # The environments the two sets of results recorded (baseline, new), when known.
    environments: tuple[dict[str, Any], dict[str, Any]] = ({}, {})

    @property
    def regressions(self) -> list[Row]:
        return [r for r in self.rows if r.status == "regression"]

    @property
    def possible_regressions(self) -> list[Row]:
        return [r for r in self.rows if r.status == "possible regression"]

    @property
    def failures(self) -> list[str]:
        """Why the gate fails (empty: it passes)."""
        reasons = [f"{r.key}: {r.decision.ratio:.3f}x {_worse(r)} (regression, threshold "
                   f"{r.decision.threshold:.1%})" for r in self.regressions]
        if self.inconclusive == "fail":
            reasons += [f"{r.key}: {r.decision.ratio:.3f}x {_worse(r)}, not conclusive "
                        f"({r.decision.reason}): possible regression" + _interval(r)
                        for r in self.possible_regressions]
        if self.fail_on_missing:
            reasons += [f"{key}: missing from the new results" for key in self.only_in_baseline]
        return reasons

    @property
    def exit_status(self) -> int:
        return 1 if self.failures and self.enforced else 0

    @property
    def summary(self) -> str:
        """One line that matches the exit status: PASSED, FAILED or "not enforced"."""
        failures, n = self.failures, len(self.rows)
        if not failures:
            return f"PASSED: no regression beyond the threshold ({n} benchmark(s) compared)."
        what = _problems(self)
        if not self.enforced:
            return (f"NOT FAILING: {what} found in {n} benchmark(s), but this gate does not "
                    "fail (exit status 0; --opbench-fail-above / --threshold to enforce it).")
        return f"FAILED: {what} in {n} benchmark(s)."

    # -- output ---------------------------------------------------------------

    def render(self, fmt: str = "text") -> str:
        """The report as ``"text"``, ``"markdown"`` (a PR comment) or ``"json"``."""
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}, got {fmt!r}")
        return {"text": self.text, "markdown": self.markdown, "json": self.json}[fmt]()

    def redacted(self) -> Report:
        """The report without what names the machines and their folders (``--redact``):
        host names (in the environments, and wherever a name or note repeats one) and
        absolute paths (shortened to their last part), for a public PR comment."""
        hosts = _redact.hosts_of(*self.environments)

        def strip(texts: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(_redact.text(t, hosts) for t in texts)

        return dataclasses.replace(
            self, rows=tuple(dataclasses.replace(r, key=_redact.text(r.key, hosts))
                             for r in self.rows),
            only_in_baseline=strip(self.only_in_baseline), only_in_new=strip(self.only_in_new),
            mismatched=strip(self.mismatched), environment_notes=strip(self.environment_notes),
            remeasured=strip(self.remeasured), disturbed=strip(self.disturbed),
            environments=(_redact.environment(self.environments[0]),
                          _redact.environment(self.environments[1])))

    def _cells(self, rows: Iterable[Row] | None = None) -> tuple[list[str], list[list[str]]]:
        header = ["Benchmark", "Baseline", "New", "Ratio", f"{self.confidence:.0%} CI", "Verdict"]
        body = []
        for r in self.rows if rows is None else rows:
            ci = r.decision.ci
            counts = r.runs if self.replicates == "runs" else r.samples
            level = r.decision.confidence
            interval = (f"none ({counts[0]} vs {counts[1]} {self.replicates})" if ci is None
                        else "exact" if r.kind in _COUNTED and ci[0] == ci[1]
                        else f"{ci[0]:.3f} to {ci[1]:.3f}" + (
                            f" ({_percent(level)})" if level is not None
                            and abs(level - self.confidence) > 1e-9 else ""))
            body.append([r.key, format_value(r.baseline, r.kind), format_value(r.new, r.kind),
                         f"{r.decision.ratio:.3f}", interval, r.status.upper()
                         if r.status in ("regression", "possible regression") else r.status])
        return header, body

    def _notes(self) -> list[str]:
        notes = [f"warning: {note}" for note in self.environment_notes]
        if self.only_in_baseline:
            notes.append("Only in the baseline (missing from the new results"
                         + ("" if self.fail_on_missing else "; --fail-on-missing fails on these")
                         + "): " + ", ".join(self.only_in_baseline))
        if self.only_in_new:
            notes.append("Only in the new results (new benchmarks): " + ", ".join(self.only_in_new))
        if self.mismatched:
            notes.append("Not compared (times on one side, instruction counts on the other, "
                         "or work known on one side only): " + ", ".join(self.mismatched))
        if any(r.kind in _MEMORY_KINDS for r in self.rows):
            notes.append("Memory rows (per call, exact): one allocation a call more is a "
                         "regression whatever the threshold; bytes, peak and leak are judged "
                         "against it; a baseline of 0 counts as 1 in the ratio.")
        if any(r.kind in ("byte_rate", "flop_rate") for r in self.rows):
            notes.append("Throughput rows: the ratio is of time per unit of work (new / "
                         "baseline), the inverse of the ratio of rates.")
        if self.remeasured:
            notes.append("Measured again because they looked slower (all measurements pooled): "
                         + "; ".join(self.remeasured))
        if self.disturbed:
            notes.append("Disturbed by other work on the machine (their figures read too high): "
                         + "; ".join(self.disturbed))
        single = [r.key for r in self.rows if r.kind not in _COUNTED and r.runs == (1, 1)]
        if single:
            notes.append(
                ("Each side has one run" if len(single) == len(self.rows) else
                 f"{len(single)} benchmark(s) have one run a side")
                + ": their intervals come from the blocks of one process and cover within-run "
                "noise only, not what differs between processes (code placement, heap, clock); "
                "`opbench ab` replicates runs.")
        thresholds = {r.decision.threshold for r in self.rows} - {self.threshold}
        notes.append(
            "Ratio: New / Baseline; " + (self.method or (
                f"Baseline and New are each side's {run_figure.describe()} of per-run time "
                "(the geometric mean of its runs' when both sides have several runs; "
                f"instruction counts: the median); verdicts by the ratio's {self.confidence:.0%} "
                "interval (from each side's blocks; from the runs, Student's t, when both "
                "sides have several; counts: the range their repeats allow), \"same\" also "
                "by an equivalence test (its level shown with its interval)"))
            + f", against a threshold of {self.threshold:.1%}"
            + (" (some benchmarks set their own)" if thresholds else "")
            + f"; inconclusive results beyond it: {self.inconclusive}.")
        notes.append(self.summary)
        notes += [f"  {reason}" for reason in self.failures]
        return notes

    def text(self) -> str:
        """For a terminal: names and notes ``printable`` (no control character of theirs
        reaches it)."""
        header, body = self._cells()
        body = [[printable(c) for c in row] for row in body]
        widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                 for row in [header, *body]]
        return "\n".join([*lines, "", *map(printable, self._notes())])

    def _repr_html_(self) -> str:
        """A notebook's view: the text report, regressions and failures in red, a passing
        verdict in green."""
        return report_html(self.text(), bool(self.failures), "opbench-gate")

    def headline(self) -> str:
        """The Markdown summary line: what was found, in the words of the exit status."""
        failing = [r for r in self.rows if r.status in ("regression", "possible regression")]
        if not self.failures:
            return f"opbench: no regression ({len(self.rows)} benchmark(s) compared)"
        return (f"opbench: {_problems(self)}" + (" (not failing)" if not self.enforced else "")
                + f" — {len(failing)} of {len(self.rows)} benchmark(s) slower")

    def markdown(self) -> str:
        """A PR comment: the summary line, the regressions' table, the rest folded. Every
        name, environment fact and note is ``opbench._markdown.escape``d: the headings,
        tables and folds are the report's own, whatever the benchmarks are called."""
        def table(rows: list[Row]) -> list[str]:
            header, body = self._cells(rows)
            return [md.row(header), "|---|--:|--:|--:|---|---|", *map(md.row, body)]

        failing = [r for r in self.rows if r.status in ("regression", "possible regression")]
        rest = [r for r in self.rows if r not in failing]
        lines = [f"### {self.headline()}", ""]
        if failing:
            lines += [*table(failing), ""]
        if rest:
            lines += [f"<details><summary>{len(rest)} other benchmark(s)</summary>", "",
                      *table(rest), "", "</details>", ""]
        if any(self.environments):
            lines += ["<details><summary>Environment</summary>", "",
                      *(f"- {name}: {md.escape(describe_environment(env))}" for name, env in
                        zip(("baseline", "new"), self.environments)), "", "</details>", ""]
        notes = [f"- {md.escape(n.strip())}" if n.startswith("  ") else md.escape(n)
                 for n in self._notes()]
        return "\n".join(lines + notes)

    def to_dict(self) -> dict[str, Any]:
        """What ``json()`` writes, as a dict."""
        return {
            "threshold": self.threshold, "confidence": self.confidence,
            "inconclusive": self.inconclusive, "fail_on_missing": self.fail_on_missing,
            "enforced": self.enforced, "exit_status": self.exit_status,
            "passed": not self.failures, "summary": self.summary, "failures": self.failures,
            "rows": [{"key": r.key, "kind": r.kind, "baseline": r.baseline, "new": r.new,
                      "samples": list(r.samples), "runs": list(r.runs), "status": r.status,
                      "verdict": r.decision.verdict, "ratio": r.decision.ratio,
                      "median_ratio": r.decision.median_ratio,
                      "threshold": r.decision.threshold,
                      "ci": list(r.decision.ci) if r.decision.ci else None,
                      "reason": r.decision.reason} for r in self.rows],
            "only_in_baseline": list(self.only_in_baseline),
            "only_in_new": list(self.only_in_new), "mismatched": list(self.mismatched),
            "environment_notes": list(self.environment_notes),
            "remeasured": list(self.remeasured), "disturbed": list(self.disturbed),
            "method": self.method,
            "environments": {"baseline": self.environments[0], "new": self.environments[1]},
        }

    def json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)


def _problems(report: Report) -> str:
    """"1 regression and 2 possible regressions" (what fails, counted)."""
    n, m = len(report.regressions), len(report.possible_regressions)
    parts = []
    if n:
        parts.append(f"{n} regression{'s' if n != 1 else ''}")
    if m and report.inconclusive == "fail":
        parts.append(f"{m} possible regression{'s' if m != 1 else ''}")
    missing = len(report.failures) - n - (m if report.inconclusive == "fail" else 0)
    if missing:
        parts.append(f"{missing} missing benchmark{'s' if missing != 1 else ''}")
    return " and ".join(parts)


def _percent(level: float) -> str:
    """``90%``, ``99.2%``: a confidence level as short as it reads right."""
    text = f"{level * 100:.1f}".rstrip("0").rstrip(".")
    return f"{text}%"


def _interval(r: Row) -> str:
    ci = r.decision.ci
    return "" if ci is None else f", interval {ci[0]:.3f} to {ci[1]:.3f}"


# Row kinds of exact counts: their repeats agree, no sampling noise.
_COUNTED = ("instructions", *_MEMORY_KINDS)


def _worse(r: Row) -> str:
    """How a regression reads: slower, or (memory) more."""
    return "more" if r.kind in _MEMORY_KINDS else "slower"


def format_value(v: float, kind: str) -> str:
    """A median for a report: ``12.3 us``, or ``41,200 instr`` for instruction counts,
    ``5 allocs`` / ``4.00 KiB`` for memory per call."""
    if kind == "instructions":
        return f"{v:,.0f} instr"
    if kind in _MEMORY_KINDS:
        return _memory_value(v, kind)
    if kind in ("byte_rate", "flop_rate"):  # v: seconds per byte (FLOP)
        return f"{1 / v / 1e9:.4g} " + ("GB/s" if kind == "byte_rate" else "GFLOP/s")
    unit, scale = select_unit(v)
    return f"{v / scale:.4g} {unit}"


def pool(results: Iterable[Any], metric: str = "time",
         disturbed: dict[str, str] | None = None) -> dict[str, tuple[str, list[float]]]:
    """key -> (kind, per-run values), replicates pooled, in first-seen order; what was
    done about disturbed results is added to ``disturbed`` (see ``_by_run``)."""
    return {key: (kind, [v for values in runs for v in values])
            for key, (kind, runs) in _by_run(results, metric, disturbed).items()}


def _by_run(results: Iterable[Any], metric: str = "time",
            disturbed: dict[str, str] | None = None) -> dict[str, tuple[str, list[list[float]]]]:
    """key -> (kind, per-run values of each result of the key), in first-seen order.

    A result the busy machine disturbed (``opbench.core.disturbance``) counts with its
    undisturbed blocks only, when it has enough; a run with none is dropped when the key
    has a run that has some. ``disturbed`` gets key -> what was done, for the report.
    """
    pooled: dict[str, tuple[str, list[list[float]]]] = {}
    notes: dict[str, list[str]] = {}
    hopeless: dict[str, list[int]] = {}  # key -> its runs with no undisturbed block
    what = METRICS[metric]
    for r in results:
        if isinstance(r, MemoryCounts):  # a row per figure (MemoryCounts.gated)
            for name, (kind, counted) in r.gated().items():
                key = f"{identity.key(r)} [{name}]"
                before = pooled.get(key, (kind, []))
                pooled[key] = (kind if before[0] == kind else "mixed", [*before[1], list(counted)])
            continue
        work = declared_or_counted(r, what) if what else None
        note = None
        if isinstance(r, Measurement):
            times, note = _disturbance.undisturbed(r)
        if isinstance(r, Measurement) and work:
            kind, values = metric, [t / work for t in times]
        elif isinstance(r, Measurement):
            kind, values = "time", times
        elif isinstance(r, InstructionCounts):
            kind, values = "instructions", list(r.per_run_values)
        else:
            raise TypeError(f"the gate compares Measurements, InstructionCounts and MemoryCounts, got "
                            f"{type(r).__name__}")
        key = identity.key(r)
        if key in pooled and pooled[key][0] != kind:
            kind = "mixed"
        pooled.setdefault(key, (kind, []))
        if note is not None:
            notes.setdefault(key, []).append(note)
            if "no block ran undisturbed" in note:
                hopeless.setdefault(key, []).append(len(pooled[key][1]))
        pooled[key] = (kind, [*pooled[key][1], values])
    for key, drop in hopeless.items():
        kind, runs = pooled[key]
        if len(drop) < len(runs):  # another run has undisturbed blocks: decide on those
            pooled[key] = (kind, [v for i, v in enumerate(runs) if i not in drop])
            notes[key] = [n for n in notes[key] if "no block ran undisturbed" not in n]
            notes[key].append(f"{len(drop)} of {len(runs)} runs dropped: no block of theirs "
                              "ran undisturbed (the machine was busy)")
    if disturbed is not None:
        disturbed.update({key: "; ".join(dict.fromkeys(n)) for key, n in notes.items()})
    return pooled


def remeasured(results: Iterable[Any]) -> list[str]:
    """"key: 3 measurements pooled" for each result the plugin measured again."""
    notes = []
    for r in results:
        again = r.info.get("remeasured")
        if isinstance(again, dict):
            notes.append(f"{identity.key(r)}: {again.get('measurements')} measurements "
                         f"{again.get('how', 'pooled')}")
    return notes


def describe_environment(env: dict[str, Any]) -> str:
    """``"commit 1a2b...; Python 3.11.7; torch 2.13.0; ..."`` from a results file's
    environment (what was recorded; "not recorded" when nothing was)."""
    seen: set[str] = set()
    facts = []
    for key, label in _SHOWN:
        if env.get(key) is not None and label not in seen:
            seen.add(label)
            facts.append(f"{label} {env[key]}")
    return "; ".join(facts) or "environment not recorded"


def environment_differences(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What differs between two results files' environments that bears on timings,
    e.g. ``["torch: 2.13.0 vs 2.14.1"]`` (facts missing on either side are skipped)."""
    return [f"{name}: {old[fact]} vs {new[fact]}" for fact, name in _ENVIRONMENT_FACTS.items()
            if old.get(fact) is not None and new.get(fact) is not None
            and old[fact] != new[fact]]


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
    old, cand = _by_run(old_results, metric, busy_old), _by_run(new_results, metric, busy_new)
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
    if kind == "instructions":
        decision = decide.counts(x, y, threshold)
        base, head = statistics.median(x), statistics.median(y)
    elif kind in _MEMORY_KINDS:
        decision = decide_memory(x, y, threshold, kind)
        base, head = statistics.median(x), statistics.median(y)
    elif len(x_runs) > 1 and len(y_runs) > 1:  # runs are the replicates (unpaired)
        fx = [run_figure.value(v) for v in x_runs]
        fy = [run_figure.value(v) for v in y_runs]
        decision = decide.runs(fx, fy, threshold, confidence, paired=False)
        base, head = statistics.geometric_mean(fx), statistics.geometric_mean(fy)
    else:
        decision = decide.figures(x, y, threshold, confidence)
        base, head = run_figure.value(x), run_figure.value(y)
    return Row(key, kind, base, head, (len(x), len(y)), decision, (len(x_runs), len(y_runs)))


def disturbed_notes(baseline: dict[str, str], new: dict[str, str],
                    keys: Iterable[str]) -> list[str]:
    """"key (new): what was done" for each compared benchmark the busy machine disturbed
    on either side (``pool``'s ``disturbed``)."""
    return [f"{key} ({side}): {notes[key]}" for key in keys
            for side, notes in (("baseline", baseline), ("new", new)) if key in notes]


def _environment_notes(baseline: Any, new: Any) -> list[str]:
    old_env, new_env = getattr(baseline, "environment", None), getattr(new, "environment", None)
    if not old_env or not new_env:
        return []
    differences = environment_differences(old_env, new_env)
    return [f"the results come from different environments ({'; '.join(differences)}): "
            "differences may come from there rather than from the code"] if differences else []
