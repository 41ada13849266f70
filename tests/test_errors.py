"""opbench.errors: one base class for every error and every warning, and warnings that
stay with the result they concern (in Measurement.info, through save and load)."""
from __future__ import annotations

import inspect
import warnings

import pytest

import opbench
from opbench import environment, errors
from opbench.engines import Engine
from opbench.store.results import load, save


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(errors, "_shown", set())


def test_every_error_is_an_opbench_error_and_keeps_the_base_torch_users_catch():
    expected_bases = {
        errors.ResultsFileError: ValueError,
        errors.KeyCollisionError: ValueError,
        errors.NothingToCompareError: ValueError,
        errors.OverheadError: ValueError,
        errors.CompileError: RuntimeError,
        errors.CompilerNotFoundError: RuntimeError,
        errors.RecompileError: RuntimeError,
        errors.CudaError: RuntimeError,
        errors.GraphCaptureError: RuntimeError,
        errors.CallgrindError: OSError,  # torch's collect_callgrind raises OSError
        errors.CallgrindUnavailableError: OSError,
        errors.SerializationError: ValueError,
        errors.MemoryUnavailableError: OSError,
        errors.MemoryCountError: RuntimeError,
        errors.FuzzerSpecError: AssertionError,  # torch asserts on bad fuzzer specs
        errors.SweepError: RuntimeError,
        errors.PlacementError: RuntimeError,
        errors.SchedulerUnreachableError: ConnectionError,
        errors.UntrustedPathError: PermissionError,
        errors.UnsupportedError: NotImplementedError,  # torch's names opbench does not implement
    }
    for cls, base in expected_bases.items():
        assert issubclass(cls, errors.Error) and issubclass(cls, base), cls
        assert getattr(opbench, cls.__name__, cls) is cls  # public under its own name
    defined = {obj for _, obj in inspect.getmembers(errors, inspect.isclass)
               if issubclass(obj, Exception) and not issubclass(obj, Warning)
               and obj.__module__ == errors.__name__}
    assert defined - {errors.Error} <= set(expected_bases) | {errors.UsageError}, \
        "a new error class needs its built-in base checked here"


def test_the_native_cuda_error_is_the_python_class():
    assert opbench._C.CudaError is errors.CudaError


def test_every_warning_is_a_benchmark_warning():
    for cls in (errors.MachineWarning, errors.SampleSizeWarning, errors.ElisionWarning,
                errors.ThrottleWarning, errors.LaunchHoldWarning, errors.ResolutionWarning,
                errors.ResultsFileWarning, errors.UnsafeFolderWarning):
        assert issubclass(cls, errors.BenchmarkWarning)
    # What the GPU warnings used to be, so old filters keep working too.
    assert issubclass(errors.ThrottleWarning, RuntimeWarning)
    assert issubclass(errors.LaunchHoldWarning, RuntimeWarning)
    with pytest.raises(TypeError, match="BenchmarkWarning subclass"):
        errors.warn(UserWarning, "not ours")  # type: ignore[arg-type]


def test_once_shows_one_warning_but_records_every_time():
    first, second = [], []
    with pytest.warns(errors.MachineWarning) as shown:
        with errors.recording(first):
            errors.warn(errors.MachineWarning, "slow governor", once="governor")
        with errors.recording(second):
            errors.warn(errors.MachineWarning, "slow governor", once="governor")
    assert len(shown) == 1
    assert first == second == [{"category": "MachineWarning", "message": "slow governor"}]


def _slow_governor(monkeypatch, tmp_path):
    d = tmp_path / "cpu0" / "cpufreq"
    d.mkdir(parents=True)
    (d / "scaling_governor").write_text("powersave\n")
    monkeypatch.setattr(environment, "_GOVERNOR_GLOB",
                        str(tmp_path / "cpu[0-9]*" / "cpufreq" / "scaling_governor"))


def test_a_warning_about_a_result_survives_save_and_load(monkeypatch, tmp_path):
    _slow_governor(monkeypatch, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", opbench.BenchmarkWarning)
        first = opbench.Timer("x + 1", setup="x = 1").timeit(100)
        second = opbench.Timer("x + 2", setup="x = 1").timeit(100)  # shown once, kept twice
    for m in (first, second):
        [record] = m.info["warnings"]
        assert record["category"] == "MachineWarning" and "powersave" in record["message"]
    loaded = load(save([first, second], tmp_path / "r.json", environment={}))
    assert [m.info["warnings"] for m in loaded] == [first.info["warnings"]] * 2


def test_one_filter_silences_every_opbench_warning(monkeypatch, tmp_path):
    _slow_governor(monkeypatch, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.simplefilter("ignore", opbench.BenchmarkWarning)
        for cls in (errors.ThrottleWarning, errors.LaunchHoldWarning, errors.ElisionWarning):
            errors.warn(cls, "silenced")  # RuntimeWarning / UserWarning before
        opbench.Timer("pass").timeit(10)


class _WarningEngine(Engine):
    """An engine whose statement "deleted" warns, as the C++ engine does."""

    def __init__(self, stmt, setup, timer, globals, **kwargs):
        self._warns = stmt == "deleted"

    def timeit(self, number):
        if self._warns:
            errors.warn(errors.ElisionWarning, "the statement was deleted", once="test-elision")
        return 1e-6 * number + 1e-8


def test_a_timer_records_only_its_own_engines_warnings(monkeypatch):
    monkeypatch.setattr(opbench.Timer, "_timer_cls", _WarningEngine)
    a, b = opbench.Timer("deleted"), opbench.Timer("kept")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        n = a.block_size(0.001)
        b.block_size(0.001)
        times_a, times_b = [a.run(n), b.run(n)], [b.run(n)]  # interleaved, as compare_ab does
    [record] = a.measurement(n, times_a).info["warnings"]
    assert record == {"category": "ElisionWarning", "message": "the statement was deleted"}
    assert "warnings" not in b.measurement(n, times_b).info
