"""InstructionCounts: how many instructions one task executes per run, as results files
store it and regression gates compare it.

A ``CallgrindStats`` (``Timer.collect_callgrind``) is the whole profile of one
collection; a gate needs one number per benchmark, repeatable on the noisiest
machine. ``InstructionCounts`` keeps the totals of each repeat (noise symbols
removed for Python statements, see ``FunctionCounts.denoise``) and the
empty-statement baseline, and gives ``per_run``: instructions the statement
itself adds per run, ``(min(counts) - baseline) / number_per_run``.

Why the fewest, not the median: code that allocates leaves the heap a little
different after each counted loop, and later repeats can settle in another
state of glibc's free lists, which state following the process's history (its
working directory, its environment). The first, least disturbed repeat is the
one every process agrees on (``benchmarks/cross_process.py``), as timeit's
documentation advises the fastest time for the same reason.

Example:
    >>> from opbench.core.measurement import TaskSpec
    >>> c = InstructionCounts(100, (52_000, 52_000), TaskSpec("x + 1", "x = 1"), baseline=2_000)
    >>> c.per_run
    500.0
"""
from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from opbench.core.measurement import TaskSpec
from opbench.stats import decide

__all__ = ["InstructionCounts"]


@dataclasses.dataclass(frozen=True)
class InstructionCounts:
    """Instruction counts of ``number_per_run`` runs of one task, one total per repeat.

    Attributes:
        number_per_run: runs counted in each total.
        counts: the totals, one per repeat (denoised for Python statements).
        task_spec: what was counted (its ``key`` matches it across files).
        baseline: instructions of the same harness running an empty statement
            ``number_per_run`` times (0 when none was collected, as for C++,
            whose counts cover exactly the statement's loop).
        info: facts about the collection (valgrind version, denoised or not, ...).
    """

    number_per_run: int
    counts: tuple[int, ...]
    task_spec: TaskSpec
    baseline: int = 0
    info: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not self.counts:
            raise ValueError("InstructionCounts needs at least one count")
        if self.number_per_run < 1:
            raise ValueError(f"number_per_run must be a positive int, got {self.number_per_run}")

    @property
    def per_run_values(self) -> tuple[float, ...]:
        """Instructions per run of each repeat, the baseline removed (what a gate pools)."""
        return tuple((c - self.baseline) / self.number_per_run for c in self.counts)

    @property
    def per_run(self) -> float:
        """Instructions per run of the statement, the baseline removed.

        Always in that one unit: a statement cheaper than the baseline's empty
        call gives a negative figure rather than its raw count (loop included),
        which would be another unit. Collectors count the baseline with an
        empty call of the statement's own kind, so that stays near zero. The
        fewest of the repeats (``decide.count_figure``; the module's doc says why).
        """
        return (decide.count_figure(self.counts) - self.baseline) / self.number_per_run

    @property
    def median(self) -> float:
        """``per_run``, under the name tables and colours look for."""
        return self.per_run

    @property
    def title(self) -> str:
        return self.task_spec.title

    def __repr__(self) -> str:
        return (f"<InstructionCounts {self.task_spec.key!r}: {self.per_run:,.1f} instructions "
                f"per run, {len(self.counts)} repeat(s) of {self.number_per_run} runs>")

    @classmethod
    def from_callgrind(cls, stats: Any | Sequence[Any], *, denoise: bool = True,
                       info: dict[str, Any] | None = None) -> InstructionCounts:
        """From ``collect_callgrind``'s result (one CallgrindStats or a tuple of repeats).

        ``denoise`` removes the interpreter's dictionary-lookup symbols, whose
        counts change from run to run (as ``CallgrindStats.counts(denoise=True)``).
        """
        repeats: list[Any] = list(stats) if isinstance(stats, (list, tuple)) else [stats]
        if not repeats:
            raise ValueError("no CallgrindStats given")
        first = repeats[0]
        baseline = first.baseline_exclusive_stats
        return cls(
            number_per_run=first.number_per_run,
            counts=tuple(s.counts(denoise=denoise) for s in repeats),
            task_spec=first.task_spec,
            baseline=(baseline.denoise() if denoise else baseline).sum(),
            info={"denoised": denoise, **(info or {})},
        )
