"""Markdown that says only what opbench wrote: every string a report interpolates
(benchmark names, labels, commits, environment facts, a failed run's output) escaped
so that it renders as the text it is.

A pull-request comment is read by people deciding whether to merge; a benchmark
named ``"f\\n### opbench: no regression\\n<details>"`` must not add a heading, fold
the real rows away or mention anyone. ``escape`` makes a string inert anywhere
inside a line (a paragraph, a list item, a heading, a table cell, a
``<summary>``): line breaks become ``<br>`` (a break inside the block, never a
new block), other control characters their visible escapes (``_text.printable``),
``<``, ``>`` and ``&`` character references (no HTML tag, comment or entity), the
punctuation of Markdown's inline syntax backslash-escaped (no code span, emphasis,
table cell boundary, heading mark, nor the ``](`` of a link or image), what
starts a block escaped where the string starts a line (a list item, a reference
definition, leading spaces), and ``@`` followed by a zero-width space (no mention),
as GitHub's own bots write it. ``row`` is a table row of escaped cells. Only what
opbench itself writes (the table's dashes, ``<details>``, a ``###`` heading) is
Markdown. ``tests/test_markdown.py`` renders thousands of strings and every report
with a CommonMark parser and checks the blocks and text it gets.

Example:
    >>> print(escape("# a|b <!-- ![x](y) @team\\n# h"))
    \\# a\\|b &lt;!-- ![x]\\(y) @&#8203;team<br>\\# h
    >>> print(escape("1. ok"), row(["f()", "1.0 us", "x|y"]))
    1\\. ok | f() | 1.0 us | x\\|y |
"""
from __future__ import annotations

import re
from collections.abc import Iterable

from opbench._text import printable

__all__ = ["escape", "row"]

# Inline syntax: escapes, code spans, emphasis and strikethrough, table cells, math,
# a heading's closing ``#``s.
# (``<``, ``>`` and ``&`` become character references instead: a backslash before
# ``&lt;`` would itself be escaped away.)
_PUNCTUATION = re.compile(r"([\\`*_|~$#])")
# A link or image is ``[text](target)``: with its ``(`` escaped there is none, and the
# brackets of ``[64]`` (torch's sizes) stay as they are.
_LINK = re.compile(r"\]\(")
# What starts a block at the start of a line: an indented code block (leading
# spaces), a list item (``-``, ``+``, ``1.``, ``1)``), a setext underline (``=``), a
# link reference definition (``[x]: target``).
_LINE_START = re.compile(r"^( *)([-+=\[]|\d+(?=[.)](?: |$)))?")
_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def escape(text: object) -> str:
    """``text`` (``str()`` of it) as Markdown that renders as that text, on one line,
    wherever the line puts it (its start included)."""
    # Only the first line can start a line of the output (the others follow a <br>).
    return _LINE_START.sub(_escape_start, _inline(text), count=1)


def _inline(text: object) -> str:
    """``escape`` for text that follows something on its line (a table cell)."""
    out = []
    for line in _LINE_BREAK.split(str(text)):
        line = _LINK.sub(r"]\\(", _PUNCTUATION.sub(r"\\\1", printable(line)))
        line = "".join(_ENTITIES.get(c, c) for c in line)
        out.append(line.replace("@", "@&#8203;"))
    return "<br>".join(out)


def _escape_start(match: re.Match[str]) -> str:
    spaces, marker = match.group(1), match.group(2) or ""
    if marker[:1].isdigit():  # ``1.`` as ``1\.``: the digits stay, the list marker goes
        marker += "\\"
    elif marker:
        marker = "\\" + marker
    elif match.string.startswith("<br>", match.end()):
        marker = "&#32;"  # a line that starts with a tag alone would be an HTML block
    return "&#32;" * len(spaces) + marker


def row(cells: Iterable[object]) -> str:
    """A table row (``| a | b |``) of escaped cells."""
    return "| " + " | ".join(_inline(c) for c in cells) + " |"
