"""torch.compile benchmarks (backends without C++ code generation, to stay in seconds)
and first-call timing."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch", reason="opbench.analysis.compile benchmarks torch.compile")

import opbench  # noqa: E402
from opbench.analysis.compile import bench_all, benchmark_compile  # noqa: E402
from opbench.core.first_call import measure_first_call  # noqa: E402


@pytest.fixture
def model():
    torch.manual_seed(0)
    return torch.nn.Linear(8, 8), torch.randn(4, 8)


def test_eager_has_no_compile_time(model):
    compile_ms, run_ms = benchmark_compile(*model)
    assert compile_ms is None
    assert run_ms > 0 and round(run_ms, 2) == run_ms


def test_compiled_first_call_includes_compilation(model, monkeypatch):
    compiles = []
    timed = []

    def counting_backend(gm, example_inputs):
        compiles.append(1)
        return gm.forward

    def first_call(timer):  # compiles seen before and after the timed first call
        before = len(compiles)
        seconds = measure_first_call(timer)
        timed.append((before, len(compiles)))
        return seconds

    monkeypatch.setattr(opbench.analysis.compile, "measure_first_call", first_call)
    compile_ms, run_ms = benchmark_compile(*model, num_iters=3, backend=counting_backend)
    assert compiles == [1]
    assert timed == [(0, 1)]  # the timed call is the one that compiled
    assert compile_ms is not None and run_ms is not None
    assert benchmark_compile(*model, num_iters=3, backend="aot_eager")[0] is not None


def test_training_runs_backward_and_steps_the_optimizer(model):
    module, x = model
    before = module.weight.detach().clone()
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    compile_ms, run_ms = benchmark_compile(module, x, 2, "eager", None, optimizer, None)
    assert compile_ms is not None and run_ms is not None
    assert not torch.equal(before, module.weight)  # output.sum() was minimised


def test_failed_compile_reports_and_returns_none(model, capsys):
    assert benchmark_compile(*model, backend="no_such_backend") == (None, None)
    assert "Failed to compile no_such_backend with mode default" in capsys.readouterr().out


def test_recompilation_is_a_failure(capsys):
    calls = []

    def shape_dependent(x):
        calls.append(1)
        return x + len(calls)  # a new Python constant on every trace: a guard fails

    assert benchmark_compile(shape_dependent, torch.randn(3), backend="eager") == (None, None)
    assert "Recompilation occurred during benchmarking." in capsys.readouterr().out


def test_bench_all_table(model, capsys):
    table = bench_all(*model, num_iters=2, backends=["eager", "aot_eager", "no_such_backend"])
    lines = table.splitlines()
    assert lines[0] == ("| Train/Inference | Backend   | Mode | Compilation Time "
                        "| Average Running Time |")
    assert set(lines[1]) == {"|", "-"}
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert [r[:3] for r in rows] == [["Inference", "Eager", "-"], ["Inference", "eager", "-"],
                                     ["Inference", "aot_eager", "-"]]  # the failure is left out
    assert rows[0][3] == "-" and all(r[4].endswith(" ms") for r in rows)
    assert all(r[3].endswith(" ms") for r in rows[1:])
    assert "Failed to compile no_such_backend" in capsys.readouterr().out


def test_bench_all_training_heading(model):
    module, x = model
    optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
    table = bench_all(module, x, 1, optimizer, lambda out: out.pow(2).mean(), backends=["eager"])
    assert [line.split("|")[1].strip() for line in table.splitlines()[2:]] == ["Training"] * 2


def test_bad_num_iters(model):
    with pytest.raises(ValueError, match="num_iters must be a positive int"):
        benchmark_compile(*model, num_iters=0)


def test_torch_reports_a_warm_call_as_compilation_time():
    """torch 2.13's bench_loop times `timeit(1)`, whose two warm-up calls compile first,
    so its "compilation time" is a warm call. opbench times the cold call."""
    tb_timer = pytest.importorskip("torch.utils.benchmark").Timer
    calls = []

    def model(x):
        calls.append(x)
        return x

    tb_timer("model(x)", globals={"model": model, "x": 1}).timeit(number=1)
    assert len(calls) == 3  # two warm-up calls, then the timed one

    calls.clear()
    measure_first_call(opbench.Timer("model(x)", globals={"model": model, "x": 1}))
    assert len(calls) == 1  # the cold call is the timed one


class _Clock:
    """A clock that moves only when the code under test says: first-call figures
    become exact, whatever the machine's load."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_first_call_is_the_cold_call():
    clock = _Clock()
    state = {"cold": True}

    def lazy():
        clock.now += 1.0 if state["cold"] else 1e-3  # one-time initialisation, as a compile
        state["cold"] = False

    t = opbench.Timer(lazy, timer=clock)
    assert measure_first_call(t) == 1.0
    assert t.timeit(100).median == pytest.approx(1e-3)


def test_first_call_runs_setup_untimed():
    clock = _Clock()
    t = opbench.Timer("clock.now += 1e-3", setup="clock.now += 1.0", timer=clock,
                      globals={"clock": clock})
    assert measure_first_call(t) == pytest.approx(1e-3)
    assert clock.now == pytest.approx(1.001)  # setup ran, untimed


def test_first_call_rejects_non_timers():
    with pytest.raises(TypeError, match=r"needs an opbench\.Timer"):
        measure_first_call(object())
