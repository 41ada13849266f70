"""InstructionCounts: one unit (instructions the statement adds per run) whatever the counts."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from opbench import _C, gate
from opbench.callgrind import in_process
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import TaskSpec

SPEC = TaskSpec("f()", "pass", name="f")


def test_per_run_always_subtracts_the_baseline():
    # A statement cheaper than the baseline's empty call (a C callable against a
    # Python no-op) used to switch to the raw count, loop included: another unit.
    assert InstructionCounts(100, (2_100,), SPEC, baseline=2_000).per_run == 1.0
    assert InstructionCounts(100, (1_900,), SPEC, baseline=2_000).per_run == -1.0
    assert InstructionCounts(100, (1_900, 2_100), SPEC, baseline=2_000).per_run_values == (-1.0, 1.0)


def test_gate_pools_counts_in_the_same_unit():
    old = InstructionCounts(100, (2_100, 2_100), SPEC, baseline=2_000)
    same = InstructionCounts(100, (2_100, 2_100), SPEC, baseline=2_000)
    (row,) = gate.compare([old], [same], threshold=0.05).rows
    assert (row.baseline, row.new, row.status) == (1.0, 1.0, "same")
    # Below the baseline: never a raw count read as 19.9 instructions a run (a
    # 20x "regression"); the gate refuses the non-positive figure instead.
    below = InstructionCounts(100, (1_990, 1_990), SPEC, baseline=2_000)
    with pytest.raises(ValueError, match="positive"):
        gate.compare([old], [below], threshold=0.05)


def test_in_process_baseline_is_an_empty_call_of_the_same_kind():
    def python_function():
        pass

    assert in_process.empty_call_like(len) is _C.noop
    assert in_process.empty_call_like(python_function) is in_process._noop
    assert in_process.empty_call_like(lambda: None) is in_process._noop

def test_per_run_is_the_fewest_less_the_baseline() -> None:
    # The repeat least moved by the heap's history, as every process sees it
    # (benchmarks/cross_process.py), not the median a later repeat can shift.
    c = InstructionCounts(100, (52_100, 53_000, 52_000), SPEC, baseline=2_000)
    assert c.per_run == c.median == (52_000 - 2_000) / 100
    assert c.title == SPEC.title
    assert "500.0 instructions per run, 3 repeat(s) of 100 runs" in repr(c)


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
