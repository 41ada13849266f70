"""opbench.analysis.compile_instructions and the instruction cross-check of the split: counts put on
the cells and split at the same boundaries as the times; the reasons when they cannot be."""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="compile counts need torch")

from opbench.analysis import compile_instructions  # noqa: E402
from opbench.analysis.compile_overheads import _add_instructions, overheads  # noqa: E402
from opbench.analysis.compile_split import LayerSplit, SplitRow, spearman  # noqa: E402
from opbench.callgrind.collect import callgrind_unavailable_reason  # noqa: E402
from opbench.core.measurement import Measurement, TaskSpec  # noqa: E402

os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")


def add1(x):
    return x + 1


def test_only_functions_importable_by_name_can_be_counted():
    def local(x):
        return x

    assert compile_instructions._importable(add1) is None
    assert "not importable by name" in compile_instructions._importable(local)
    assert "not importable by name" in compile_instructions._importable(lambda x: x)
    assert compile_instructions._load(add1.__module__, "add1", None) is add1


def test_without_valgrind_the_reason_is_returned(monkeypatch):
    monkeypatch.setattr("opbench.callgrind.collect.callgrind_unavailable_reason",
                        lambda: "valgrind is not installed")
    assert compile_instructions.count(add1, (torch.randn(2),), {}, ["inference_mode"],
                                      "inductor", None) == "valgrind is not installed"


def test_a_cell_that_cannot_be_counted_says_why():
    def local(x):
        return x * 3

    result = overheads(local, torch.randn(2), columns=["inference_mode"], backend="eager",
                       split=False, instructions=True, rounds=1, min_run_time=0.01,
                       max_run_time=0.05)
    for m in result:
        assert "not importable by name" in m.info["instructions_per_call"]
    assert "n/a (" in result.details()


def testspearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)
    assert spearman([1, 1], [1, 1]) == 1.0


def test_counts_split_at_the_times_boundaries():
    split = LayerSplit("requires_grad=False", rows=[
        SplitRow("Dynamo", "frame", 5e-6), SplitRow("Dynamo", "guards", 1e-6),
        SplitRow("Inductor", "call", 3e-6), SplitRow("Kernels", "kernels", 0.5e-6)],
        boundaries=[("compiled", ("inductor", "guards")), ("guards", ()),
                    ("inductor", ("kernels",)), ("kernels", ())])
    spec = TaskSpec("_call()", "pass", sub_label="compiled", description="requires_grad=False")
    cells = [Measurement(1, [1e-5], spec),
             Measurement(1, [1e-6], TaskSpec("_call()", "pass", sub_label="eager",
                                             description="requires_grad=False"))]
    counts = {"requires_grad=False": {"eager": 900.0, "compiled": 10_000.0, "guards": 500.0,
                                      "inductor": 3_000.0, "kernels": 200.0}}
    _add_instructions(counts, cells, {"requires_grad=False": split})
    assert [r.instructions for r in split.rows] == [6_500.0, 500.0, 2_800.0, 200.0]
    assert cells[0].info["instructions_per_call"] == 10_000.0
    assert cells[1].info["instructions_per_call"] == 900.0
    assert split.rank_correlation == 1.0 and split.ranks_agree
    assert "instructions/call" in split.table().splitlines()[1]
    split.rows[1].instructions = 9_000.0  # guards now the most instructions, least time
    assert split.rank_correlation < 0.8 and not split.ranks_agree
    assert "does NOT agree" in split.table()


@pytest.mark.slow
@pytest.mark.skipif(callgrind_unavailable_reason() is not None, reason="needs valgrind")
def test_a_compiled_call_counted_under_callgrind():
    counts = compile_instructions.count(add1, (torch.randn(4),), {}, ["requires_grad=False"],
                                        "inductor", None)
    assert isinstance(counts, dict), counts
    figures = counts["requires_grad=False"]
    assert {"eager", "compiled", "guards", "aot", "inductor", "module_call",
            "kernels"} <= set(figures)
    # Each boundary's callable runs inside the one outside it: fewer instructions inward.
    assert figures["compiled"] > figures["aot"] > figures["inductor"] > \
        figures["module_call"] > figures["kernels"] > 0
    assert figures["compiled"] > figures["eager"]
