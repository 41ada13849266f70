"""InstructionCounts: one unit (instructions the statement adds per run) whatever the counts."""
from __future__ import annotations

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
