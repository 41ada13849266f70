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

# The names imported on first use, so `import opbench` stays fast and torch-free (the Timer
# brings the native core, the Compare table and callgrind; the roofline plot matplotlib, on
# call; A/B runs the gate; sweeps their executors: sockets, subprocess pools; a command
# such as `opbench ab` needs none of them). This block is both what type checkers see and
# the lazy loader's table: `opbench.NAME` imports NAME as the line that names it here does,
# on first access (_lazy_table reads the block from this file, as scientific-python's
# lazy_loader reads a stub). A new public name is a line here (unless it is imported above)
# and an entry in __all__; tests/test_public_surface.py checks that the two agree.
# `opbench.timer` is the package opbench/timer/, callable as torch's clock function
# `torch.utils.benchmark.timer` is (see timer._CallableModule); `opbench.utils` and
# `opbench.op_fuzzers` are torch's module paths, attributes as in torch.
if TYPE_CHECKING:
    from opbench import op_fuzzers as op_fuzzers
    from opbench import stats as stats
    from opbench import timer
    from opbench import utils as utils
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
    from opbench.core.roofline import plot_roofline
    from opbench.engines import cuda
    from opbench.engines.cpp import include_dir
    from opbench.fuzz.fuzzer import FuzzedParameter, FuzzedTensor, Fuzzer, ParameterAlias
    from opbench.fuzz.sparse_fuzzer import FuzzedSparseTensor
    from opbench.gate.ab import ABResult, compare_ab
    from opbench.store.results import load, save
    from opbench.sweep import run_all
    from opbench.timer import Language, Timer, default_timer

# The public surface, the one list of it (`from opbench import *`, the API reference).
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

_LAZY_TABLE: dict[str, tuple[str, str]] | None = None


def _lazy_table() -> dict[str, tuple[str, str]]:
    """Name -> (module, attribute) for each name the ``if TYPE_CHECKING:`` block imports."""
    global _LAZY_TABLE
    if _LAZY_TABLE is None:
        import ast

        with open(__file__, encoding="utf-8") as f:
            tree = ast.parse(f.read())
        block = next(node for node in tree.body
                     if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING")
        _LAZY_TABLE = {alias.asname or alias.name: (statement.module or "", alias.name)
                       for statement in block.body if isinstance(statement, ast.ImportFrom)
                       for alias in statement.names}
    return _LAZY_TABLE


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext opbench``: the ``%opbench`` / ``%%opbench`` magics
    (``opbench.integrations.notebook``; IPython is imported only then)."""
    from opbench.integrations.notebook import load_ipython_extension as load

    load(ipython)


# Hidden from type checkers, which read the imports above instead: for them a name
# that is not there is an error, not Any.
if not TYPE_CHECKING:
    def __getattr__(name: str) -> Any:
        import importlib

        if name not in _lazy_table():
            raise AttributeError(f"module 'opbench' has no attribute {name!r}")
        module, attribute = _lazy_table()[name]
        if module == __name__:  # `from opbench import timer`: a submodule
            value = importlib.import_module(f"{__name__}.{attribute}")
        else:
            loaded = importlib.import_module(module)
            try:
                value = getattr(loaded, attribute)
            except AttributeError:  # a submodule its package does not import
                value = importlib.import_module(f"{module}.{attribute}")
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_lazy_table()})
