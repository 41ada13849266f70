"""The split of a compiled call by layer: each layer's cost, its timing and its cross-checks.

``opbench.analysis.compile_overheads`` measures eager against compiled; for each
compiled cell, ``SplitTimer`` times the callable at each boundary between layers
(``opbench.analysis.compile_layers``) in short blocks taking turns, each keeping
its least block, and a layer's cost is its callable's time minus the next one's.
``LayerSplit`` holds the result and prints it, with two cross-checks: the layers'
sum against the cell's own figure (within ``SUM_TOLERANCE``), and, where
instructions were counted, the layers' order by instructions against their order
by time (Spearman's rank correlation at least ``RANK_AGREEMENT``).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from opbench._text import text_table
from opbench.analysis.compile_layers import Layers

__all__ = ["RANK_AGREEMENT", "SUM_TOLERANCE", "LayerSplit", "SplitRow", "SplitTimer",
           "python_timer", "spearman"]

# The cross-checks: the layers' sum against the cell's own figure; the order of the
# layers by instructions against their order by time (Spearman's rho).
SUM_TOLERANCE = 0.10
RANK_AGREEMENT = 0.8


@dataclass
class SplitRow:
    """One layer's part of a compiled call: seconds per call (negative when noise
    exceeds the layer), and instructions per call where counted."""

    layer: str
    part: str
    seconds: float
    instructions: float | None = None


@dataclass
class LayerSplit:
    """The split of one compiled cell, or the ``reason`` it was skipped.

    Attributes:
        column: the cell's setting.
        rows: the layers' parts, outermost first.
        total: the split's own figure for the whole compiled call (the layers sum to it).
        cell: the cell's figure from the table (measured apart).
        eager: the eager cell's figure in the same column (None if not measured).
        probes: seconds per call of each boundary's callable (``compile_layers.BOUNDARIES``).
        notes: what could not be told apart on this torch.
        profile: the cProfile view (``profile=True``).
    """

    column: str
    rows: list[SplitRow] = field(default_factory=list)
    total: float = math.nan
    cell: float = math.nan
    eager: float | None = None
    probes: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    profile: Any = None
    boundaries: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    @property
    def sum_ratio(self) -> float:
        """The layers' sum over the cell's figure (1.0: they agree)."""
        return sum(r.seconds for r in self.rows) / self.cell

    @property
    def sum_agrees(self) -> bool:
        """Whether the layers sum to the cell's figure within ``SUM_TOLERANCE``."""
        return abs(self.sum_ratio - 1) <= SUM_TOLERANCE

    @property
    def rank_correlation(self) -> float | None:
        """Spearman's rho between the layers' times and instruction counts (None when
        not every layer was counted)."""
        if len(self.rows) < 2 or any(r.instructions is None for r in self.rows):
            return None
        return spearman([r.seconds for r in self.rows],
                         [float(r.instructions) for r in self.rows])  # type: ignore[arg-type]

    @property
    def ranks_agree(self) -> bool | None:
        """Whether instruction counts order the layers as their times do."""
        rho = self.rank_correlation
        return None if rho is None else rho >= RANK_AGREEMENT

    def table(self) -> str:
        """The split as text: µs per call per layer, share of the call and of the
        overhead over eager, then the cross-checks."""
        title = f"Split of the compiled call, {self.column}"
        if self.reason is not None:
            return f"{title}: skipped: {self.reason}"
        overhead = self.cell - self.eager if self.eager is not None else None
        headers = ["layer", "part", "us/call", "% of call", "% of overhead over eager"]
        counted = any(r.instructions is not None for r in self.rows)
        if counted:
            headers.append("instructions/call")
        body = []
        for r in self.rows:
            kernel = r.layer == "Kernels"
            line = [r.layer, r.part + (f" ({', '.join(self.kernels)})" if kernel else ""),
                    f"{r.seconds * 1e6:.2f}", f"{100 * r.seconds / self.total:.1f}",
                    "-" if kernel or not overhead else f"{100 * r.seconds / overhead:.1f}"]
            if counted:
                line.append("-" if r.instructions is None else f"{r.instructions:,.0f}")
            body.append(line)
        total = sum(r.seconds for r in self.rows)
        heading = f" ({self.cell * 1e6:.2f} us per call)"
        if self.eager is not None and overhead is not None:
            heading = (f" ({self.cell * 1e6:.2f} us per call; eager {self.eager * 1e6:.2f} us, "
                       f"overhead {overhead * 1e6:.2f} us)")
        lines = [title + heading,
                 text_table(headers, body, [False, False] + [True] * (len(headers) - 2),
                            github=False),
                 f"cross-check: layers sum to {total * 1e6:.2f} us = {self.sum_ratio:.3f} x the "
                 f"cell's figure ({'within' if self.sum_agrees else 'NOT within'} "
                 f"{SUM_TOLERANCE:.0%})"]
        negative = [r.part for r in self.rows if r.seconds < 0]
        if negative:
            lines.append("noise exceeds these layers (negative): " + ", ".join(negative))
        if self.rank_correlation is not None:
            lines.append(f"cross-check: instructions rank the layers with Spearman's rho "
                         f"{self.rank_correlation:.2f} against their times "
                         f"({'agrees' if self.ranks_agree else 'does NOT agree'}: "
                         f">= {RANK_AGREEMENT})")
        lines += [f"note: {n}" for n in self.notes]
        if self.profile is not None:
            lines += ["", str(self.profile)]
        return "\n".join(lines)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    def ranks(values: Sequence[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else 1.0


def python_timer(call: Callable[[], Any], **labels: Any) -> Any:
    """A Timer that calls ``call`` from a Python loop, as user code (and ``timeit``) calls
    a compiled function, rather than from opbench's native loop for C callables."""
    from opbench.timer import Timer

    return Timer("_call()", globals={"_call": call}, **labels)


class SplitTimer:
    """Times each probe of ``layers`` in blocks of about ``block_time`` seconds, the probes
    taking turns block by block (load on the machine falls on all of them alike), each
    keeping its least block. ``blocks(n)`` is called once per round of the cell, so the
    blocks spread over the cell's whole measurement: a disturbance while one round ran
    cannot hold every block of a probe."""

    def __init__(self, layers: Layers, block_time: float) -> None:
        self._layers = layers
        self._timers = {key: python_timer(probe.call) for key, probe in layers.probes.items()}
        self._numbers = {}
        for key, timer in self._timers.items():
            timer.run(3)  # warm-up
            estimate = timer.run(10) / 10
            self._numbers[key] = max(1, round(block_time / max(estimate, 1e-9)))
        self.best = dict.fromkeys(self._timers, math.inf)

    def blocks(self, n: int) -> None:
        for _ in range(n):
            for key, timer in self._timers.items():
                number = self._numbers[key]
                self.best[key] = min(self.best[key], timer.run(number) / number)

    def result(self, column: str) -> LayerSplit:
        best, layers = self.best, self._layers
        split = LayerSplit(column, notes=list(layers.notes), kernels=list(layers.kernels))
        split.probes = dict(best)
        split.total = best["compiled"]
        split.rows = [SplitRow(r.layer, r.part, best[r.plus] - sum(best[k] for k in r.minus))
                      for r in layers.rows]
        split.boundaries = [(r.plus, r.minus) for r in layers.rows]
        return split
