"""opbench.core.instructions: InstructionCounts, the figure results files keep and gates compare."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import TaskSpec

SPEC = TaskSpec("x + 1", "x = 1")


def test_per_run_is_the_median_less_the_baseline() -> None:
    c = InstructionCounts(100, (52_000, 53_000, 52_100), SPEC, baseline=2_000)
    assert c.per_run == c.median == (52_100 - 2_000) / 100
    assert c.title == SPEC.title
    assert "501.0 instructions per run, 3 repeat(s) of 100 runs" in repr(c)


def test_a_baseline_above_the_count_is_ignored() -> None:
    # C++ counts cover the loop alone; a stray baseline must not make them negative.
    assert InstructionCounts(10, (500,), SPEC, baseline=900).per_run == 50.0


def test_info_is_not_part_of_equality() -> None:
    assert InstructionCounts(1, (5,), SPEC, info={"a": 1}) == InstructionCounts(1, (5,), SPEC)


@pytest.mark.parametrize(("number", "counts", "message"), [
    (1, (), "at least one count"), (0, (5,), "number_per_run must be a positive int")])
def test_bad_input_is_rejected(number: int, counts: tuple[int, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        InstructionCounts(number, counts, SPEC)


class _Counts:
    def __init__(self, total: int) -> None:
        self.total = total

    def sum(self) -> int:
        return self.total

    def denoise(self) -> _Counts:
        return _Counts(self.total - 100)


def _stats(raw: int) -> SimpleNamespace:
    return SimpleNamespace(number_per_run=10, task_spec=SPEC, baseline_exclusive_stats=_Counts(1_000),
                           counts=lambda denoise: raw - 7 if denoise else raw)


def test_from_callgrind_takes_one_stats_or_its_repeats() -> None:
    one = InstructionCounts.from_callgrind(_stats(5_000))
    assert (one.counts, one.baseline, one.info) == ((4_993,), 900, {"denoised": True})
    both = InstructionCounts.from_callgrind((_stats(5_000), _stats(5_010)), denoise=False,
                                            info={"valgrind": "3.22"})
    assert (both.counts, both.baseline) == ((5_000, 5_010), 1_000)
    assert both.info == {"denoised": False, "valgrind": "3.22"}
    with pytest.raises(ValueError, match="no CallgrindStats given"):
        InstructionCounts.from_callgrind([])
