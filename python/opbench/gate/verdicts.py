"""The gate's verdicts (its ``Report``): one row per benchmark decided, what could not be compared, the
notes that say how, and an exit status; rendered as text (a terminal), Markdown (a
pull-request comment) or JSON.

``opbench.gate.compare`` makes it from two sets of results, ``opbench.gate.rounds``
from an ``opbench ab`` session's rounds; ``opbench.gate.session_verdicts`` wraps it with
the session's commits and environments. Every name, environment fact and note is
``printable`` in text and escaped in Markdown: the report's own structure, whatever the
benchmarks are called.

Example:
    >>> from opbench.stats import decide
    >>> row = Row("f", "time", 1e-6, 2e-6, (40, 40), decide.figures([1e-6] * 40, [2e-6] * 40, 0.05))
    >>> report = Report((row,), (), (), (), (), 0.05, 0.95, "fail", False)
    >>> report.summary
    'FAILED: 1 regression in 1 benchmark(s).'
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
from opbench.core.formatting import format_value
from opbench.core.memory import KINDS as _MEMORY_KINDS
from opbench.core.memory import decide_memory
from opbench.stats import decide, run_figure

__all__ = ["FORMATS", "Report", "Row", "describe_environment", "environment_differences"]

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


def counted(key: str, kind: str, x: list[float], y: list[float], threshold: float,
            runs: tuple[int, int] = (1, 1)) -> Row:
    """The Row of a benchmark of counts from each side's values: instructions per run by
    ``decide.counts`` (Baseline and New its fewest counts), a memory figure per call by
    ``opbench.core.memory.decide_memory`` (one allocation a call more is a regression;
    Baseline and New the medians), for the gate and ``opbench ab``'s rounds alike."""
    if kind in _MEMORY_KINDS:
        return Row(key, kind, statistics.median(x), statistics.median(y), (len(x), len(y)),
                   decide_memory(x, y, threshold, kind), runs)
    return Row(key, kind, decide.count_figure(x), decide.count_figure(y), (len(x), len(y)),
               decide.counts(x, y, threshold), runs)


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
