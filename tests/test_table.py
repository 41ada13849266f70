"""opbench.analysis.table: the layout every view of a Compare shares (rows, columns, texts)."""
from __future__ import annotations

import pytest

from opbench import Measurement, TaskSpec
from opbench.analysis.table import build
from opbench.core.instructions import InstructionCounts
from opbench.core.memory import MemoryCounts


def _m(t: float, stmt: str = "f()", threads: int = 1, **spec: str) -> Measurement:
    return Measurement(1, [t], TaskSpec(stmt, "pass", num_threads=threads, **spec))


def test_one_table_per_label_in_first_seen_order() -> None:
    tables = build([_m(1e-6, label="B"), _m(2e-6, label="A"), _m(3e-6, label="B", stmt="g()")])
    assert [t.label for t in tables] == ["B", "A"]
    assert [r.name for r in tables[0].rows] == ["f()", "g()"]


def test_rows_sort_by_threads_and_missing_cells_are_blank() -> None:
    ms = [_m(1e-6, threads=4, description="a"), _m(2e-6, threads=1, description="a"),
          _m(3e-6, threads=1, description="b")]
    [table] = build(ms)
    assert table.columns == ("a", "b")
    assert [r.num_threads for r in table.rows] == [1, 4]
    assert [len(g) for g in table.groups()] == [1, 1]
    four = table.rows[1]
    assert four.cells[1] is None and four.texts[1].strip() == ""
    assert len(table.results) == 3
    assert table.note == "Times are in microseconds (us)."


def test_replicates_merge_into_one_cell() -> None:
    [table] = build([_m(1e-6), _m(3e-6)])
    [row] = table.rows
    assert row.cells[0].times == [1e-6, 3e-6]


def test_instruction_counts_show_whole_and_pool_their_repeats() -> None:
    spec = TaskSpec("f()", "pass", description="a")
    [table] = build([InstructionCounts(10, (1_000,), spec), InstructionCounts(10, (1_200,), spec)])
    assert (table.unit, table.scale) == ("instructions", 1)
    assert table.rows[0].cells[0].counts == (1_000, 1_200)
    assert table.note == "Counts are instructions per run."


def test_times_and_counts_do_not_share_a_table() -> None:
    with pytest.raises(ValueError, match="one kind"):
        build([_m(1e-6), InstructionCounts(10, (5,), TaskSpec("f()", "pass"))])


def _memory(description: str, allocations: int, nbytes: int, growth: int = 0) -> MemoryCounts:
    host = {"allocations": (allocations * 10,), "bytes": (nbytes * 10,), "peak": (nbytes,),
            "growth": (growth * 10,)}
    return MemoryCounts(10, {"host": host}, TaskSpec("f()", "pass", description=description))


def test_memory_counts_show_allocations_and_bytes_per_call_and_a_leak() -> None:
    [table] = build([_memory("a", 5, 4096), _memory("b", 1, 64, growth=64), _memory("a", 5, 4096)])
    assert table.unit == "memory" and table.note.startswith("Cells are allocations / bytes")
    assert [t.strip() for t in table.rows[0].texts] == ["5 / 4.00 KiB", "1 / 64 B leaks 64 B"]
    assert table.rows[0].cells[0].repeats == 2  # replicates pooled
    with pytest.raises(ValueError, match="one kind"):
        build([_m(1e-6), _memory("a", 1, 8)])


def test_counts_of_different_run_numbers_are_not_pooled() -> None:
    spec = TaskSpec("f()", "pass")
    with pytest.raises(ValueError, match="different numbers of runs"):
        build([InstructionCounts(10, (5,), spec), InstructionCounts(20, (5,), spec)])


def test_placement_notes_flag_differences_within_the_layout_spread() -> None:
    a, b = _m(1.00e-6, description="a"), _m(1.03e-6, description="b")
    a.info["layout_spread"], b.info["layout_spread"] = 0.05, 0.02
    [table] = build([a, b])
    assert table.placement_notes() == [
        "f(): b vs a differ by 3.0%, within the code-placement spread (5.0%)"]
