"""opbench.callgrind.stats: CallgrindStats, the result of one collection."""
from __future__ import annotations

from opbench.callgrind.function_counts import FunctionCount, FunctionCounts
from opbench.callgrind.stats import CallgrindStats
from opbench.core.measurement import TaskSpec


def _fc(*rows: tuple[int, str]) -> FunctionCounts:
    return FunctionCounts(tuple(FunctionCount(c, f) for c, f in rows), inclusive=False)


def _stats(stmt: FunctionCounts, threads: int = 1) -> CallgrindStats:
    base = _fc((40, "Python/ceval.c:loop"), (2, "Objects/dictobject.c:do_lookup"))
    return CallgrindStats(TaskSpec("x + 1", "x = 1", num_threads=threads), 100, False, base, base,
                          stmt, stmt, "raw")


def test_counts_with_and_without_noise_and_the_delta() -> None:
    a = _stats(_fc((500, "Python/ceval.c:loop"), (30, "Objects/dictobject.c:do_lookup")))
    b = _stats(_fc((450, "Python/ceval.c:loop")))
    assert (a.counts(), a.counts(denoise=True)) == (530, 500)
    assert [(c, f) for c, f in a.delta(b)] == [(50, "Python/ceval.c:loop"),
                                              (30, "Objects/dictobject.c:do_lookup")]


def test_repr_shows_both_totals_and_the_debug_symbol_warning() -> None:
    text = repr(_stats(_fc((500, "a"), (30, "Objects/dictobject.c:do_lookup")), threads=2))
    assert "Instructions:          530" in text and "500" in text
    assert "Baseline:               42" in text and "100 runs per measurement, 2 threads" in text
    assert "not built with debug symbols" in text


def test_standardized_names_cancel_between_builds() -> None:
    one = _stats(_fc((5, "/home/a/pytorch/build/aten/src/ATen/ops.cpp:add [libtorch.so]")))
    two = _stats(_fc((5, "/opt/b/build/aten/src/ATen/ops.cpp:add [libtorch_cpu.so]")))
    assert one.as_standardized().delta(two.as_standardized()).sum() == 0
    assert one.as_standardized().stmt_callgrind_out is None
