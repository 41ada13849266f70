"""Plain-text tables for opbench's own reports (profiles, compile tables, exports)."""
from __future__ import annotations

from collections.abc import Sequence


def text_table(headers: Sequence[str], rows: Sequence[Sequence[str]],
               right: Sequence[bool] | None = None, *, github: bool = True) -> str:
    """An aligned plain-text table: GitHub pipe style (``| a | b |``, as tabulate's
    "github" format) or, with ``github=False``, columns separated by two spaces.
    ``right[i]`` right-aligns column i (numbers)."""
    right = list(right) if right is not None else [False] * len(headers)
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]

    def fmt(cells: Sequence[str]) -> list[str]:
        return [str(c).rjust(w) if r else str(c).ljust(w) for c, w, r in zip(cells, widths, right)]

    if not github:
        return "\n".join("  ".join(fmt(r)).rstrip() for r in [headers, *rows])
    lines = ["| " + " | ".join(fmt(headers)) + " |",
             "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += ["| " + " | ".join(fmt(r)) + " |" for r in rows]
    return "\n".join(lines)
