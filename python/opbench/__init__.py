"""opbench: micro-benchmarks for PyTorch, Python and C++; a drop-in torch.utils.benchmark.

``import opbench as benchmark`` runs code written for ``torch.utils.benchmark``
unchanged. Importing opbench never imports torch: features that need torch
(the fuzzers, timing torch statements) import it when used.

Example:
    >>> import opbench
    >>> m = opbench.Timer(lambda: sum(range(100))).blocked_autorange(min_run_time=0.01)
    >>> m.median > 0
    True
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Importing _moved lets the modules that moved into subpackages import by their
# old flat paths (`import opbench.results`, `-p opbench.pytest_plugin`).
from opbench import _moved, progress  # noqa: F401 (_moved: imported for its finder)
from opbench._version import __version__
from opbench.errors import (
    BenchmarkWarning,
    CallgrindError,
    CallgrindUnavailableError,
    CompileError,
    CompilerNotFoundError,
    CudaError,
    ElisionWarning,
    Error,
    FuzzerSpecError,
    KeyCollisionError,
    LaunchHoldWarning,
    MachineWarning,
    MemoryCountError,
    MemoryUnavailableError,
    NothingToCompareError,
    OverheadError,
    PlacementError,
    RecompileError,
    ResolutionWarning,
    ResultsFileError,
    ResultsFileWarning,
    SampleSizeWarning,
    SchedulerUnreachableError,
    SerializationError,
    SweepError,
    ThrottleWarning,
    UsageError,
)
from opbench.progress import Progress

if TYPE_CHECKING:  # what the names below are, for type checkers; imported on first use
    from opbench import timer
    from opbench._threads import set_torch_threads
    from opbench.analysis.compare import Colorize, Compare
    from opbench.callgrind import CallgrindStats, CopyIfCallgrind, FunctionCount, FunctionCounts
    from opbench.callgrind.collect import collect_callgrind_all
    from opbench.core.measurement import (
        Measurement,
        TaskSpec,
        ordered_unique,
        select_unit,
        trim_sigfig,
        unit_to_english,
    )
    from opbench.core.memory import MemoryCounts
    from opbench.engines import cuda
    from opbench.engines.cpp import include_dir
    from opbench.store.results import load, save
    from opbench.timer import Language, Timer, default_timer


def _progress_getattr(name: str) -> Any:
    # run_all lived in opbench.progress before it grew executors (opbench.sweep, a
    # floor above progress); `from opbench.progress import run_all` keeps working,
    # and loads the sweep machinery only then, as `opbench.run_all` does.
    if name == "run_all":
        return __getattr__("run_all")
    raise AttributeError(f"module 'opbench.progress' has no attribute {name!r}")


setattr(progress, "__getattr__", _progress_getattr)  # noqa: B010 (a module hook, not a method)

# Names imported on first use, so `import opbench` stays fast and torch-free (the Timer
# brings the native core, the Compare table and callgrind 60 ms more; a command such
# as `opbench ab` needs none of them): public name -> (module, attribute), None for
# the module itself.
_LAZY: dict[str, tuple[str, str | None]] = {
    # `opbench.timer` is the module opbench/timer.py, callable as torch's clock
    # function `torch.utils.benchmark.timer` is (see timer._CallableModule).
    "timer": ("opbench.timer", None),
    "Timer": ("opbench.timer", "Timer"),
    "Language": ("opbench.timer", "Language"),
    "default_timer": ("opbench.timer", "default_timer"),
    "set_torch_threads": ("opbench._threads", "set_torch_threads"),
    "Colorize": ("opbench.analysis.compare", "Colorize"),
    "Compare": ("opbench.analysis.compare", "Compare"),
    "CallgrindStats": ("opbench.callgrind", "CallgrindStats"),
    "CopyIfCallgrind": ("opbench.callgrind", "CopyIfCallgrind"),
    "FunctionCount": ("opbench.callgrind", "FunctionCount"),
    "FunctionCounts": ("opbench.callgrind", "FunctionCounts"),
    "collect_callgrind_all": ("opbench.callgrind.collect", "collect_callgrind_all"),
    "Measurement": ("opbench.core.measurement", "Measurement"),
    "TaskSpec": ("opbench.core.measurement", "TaskSpec"),
    "ordered_unique": ("opbench.core.measurement", "ordered_unique"),
    "select_unit": ("opbench.core.measurement", "select_unit"),
    "trim_sigfig": ("opbench.core.measurement", "trim_sigfig"),
    "unit_to_english": ("opbench.core.measurement", "unit_to_english"),
    "MemoryCounts": ("opbench.core.memory", "MemoryCounts"),
    "cuda": ("opbench.engines.cuda", None),
    "include_dir": ("opbench.engines.cpp", "include_dir"),
    "load": ("opbench.store.results", "load"),
    "save": ("opbench.store.results", "save"),
    "Fuzzer": ("opbench.fuzz.fuzzer", "Fuzzer"),
    "FuzzedParameter": ("opbench.fuzz.fuzzer", "FuzzedParameter"),
    "FuzzedTensor": ("opbench.fuzz.fuzzer", "FuzzedTensor"),
    "ParameterAlias": ("opbench.fuzz.fuzzer", "ParameterAlias"),
    "FuzzedSparseTensor": ("opbench.fuzz.sparse_fuzzer", "FuzzedSparseTensor"),
    # A/B runs live beside the gate (opbench.gate): importing them would import it.
    "ABResult": ("opbench.gate.ab", "ABResult"),
    "compare_ab": ("opbench.gate.ab", "compare_ab"),
    # Sweeps bring executors (sockets, subprocess pools): 20 ms of every import.
    "run_all": ("opbench.sweep", "run_all"),
    # The roofline plot brings matplotlib (on call, not on import).
    "plot_roofline": ("opbench.analysis.roofline", "plot_roofline"),
    # The name opbench 0.1 gave CompileError.
    "CppCompileError": ("opbench.errors", "CompileError"),
}

# The public surface (tests/test_public_surface.py lists it too).
__all__ = [
    "ABResult",
    "BenchmarkWarning",
    "CallgrindError",
    "CallgrindStats",
    "CallgrindUnavailableError",
    "Colorize",
    "Compare",
    "CompileError",
    "CompilerNotFoundError",
    "CopyIfCallgrind",
    "CppCompileError",
    "CudaError",
    "ElisionWarning",
    "Error",
    "FunctionCount",
    "FunctionCounts",
    "FuzzedParameter",
    "FuzzedSparseTensor",
    "FuzzedTensor",
    "Fuzzer",
    "FuzzerSpecError",
    "KeyCollisionError",
    "Language",
    "LaunchHoldWarning",
    "MachineWarning",
    "Measurement",
    "MemoryCountError",
    "MemoryCounts",
    "MemoryUnavailableError",
    "NothingToCompareError",
    "OverheadError",
    "ParameterAlias",
    "PlacementError",
    "Progress",
    "RecompileError",
    "ResolutionWarning",
    "ResultsFileError",
    "ResultsFileWarning",
    "SampleSizeWarning",
    "SchedulerUnreachableError",
    "SerializationError",
    "SweepError",
    "TaskSpec",
    "ThrottleWarning",
    "Timer",
    "UsageError",
    "__version__",
    "collect_callgrind_all",
    "compare_ab",
    "cuda",
    "default_timer",
    "include_dir",
    "load",
    "ordered_unique",
    "plot_roofline",
    "run_all",
    "save",
    "select_unit",
    "set_torch_threads",
    "timer",
    "trim_sigfig",
    "unit_to_english",
]


# Submodules reachable as attributes without an explicit import
# (`opbench.compile.bench_all(...)`), loaded on first access through their
# old paths (opbench._moved).
_LAZY_MODULES = {"compile", "plot", "export", "profile", "op_fuzzers", "fuzzer", "stats",
                 "peaks", "roofline", "work", "utils"}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext opbench``: the ``%opbench`` / ``%%opbench`` magics
    (``opbench.integrations.notebook``; IPython is imported only then)."""
    from opbench.integrations.notebook import load_ipython_extension as load

    load(ipython)


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f"opbench.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'opbench' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    loaded = importlib.import_module(module)
    value = loaded if attribute is None else getattr(loaded, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, *_LAZY_MODULES})
