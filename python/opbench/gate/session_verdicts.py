"""The verdicts of an ``opbench ab`` session (``opbench.revisions.session``), its
``ABReport``: the gate's verdicts on runs, with both commits, both environments, the runs
that failed, and, in instruction mode, where the instructions went (``function_changes``).

Rendered as text (a terminal), Markdown (a pull-request comment: a summary line,
the regressions' table first, the rest folded) or JSON (everything, for tools).
The verdict table, its words and its exit status are ``opbench.gate.Report``'s,
so ``ab``, ``compare`` and the pytest plugin tell one story.

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> from opbench.gate import compare
    >>> m = lambda t: [Measurement(1, [t] * 5, TaskSpec("f()", "pass", name="f"))]
    >>> report = ABReport(compare(m(1e-6), m(1e-6)), Side("base", "HEAD~1", "a" * 40, {}),
    ...                   Side("head", "working tree", "b" * 40, {}), ("pytest",), "time",
    ...                   rounds=1, max_rounds=1)
    >>> report.text().splitlines()[0]
    'opbench ab: base HEAD~1 (aaaaaaaaaaaa) vs head working tree (bbbbbbbbbbbb), time mode'
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from opbench import _markdown as md
from opbench import _redact
from opbench._text import printable, report_html, short_commit, text_table
from opbench.callgrind.function_diff import FunctionChange, python_diff
from opbench.callgrind.function_diff import diff as function_diff
from opbench.core import identity
from opbench.core.instructions import InstructionCounts
from opbench.gate.verdicts import FORMATS, Report, describe_environment, environment_differences
from opbench.store.results import Results

__all__ = ["ABReport", "Changes", "FailedRun", "Side", "function_changes"]


@dataclasses.dataclass(frozen=True)
class Side:
    """One side of the A/B: ``name`` "base" or "head", the revision as given, its commit,
    the environment its runs recorded, and how many of its runs were counted."""

    name: str
    revision: str
    commit: str
    environment: dict[str, Any]
    runs: int = 0

    def title(self) -> str:
        return f"{self.name} {self.revision} ({short_commit(self.commit)})"


@dataclasses.dataclass(frozen=True)
class FailedRun:
    """A run that failed and was not counted (nor was its round's other run)."""

    side: str
    round: int
    problem: str


@dataclasses.dataclass(frozen=True)
class ABReport:
    """Everything an ``opbench ab`` session found; ``exit_status`` is the gate's (1 when
    no round completed: nothing was compared)."""

    gate: Report | None
    base: Side
    head: Side
    command: tuple[str, ...]
    mode: str
    rounds: int
    max_rounds: int
    stopped_early: bool = False
    interrupted: bool = False
    interleave: str = "runs"
    wave: int = 1
    failed: tuple[FailedRun, ...] = ()
    functions: tuple[tuple[str, tuple[FunctionChange, ...]], ...] = ()
    # The same per Python function (qualname, file:line), where the counts had them.
    python_functions: tuple[tuple[str, tuple[FunctionChange, ...]], ...] = ()
    seconds: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def exit_status(self) -> int:
        return 1 if self.gate is None else self.gate.exit_status

    def render(self, fmt: str = "text") -> str:
        """``"text"``, ``"markdown"`` or ``"json"``."""
        if fmt not in FORMATS:
            raise ValueError(f"format must be text, markdown or json, got {fmt!r}")
        return {"text": self.text, "markdown": self.markdown, "json": self.json}[fmt]()

    # -- pieces shared by the formats ---------------------------------------------

    def _header(self) -> str:
        return (f"opbench ab: {self.base.title()} vs {self.head.title()}, {self.mode} mode")

    def _how(self) -> str:
        pairs = (f"{self.wave} base and {self.wave} head processes at once"
                 if self.wave > 1 else "base and head processes at once")
        how = {"turns": f"{pairs}, taking turns to time",
               "runs": "base and head runs one after the other, ABBA order",
               "concurrent": "base and head runs at once (counts do not depend on load)"}.get(
                   self.interleave, self.interleave)
        done = f"{self.rounds} of up to {self.max_rounds} round(s)"
        if self.stopped_early:
            done += ", stopped early: every benchmark decided"
        if self.interrupted:
            done += ", INTERRUPTED (Ctrl-C): the rounds that finished are reported"
        return f"{done}; {how}; {self.seconds:.1f} s"

    def _environment_lines(self) -> list[str]:
        lines = []
        for side in (self.base, self.head):
            lines.append(f"{side.name}: commit {side.commit}; "
                         + describe_environment(side.environment))
        differences = environment_differences(self.base.environment, self.head.environment)
        if differences:
            lines.append("warning: the sides ran in different environments: "
                         + "; ".join(differences))
        return lines

    def _failed_lines(self) -> list[str]:
        return [f"round {f.round}, {f.side}: {f.problem}" for f in self.failed]

    def _function_rows(self, changes: tuple[FunctionChange, ...]) -> list[list[str]]:
        return [[c.group, c.short_name, f"{c.exclusive[0]:,.1f}", f"{c.exclusive[1]:,.1f}",
                 f"{c.exclusive_change:+,.1f}", f"{c.inclusive[0]:,.1f}",
                 f"{c.inclusive[1]:,.1f}"] for c in
                sorted(changes, key=lambda c: (c.group, -abs(c.exclusive_change)))]

    _FUNCTION_HEADER = ["Where", "Function", "Excl. base", "Excl. head", "Change",
                        "Incl. base", "Incl. head"]
    _PYTHON_HEADER = ["Python function", "Own base", "Own head", "Change", "Incl. base",
                      "Incl. head"]

    def _python_rows(self, changes: tuple[FunctionChange, ...]) -> list[list[str]]:
        """Largest change of the function's own count first: the one whose code changed."""
        return [[c.short_name, f"{c.exclusive[0]:,.1f}", f"{c.exclusive[1]:,.1f}",
                 f"{c.exclusive_change:+,.1f}", f"{c.inclusive[0]:,.1f}",
                 f"{c.inclusive[1]:,.1f}"] for c in changes]

    def _tables(self) -> list[tuple[str, str, list[str], list[list[str]], list[bool]]]:
        """(benchmark, title, header, rows, numeric columns) of each function table: per
        changed benchmark, its Python functions, then its native functions."""
        python = dict(self.python_functions)
        native = dict(self.functions)
        out = []
        for key in dict.fromkeys([*python, *native]):
            if key in python:
                out.append((key, "Python functions whose own instructions per call changed "
                                 "most", self._PYTHON_HEADER, self._python_rows(python[key]),
                            [False, True, True, True, True, True]))
            if key in native:
                out.append((key, "Native functions whose instructions per call changed most",
                            self._FUNCTION_HEADER, self._function_rows(native[key]),
                            [False, False, True, True, True, True, True]))
        return out

    # -- formats ------------------------------------------------------------------

    def _repr_html_(self) -> str:
        """A notebook's view: the text report, regressions and failures in red, a passing
        verdict in green."""
        return report_html(self.text(), self.exit_status != 0, "opbench-ab")

    def text(self) -> str:
        """For a terminal: what the report quotes (revisions, environments, a failed run's
        output, names) ``printable``."""
        lines = [printable(self._header()), self._how(), *map(printable, self._environment_lines()),
                 ""]
        if self.gate is None:
            lines.append("FAILED: no round completed on both sides: nothing was compared.")
        else:
            lines.append(self.gate.text())
        if self.failed:
            lines += ["", f"Runs that failed (not counted, nor their round): {len(self.failed)}",
                      *(f"  {printable(line)}" for line in self._failed_lines())]
        for key, title, header, rows, numeric in self._tables():
            lines += ["", f"{title}: {printable(key)}"]
            lines.append(text_table(header, [[printable(c) for c in row] for row in rows],
                                    numeric, github=False)
                         if rows else "  (no function's count changed by 0.05 per call or more)")
        if self.notes:
            lines += ["", *map(printable, self.notes)]
        return "\n".join(lines).rstrip() + "\n"

    def markdown(self) -> str:
        """A PR comment; every revision, name, run's output and environment fact in it
        ``opbench._markdown.escape``d (the gate's part: ``Report.markdown``)."""
        gate_md = (self.gate.markdown() if self.gate is not None else
                   "### opbench: FAILED: no round completed on both sides")
        title, _, rest = gate_md.partition("\n")
        lines = [title, "", f"**{md.escape(self.base.title())}** vs "
                 f"**{md.escape(self.head.title())}**, {self.mode} mode: {self._how()}",
                 rest.lstrip("\n")]
        for key, title, header, rows, numeric in self._tables():
            if not rows:
                continue
            lines += ["", f"<details><summary>{title}: {md.escape(key)}</summary>", "",
                      md.row(header), "|" + "|".join("--:" if n else "---" for n in numeric) + "|",
                      *(md.row(r) for r in rows), "", "</details>"]
        if self.failed:
            lines += ["", f"<details><summary>{len(self.failed)} failed run(s), not counted"
                          "</summary>", "", *(f"- {md.escape(line)}" for line in
                                              self._failed_lines()), "", "</details>"]
        lines += ["", "<details><summary>Environment</summary>", "",
                  *(f"- {md.escape(line)}" for line in self._environment_lines()), "",
                  "</details>"]
        if self.notes:  # after a blank line: an HTML block (</details>) runs until one
            lines += ["", *(f"- {md.escape(n)}" for n in self.notes)]
        return "\n".join(lines).rstrip() + "\n"

    def redacted(self) -> ABReport:
        """The report without host names or absolute paths (``--redact``; see
        ``Report.redacted``): the sides' environments, the failed runs' output, the
        functions' files and the notes."""
        hosts = _redact.hosts_of(self.base.environment, self.head.environment,
                                 *(self.gate.environments if self.gate is not None else ()))

        def side(s: Side) -> Side:
            return dataclasses.replace(s, revision=_redact.text(s.revision, hosts),
                                       environment=_redact.environment(s.environment))

        return dataclasses.replace(
            self, gate=self.gate.redacted() if self.gate is not None else None,
            base=side(self.base), head=side(self.head),
            command=tuple(_redact.text(c, hosts) for c in self.command),
            failed=tuple(dataclasses.replace(f, problem=_redact.text(f.problem, hosts))
                         for f in self.failed),
            functions=_redacted_changes(self.functions, hosts),
            python_functions=_redacted_changes(self.python_functions, hosts),
            notes=tuple(_redact.text(n, hosts) for n in self.notes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": "opbench-ab-report", "version": 1,
            "base": dataclasses.asdict(self.base), "head": dataclasses.asdict(self.head),
            "command": list(self.command), "mode": self.mode, "rounds": self.rounds,
            "max_rounds": self.max_rounds, "stopped_early": self.stopped_early,
            "interrupted": self.interrupted, "interleave": self.interleave,
            "wave": self.wave,
            "seconds": self.seconds, "exit_status": self.exit_status,
            "gate": self.gate.to_dict() if self.gate is not None else None,
            "failed_runs": [dataclasses.asdict(f) for f in self.failed],
            "functions": {key: [c.to_dict() for c in changes] for key, changes in self.functions},
            "python_functions": {key: [c.to_dict() for c in changes]
                                 for key, changes in self.python_functions},
            "notes": list(self.notes),
        }

    def json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False, default=str) + "\n"


def _redacted_changes(changes: tuple[tuple[str, tuple[FunctionChange, ...]], ...],
                      hosts: Any) -> tuple[tuple[str, tuple[FunctionChange, ...]], ...]:
    return tuple((_redact.text(key, hosts), tuple(
        dataclasses.replace(c, function=_redact.text(c.function, hosts)) for c in rows))
        for key, rows in changes)


# Per benchmark key, the functions whose counts changed most (FunctionChange rows).
Changes = list[tuple[str, tuple[FunctionChange, ...]]]


def function_changes(base: Results, head: Results, report: Report) -> tuple[Changes, Changes]:
    """Per benchmark whose count changed (not "same"), the native functions and the Python
    functions whose counts changed most: the report's ``functions`` and
    ``python_functions``."""
    def by_key(results: Results) -> dict[str, InstructionCounts]:
        return {identity.key(c): c for c in results.instructions}

    old, new = by_key(base), by_key(head)
    native: Changes = []
    python: Changes = []
    for row in report.rows:
        if row.kind != "instructions" or row.decision.verdict == "same" \
                or row.decision.ratio == 1 or row.key not in old or row.key not in new:
            continue
        a, b = old[row.key], new[row.key]
        number, base_number = b.number_per_run, a.number_per_run
        for table, found, differ in (("functions", native, function_diff),
                                     ("python_functions", python, python_diff)):
            fa, fb = a.info.get(table), b.info.get(table)
            if isinstance(fa, dict) and isinstance(fb, dict):
                found.append((row.key, tuple(differ(fa, fb, number=number,
                                                    base_number=base_number))))
    return native, python
