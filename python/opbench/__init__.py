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

from typing import Any

# `opbench.timer` is the module opbench/timer.py, callable as torch's clock
# function `torch.utils.benchmark.timer` is (see timer._CallableModule).
# Importing _moved lets the modules that moved into subpackages import by their
# old flat paths (`import opbench.results`, `-p opbench.pytest_plugin`).
from opbench import _moved, progress, timer  # noqa: F401 (_moved: imported for its finder)
from opbench._threads import set_torch_threads
from opbench._version import __version__
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
from opbench.engines import cuda
from opbench.engines.cpp import include_dir
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

# Names imported on first use, so `import opbench` stays fast and torch-free:
# public name -> (module, attribute).
_LAZY = {
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
    # The name opbench 0.1 gave CompileError.
    "CppCompileError": ("opbench.errors", "CompileError"),
}

__all__ = [
    "__version__",
    "BenchmarkWarning",
    "CallgrindError",
    "CallgrindStats",
    "CallgrindUnavailableError",
    "Colorize",
    "Compare",
    "CompileError",
    "CompilerNotFoundError",
    "CopyIfCallgrind",
    "CudaError",
    "ElisionWarning",
    "Error",
    "FunctionCount",
    "FunctionCounts",
    "FuzzerSpecError",
    "Language",
    "LaunchHoldWarning",
    "KeyCollisionError",
    "MachineWarning",
    "NothingToCompareError",
    "OverheadError",
    "Measurement",
    "PlacementError",
    "RecompileError",
    "Progress",
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
    "collect_callgrind_all",
    "cuda",
    "default_timer",
    "include_dir",
    "load",
    "ordered_unique",
    "run_all",
    "save",
    "select_unit",
    "set_torch_threads",
    "timer",
    "trim_sigfig",
    "unit_to_english",
    *_LAZY,
]


# Submodules reachable as attributes without an explicit import
# (`opbench.compile.bench_all(...)`), loaded on first access through their
# old paths (opbench._moved).
_LAZY_MODULES = {"compile", "plot", "export", "profile", "op_fuzzers", "fuzzer", "stats"}


def __getattr__(name: str) -> Any:
    import importlib

    if name in _LAZY_MODULES:
        return importlib.import_module(f"opbench.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'opbench' has no attribute {name!r}")
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value
