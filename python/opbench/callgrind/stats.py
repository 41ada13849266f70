"""CallgrindStats: the result of ``Timer.collect_callgrind``.

Mirrors ``torch.utils.benchmark.CallgrindStats`` (same fields, methods and
``__repr__`` text apart from the class path) without importing torch.

Example:
    >>> from opbench.core.measurement import TaskSpec
    >>> from opbench.callgrind.function_counts import FunctionCount
    >>> fc = FunctionCounts((FunctionCount(100, "a.c:f"),), inclusive=False)
    >>> none = FunctionCounts((), inclusive=False)
    >>> s = CallgrindStats(TaskSpec("x", "pass"), 1, True, none, none, fc, fc, None)
    >>> s.counts(), s.delta(s).sum()
    (100, 0)
"""
from __future__ import annotations

import dataclasses
import functools
import re
import textwrap
from typing import Any

from opbench.callgrind.function_counts import FunctionCounts

__all__ = ["CallgrindStats"]

# Path prefixes that differ between builds of the same code (see as_standardized).
_STANDARDIZE = (
    (re.compile(r"^.+build/\.\./"), "build/../"),
    (re.compile(r"^.+/" + re.escape("build/aten/")), "build/aten/"),
    (re.compile(r"^.+/" + re.escape("Python/")), "Python/"),
    (re.compile(r"^.+/" + re.escape("Objects/")), "Objects/"),
    (re.compile(r"\s\[.+\]$"), ""),  # the object (library) name
)


def _standardize(stats: FunctionCounts) -> FunctionCounts:
    # One transform per rule, in order, as torch does: a later rule sees the
    # earlier one's output and colliding names are summed at each step.
    for pattern, replacement in _STANDARDIZE:
        stats = stats.transform(functools.partial(pattern.sub, replacement))
    return stats


@dataclasses.dataclass(repr=False, eq=False, frozen=True)
class CallgrindStats:
    """Instruction counts of one statement (and of an empty-statement baseline).

    Use ``stats()`` for per-function counts, ``counts()`` for the total, and
    ``delta()`` to diff two results.
    """

    task_spec: Any  # opbench.core.measurement.TaskSpec
    number_per_run: int
    built_with_debug_symbols: bool
    baseline_inclusive_stats: FunctionCounts
    baseline_exclusive_stats: FunctionCounts
    stmt_inclusive_stats: FunctionCounts
    stmt_exclusive_stats: FunctionCounts
    stmt_callgrind_out: str | None

    def __repr__(self) -> str:
        base = self.baseline_exclusive_stats
        threads = self.task_spec.num_threads
        output = f"""
{object.__repr__(self)}
{self.task_spec.summarize()}
  {'':>25}All{'':>10}Noisy symbols removed
    Instructions: {self.counts(denoise=False):>12}{'':>15}{self.counts(denoise=True):>12}
    Baseline:     {base.sum():>12}{'':>15}{base.denoise().sum():>12}
{self.number_per_run} runs per measurement, {threads} thread{'s' if threads > 1 else ''}
""".strip()
        if not self.built_with_debug_symbols:
            output += textwrap.dedent("""
            Warning: PyTorch was not built with debug symbols.
                     Source information may be limited. Rebuild with
                     REL_WITH_DEB_INFO=1 for more detailed results.""")
        return output

    def stats(self, inclusive: bool = False) -> FunctionCounts:
        """Per-function counts; ``inclusive=True`` adds the costs of callees (hot spots),
        ``False`` (default) gives each function's own instructions (better for diffs)."""
        return self.stmt_inclusive_stats if inclusive else self.stmt_exclusive_stats

    def counts(self, *, denoise: bool = False) -> int:
        """Total instructions executed (see ``FunctionCounts.denoise`` for ``denoise``)."""
        stats = self.stmt_exclusive_stats
        return (stats.denoise() if denoise else stats).sum()

    def delta(self, other: CallgrindStats, inclusive: bool = False) -> FunctionCounts:
        """Per-function difference ``self - other``."""
        return self.stats(inclusive=inclusive) - other.stats(inclusive=inclusive)

    def as_standardized(self) -> CallgrindStats:
        """The same result with build paths and library names stripped from function
        names, so profiles from different builds cancel when diffed."""
        return CallgrindStats(
            task_spec=self.task_spec,
            number_per_run=self.number_per_run,
            built_with_debug_symbols=self.built_with_debug_symbols,
            baseline_inclusive_stats=_standardize(self.baseline_inclusive_stats),
            baseline_exclusive_stats=_standardize(self.baseline_exclusive_stats),
            stmt_inclusive_stats=_standardize(self.stmt_inclusive_stats),
            stmt_exclusive_stats=_standardize(self.stmt_exclusive_stats),
            # Names changed, so the raw file no longer matches.
            stmt_callgrind_out=None,
        )

