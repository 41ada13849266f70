"""Progress bar and run_all: drawn on a terminal, silent elsewhere, estimates time left."""
from __future__ import annotations

import io

import pytest

import opbench
from conftest import MockTimer
from opbench.progress import Progress
from opbench.sweep import run_all


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class MockedTimer(opbench.Timer):
    _timer_cls = MockTimer


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("OPBENCH_PROGRESS", raising=False)


def test_draws_in_place_on_a_terminal_with_time_left():
    stream, clock = FakeTTY(), FakeClock()
    with Progress(4, desc="sweep", stream=stream, min_interval=0, _clock=clock) as bar:
        bar.set_item("first")
        clock.now += 10
        bar.update()
        assert bar.eta() == pytest.approx(30.0)
        clock.now += 10
        bar.update()
    out = stream.getvalue()
    assert out.startswith("\rsweep  0/4 |")
    assert "sweep  1/4 |#####               |  25% 0:10 elapsed, ~0:30 left  first" in out
    assert "2/4" in out and "0:20 elapsed, ~0:20 left" in out
    assert out.endswith("\n") and out.count("\n") == 1  # redrawn in place, one final newline


def test_silent_when_not_a_terminal():
    stream = io.StringIO()
    with Progress(3, stream=stream) as bar:
        for _ in range(3):
            bar.update()
    assert stream.getvalue() == ""
    assert not bar.enabled


def test_env_var_silences_a_terminal(monkeypatch):
    monkeypatch.setenv("OPBENCH_PROGRESS", "0")
    stream = FakeTTY()
    with Progress(2, stream=stream) as bar:
        bar.update(2)
    assert stream.getvalue() == ""


def test_env_var_forces_lines_in_logs(monkeypatch):
    monkeypatch.setenv("OPBENCH_PROGRESS", "1")
    stream = io.StringIO()
    with Progress(2, stream=stream, min_interval=0) as bar:
        bar.update()
        bar.update()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert [line.split("|")[0].strip() for line in lines] == ["opbench  1/2", "opbench  2/2"]


def test_explicit_argument_beats_env_var(monkeypatch):
    monkeypatch.setenv("OPBENCH_PROGRESS", "0")
    stream = FakeTTY()
    with Progress(1, stream=stream, enabled=True) as bar:
        bar.update()
    assert "1/1" in stream.getvalue()
    assert not Progress(1, stream=FakeTTY(), enabled=False).enabled


def test_redraws_are_throttled_but_last_item_always_draws():
    stream, clock = FakeTTY(), FakeClock()
    with Progress(100, stream=stream, min_interval=1.0, _clock=clock) as bar:
        for _ in range(100):
            clock.now += 0.001
            bar.update()
    out = stream.getvalue()
    assert out.count("\r") == 2  # the first draw, then only the forced final one
    assert "100/100" in out


def test_run_all_returns_measurements_in_order_with_progress():
    timers = [MockedTimer("us_stmt", label="a"), MockedTimer("ms_stmt", label="b")]
    stream = FakeTTY()
    results = run_all(timers, "timeit", progress=None, stream=stream, number=10)
    assert [m.label for m in results] == ["a", "b"]
    assert all(isinstance(m, opbench.Measurement) for m in results)
    assert results[1].median > results[0].median
    out = stream.getvalue()
    assert "timeit  0/2" in out and "a" in out and "timeit  2/2" in out


def test_run_all_passes_kwargs_and_stays_quiet_when_asked():
    stream = FakeTTY()
    results = run_all([MockedTimer("us_stmt")], progress=False, stream=stream, min_run_time=0.01)
    assert len(results[0].times) > 1  # blocked_autorange ran, with our min_run_time
    assert stream.getvalue() == ""


def test_run_all_rejects_bad_input_before_running():
    with pytest.raises(ValueError, match="method must be one of"):
        run_all([MockedTimer("us_stmt")], method="bogus")
    with pytest.raises(TypeError, match=r"timers\[1\].*no method"):
        run_all([MockedTimer("us_stmt"), object()], progress=False)
    with pytest.raises(ValueError, match="total"):
        Progress(-1)


def test_writes_to_stderr_by_default(capsys):
    with Progress(1, enabled=True) as bar:
        bar.update()
    captured = capsys.readouterr()
    assert captured.out == "" and "1/1" in captured.err


def test_run_all_is_importable_from_here_and_is_the_sweep():
    import opbench.sweep

    assert run_all is opbench.run_all is opbench.sweep.run_all
