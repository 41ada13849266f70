"""opbench.analysis.compile_overheads: eager vs torch.compile per call, in each setting, split by
layer. Structure and cross-checks are asserted, never timings (the machine is shared).

One Inductor study (two columns, short times) serves the structural tests; the
recompile and layout tests use the "eager" backend, which compiles in about a second."""
from __future__ import annotations

import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="overheads measures torch.compile")

import opbench  # noqa: E402
import opbench.analysis.compile  # noqa: E402
from opbench.analysis.compile_overheads import COLUMNS, overheads  # noqa: E402

os.environ["PATH"] = os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")

QUICK = {"rounds": 1, "min_run_time": 0.01, "max_run_time": 0.05, "split_blocks": 2,
         "split_block_time": 0.0005}
COLUMNS_2 = ("requires_grad=False", "requires_grad=True")


def add1(x):
    return x + 1


class _Counted:
    """An 'independent' timer that only counts its calls and answers a fixed figure."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, call):
        call()
        self.calls += 1
        return 1e-6


@pytest.fixture(scope="module")
def study():
    peer = _Counted()
    result = overheads(add1, torch.randn(4), columns=COLUMNS_2, profile=True,
                       independent=peer, label="x + 1", **QUICK)
    return result, peer


@pytest.mark.slow
def test_the_table_is_a_compare_of_rows_by_settings(study):
    result, _ = study
    assert opbench.analysis.compile.overheads is overheads
    assert len(result) == 4
    assert [(m.task_spec.sub_label, m.task_spec.description) for m in result] == [
        ("eager", "requires_grad=False"), ("compiled", "requires_grad=False"),
        ("eager", "requires_grad=True"), ("compiled", "requires_grad=True")]
    text = str(opbench.Compare(list(result)))
    assert text == str(result.compare())
    lines = text.splitlines()
    assert "x + 1" in lines[0]
    assert "requires_grad=False" in lines[1] and "requires_grad=True" in lines[1]
    assert [line.split("|")[0].strip() for line in lines[3:5]] == ["eager", "compiled"]
    assert result.cell("compiled", "requires_grad=True") is list(result)[3]
    with pytest.raises(KeyError, match="no cell"):
        result.cell("compiled", "inference_mode")


@pytest.mark.slow
def test_first_calls_recompiles_and_the_independent_figure(study):
    result, peer = study
    assert peer.calls == 4  # one round, each cell
    for m in result:
        assert m.info["first_call_s"] > 0 and m.info["rounds"] == 1
        assert m.median > 0
    compiled = [m for m in result if m.task_spec.sub_label == "compiled"]
    assert [m.info["recompiles"] for m in compiled] == [0, 0]
    assert all("recompiles" not in m.info for m in result if m.task_spec.sub_label == "eager")
    assert result.independent[("eager", "requires_grad=True")] == 1e-6
    details = result.details().splitlines()
    assert details[0].split() == ["cell", "first", "call", "(ms)", "recompiles",
                                  "instructions/call", "independent", "(us)", "opbench", "/",
                                  "independent"]
    assert details[1].split()[4] == "-"  # not counted unless instructions=True
    assert len(details) == 5


@pytest.mark.slow
def test_the_split_covers_every_layer_and_its_cross_check(study):
    result, _ = study
    assert list(result.splits) == list(COLUMNS_2)
    plain, grad = result.splits["requires_grad=False"], result.splits["requires_grad=True"]
    for split in (plain, grad):
        assert split.reason is None
        assert {r.layer for r in split.rows} == {"Dynamo", "AOTAutograd", "Inductor", "Kernels"}
        # The layers telescope to the split's own figure for the whole call ...
        assert sum(r.seconds for r in split.rows) == pytest.approx(split.total, rel=1e-9)
        assert split.total == split.probes["compiled"]
        # ... which the cross-check holds against the cell's figure, measured apart.
        assert split.cell == result.cell("compiled", split.column).median
        assert split.eager == result.cell("eager", split.column).median
        assert split.sum_ratio == pytest.approx(split.total / split.cell)
        assert split.sum_agrees == (abs(split.sum_ratio - 1) <= 0.10)
        assert split.kernels == ["cpp_fused_add_0"]
    assert "autograd Function" in [r.part for r in grad.rows]
    assert "autograd Function" not in [r.part for r in plain.rows]
    text = grad.table()
    assert text.startswith("Split of the compiled call, requires_grad=True (")
    assert "% of overhead over eager" in text and "cross-check: layers sum to" in text
    assert "Profile of 1000 runs" in text  # profile=True: cProfile view under the split
    assert str(result).count("Split of the compiled call") == 2


def test_a_recompile_while_timing_names_the_guard():
    scale = {"k": 1}

    def scaled(x):
        return x * scale["k"]

    def disturb(call):  # after each round, a value the graph was specialised on changes
        scale["k"] += 1
        return 1e-6

    with pytest.raises(opbench.RecompileError) as info:
        overheads(scaled, torch.randn(3), columns=["requires_grad=False"], backend="eager",
                  split=False, independent=disturb, **{**QUICK, "rounds": 2})
    # The eager row's two rounds left k at 3 when the compiled row compiled; its first
    # round ran on that graph, the second found k == 4. torch's own words for the guard:
    message = str(info.value)
    assert "scale['k'] == 3" in message
    assert "compiled, requires_grad=False" in message
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, opbench.Error)


def test_a_layout_it_cannot_follow_skips_the_split_with_the_reason():
    result = overheads(add1, torch.randn(3), columns=["inference_mode"], backend="eager",
                       **QUICK)
    split = result.splits["inference_mode"]
    assert split.rows == [] and "no CompiledFxGraph is reachable" in split.reason
    assert split.table().startswith("Split of the compiled call, inference_mode: skipped: ")


def test_inference_mode_column_runs_under_inference_mode():
    seen = set()  # a set: millions of calls add two facts at most

    @torch._dynamo.disable  # observed, not traced
    def record(x):
        seen.add((torch.is_inference_mode_enabled(), x.is_inference(), x.requires_grad))

    def probe(x):
        record(x)
        return x + 1

    overheads(probe, torch.randn(2), columns=["inference_mode", "requires_grad=True"],
              backend="eager", split=False, **QUICK)
    assert seen == {(True, True, False), (False, False, True)}


@pytest.mark.parametrize("kwargs, error, match", [
    ({"columns": ["training"]}, ValueError, "columns must be some of"),
    ({"columns": []}, ValueError, "columns must be some of"),
    ({"rounds": 0}, ValueError, "rounds"),
    ({"split_blocks": 0}, ValueError, "split_blocks"),
    ({"min_run_time": 0}, ValueError, "min_run_time"),
])
def test_bad_options_fail_early(kwargs, error, match):
    with pytest.raises(error, match=match):
        overheads(add1, torch.randn(2), **kwargs)


def test_a_non_callable_is_refused():
    with pytest.raises(TypeError, match="needs a callable"):
        overheads(42)
    assert set(COLUMNS) == {"requires_grad=False", "requires_grad=True", "inference_mode"}
