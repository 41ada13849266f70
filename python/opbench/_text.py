"""Plain-text tables for opbench's own reports (profiles, compile tables, exports), and
text that is safe to print on a terminal.

A benchmark's name, label or environment fact comes from whoever wrote the results
file. ``printable`` shows the control characters in it as escapes (``\\x1b``,
``\\n``) instead of sending them to the terminal, where an escape sequence could
clear the screen, rewrite lines already printed or set the window title, and a
newline or carriage return could fake a line of the report.

Example:
    >>> printable("f\\x1b[2J\\rPASSED\\n")
    'f\\\\x1b[2J\\\\rPASSED\\\\n'
    >>> print(text_table(["name", "time"], [["a\\tb", "1.5"]], [False, True]))
    | name | time |
    |------|------|
    | a\\tb |  1.5 |
"""
from __future__ import annotations

import html
import re
from collections.abc import Sequence

__all__ = ["COMMIT_DIGITS", "PASSED_STYLE", "WARNING_STYLE", "html_pre", "printable", "report_html",
           "short_commit", "text_table"]

#: How a notebook shows a warning or failure line (``html_pre``), and a passing one.
WARNING_STYLE = "color:#cf222e;font-weight:bold"
PASSED_STYLE = "color:#1a7f37;font-weight:bold"

#: Hex digits a commit id is shown with (reports, progress lines, worktree folders).
COMMIT_DIGITS = 12

# C0 and C1 control characters and DEL; the Unicode line and paragraph separators; the
# bidirectional overrides and isolates, which reorder what a terminal shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def printable(text: object) -> str:
    """``str(text)`` with each control character written as its escape (``\\x1b``,
    ``\\n``): one line, nothing a terminal acts on."""
    return _CONTROL.sub(_escape, str(text))


def short_commit(commit: str) -> str:
    """``commit`` cut to ``COMMIT_DIGITS`` characters (``1a2b3c4d5e6f``)."""
    return commit[:COMMIT_DIGITS]


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
               right: Sequence[bool] | None = None, *, github: bool = True) -> str:
    """An aligned plain-text table: GitHub pipe style (``| a | b |``, as tabulate's
    "github" format) or, with ``github=False``, columns separated by two spaces.
    ``right[i]`` right-aligns column i (numbers). Cells are ``printable``."""
    right = list(right) if right is not None else [False] * len(headers)
    headers = [printable(h) for h in headers]
    rows = [[printable(c) for c in r] for r in rows]
    widths = [max(len(c) for c in col) for col in zip(headers, *rows)]

    def fmt(cells: Sequence[str]) -> list[str]:
        return [c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right)]

    if not github:
        return "\n".join("  ".join(fmt(r)).rstrip() for r in [headers, *rows])
    lines = ["| " + " | ".join(fmt(headers)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(fmt(r)) + " |" for r in rows]
    return "\n".join(lines)


def html_pre(lines: Sequence[tuple[str, str | None]], css_class: str) -> str:
    """A text result as one ``<pre>`` block for a notebook's rich display: each line
    escaped and, where a style is given, in a ``<span>`` of that inline style (no
    stylesheet to carry).

    >>> html_pre([("ok <1>", None), ("WARNING", WARNING_STYLE)], "x")
    '<pre class="x">ok &lt;1&gt;\\n<span style="color:#cf222e;font-weight:bold">WARNING</span></pre>'
    """
    body = "\n".join(html.escape(line) if style is None else
                     f'<span style="{style}">{html.escape(line)}</span>' for line, style in lines)
    return f'<pre class="{css_class}">{body}</pre>'


def report_html(text: str, failed: bool, css_class: str) -> str:
    """A gate's text report for a notebook: lines that name a regression, a warning or a
    failure in red, the verdict line green when the gate passed."""
    lines = []
    for line in text.split("\n"):
        verdict = line.startswith(("PASSED", "FAILED", "NOT FAILING"))
        bad = ("REGRESSION" in line or line.startswith(("warning:", "FAILED", "  "))
               or (verdict and failed))
        lines.append((line, WARNING_STYLE if bad else PASSED_STYLE if verdict else None))
    return html_pre(lines, css_class)
