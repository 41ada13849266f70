"""torch.compile's fixed overhead per call, eager against compiled, split by layer.

``overheads(fn, *args)`` is the study of the thread opbench was created from
(``x + 1`` eager against ``torch.compile``, with ``requires_grad`` False and
True and under ``inference_mode``) as one call, and then answers the question
that thread asks next: which layer of the compiled call costs what.

* **The table.** Rows ``eager`` and ``compiled``, a column per setting; each
  cell an opbench ``Measurement`` of one call of ``fn`` (per call, by opbench's
  stopping rule, ``opbench.core.stopping.converge``), so the result prints, and
  combines with other results, as a ``Compare``. The first (compiling) call is
  timed apart, before any warm-up (``info["first_call_s"]``). Each compiled
  cell starts from an empty Dynamo cache for ``fn``'s code, so its first call
  compiles and its guards are its own; compilations after the first call are
  counted (``info["recompiles"]``), and a recompilation *while timing* raises
  ``opbench.RecompileError`` naming the guard that failed.
* **The split.** For each compiled cell, the callables each layer hands to the
  next (``opbench.analysis.compile_layers``: Dynamo's frame evaluation, cache lookup and
  guards; AOTAutograd's runtime wrappers and autograd Function; Inductor's
  compiled graph, module call and launcher; the kernels) are timed with the
  arguments they get in a real call, in short blocks (2 ms) taking turns,
  spread over the cell's rounds, each keeping its least block (disturbance
  only adds time; the least of many short blocks is the undisturbed cost).
  A layer's cost is its callable's time minus the next one's
  (``opbench.analysis.compile_split``). Printed as
  microseconds per call, share of the compiled call and share of the
  overhead over eager.
* **Cross-checks.** The layers telescope to the split's own figure for the whole
  compiled call; that sum is checked against the cell's figure, measured apart
  by the stopping rule (within 10%). Where a layer comes out negative (noise
  larger than the layer), it says so. With ``instructions=True`` (valgrind),
  every cell and every layer's callable is also counted under callgrind
  (``opbench.analysis.compile_instructions``), the counts split at the same boundaries,
  and their order of the layers is checked against the times' (Spearman's
  rank correlation at least ``RANK_AGREEMENT``).
* ``profile=True`` adds the cProfile view of each compiled call (``Timer.profile``).

Where the installed torch lays its layers out differently, the split is
skipped with the reason, never guessed (``LayerSplit.reason``).

Example (compiles three times: tens of seconds on a small machine)::

    import opbench.analysis.compile, torch
    result = opbench.analysis.compile.overheads(lambda x: x + 1, torch.randn(10))
    print(result)                       # the table, first calls, the split
    opbench.Compare(list(result)).print()
"""
from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from opbench._checks import check_count, check_positive
from opbench._text import text_table
from opbench._threads import set_torch_threads
from opbench.analysis.compile_layers import find_layers, frame_code
from opbench.analysis.compile_settings import COLUMNS, cache_entries, call_args, reset_cache, setting
from opbench.analysis.compile_split import LayerSplit, SplitRow, SplitTimer, python_timer
from opbench.core.first_call import measure_first_call
from opbench.core.measurement import Measurement
from opbench.errors import RecompileError

__all__ = ["COLUMNS", "CompileOverheads", "LayerSplit", "SplitRow", "overheads"]

ROWS = ("eager", "compiled")


class CompileOverheads:
    """What ``overheads`` measured: iterate it for the Measurements (``Compare(list(r))``).

    Attributes:
        measurements: eager and compiled cells, per column.
        splits: the split of each compiled cell, by column.
        label: the table's title.
    """

    def __init__(self, label: str, measurements: list[Measurement],
                 splits: dict[str, LayerSplit], independent: dict[tuple[str, str], float]):
        self.label = label
        self.measurements = measurements
        self.splits = splits
        self.independent = independent

    def __iter__(self) -> Iterator[Measurement]:
        return iter(self.measurements)

    def __len__(self) -> int:
        return len(self.measurements)

    def cell(self, row: str, column: str) -> Measurement:
        """The Measurement of ``row`` ("eager" or "compiled") in ``column``."""
        for m in self.measurements:
            if m.task_spec.sub_label == row and m.task_spec.description == column:
                return m
        raise KeyError(f"no cell ({row!r}, {column!r}); rows {ROWS}, columns "
                       f"{sorted({str(m.task_spec.description) for m in self.measurements})}")

    def compare(self) -> Any:
        """The cells as an ``opbench.Compare`` (rows eager / compiled)."""
        from opbench.analysis.compare import Compare

        return Compare(self.measurements)

    def details(self) -> str:
        """First calls, recompiles and instructions per call (and the independent
        figure), a line per cell."""
        headers = ["cell", "first call (ms)", "recompiles", "instructions/call"]
        right = [False, True, True, True]
        if self.independent:
            headers += ["independent (us)", "opbench / independent"]
            right += [True, True]
        body = []
        for m in self.measurements:
            row, column = m.task_spec.sub_label, m.task_spec.description
            recompiles = m.info.get("recompiles")
            line = [f"{row}, {column}", f"{m.info['first_call_s'] * 1e3:,.3f}",
                    "-" if recompiles is None else str(recompiles),
                    _instructions_text(m.info.get("instructions_per_call"))]
            if self.independent:
                other = self.independent.get((str(row), str(column)))
                line += ["-", "-"] if other is None else [
                    f"{other * 1e6:.2f}", f"{m.median / other:.3f}"]
            body.append(line)
        return text_table(headers, body, right, github=False)

    def __str__(self) -> str:
        parts = [str(self.compare()).rstrip("\n"), "", self.details()]
        parts += ["\n" + s.table() for s in self.splits.values()]
        return "\n".join(parts)

    def __repr__(self) -> str:
        return f"<CompileOverheads {self.label!r}: {len(self.measurements)} cells>"


def _instructions_text(value: Any) -> str:
    if value is None:
        return "-"
    return f"{value:,.0f}" if isinstance(value, (int, float)) else f"n/a ({value})"


def _add_instructions(counts: dict[str, dict[str, float]] | str,
                      measurements: list[Measurement], splits: dict[str, LayerSplit]) -> None:
    """Puts the child's counts on the cells and splits (or the reason on every cell)."""
    for m in measurements:
        column, row = str(m.task_spec.description), str(m.task_spec.sub_label)
        if isinstance(counts, str):
            m.info["instructions_per_call"] = counts
            continue
        figures = counts.get(column, {})
        value = figures.get("eager" if row == "eager" else "compiled")
        if value is not None:
            m.info["instructions_per_call"] = value
    if isinstance(counts, str):
        return
    for column, split in splits.items():
        figures = counts.get(column, {})
        for part, (plus, minus) in zip(split.rows, split.boundaries):
            if plus in figures and all(k in figures for k in minus):
                part.instructions = figures[plus] - sum(figures[k] for k in minus)


def import_torch(what: str) -> Any:
    """torch with Dynamo loaded, or an ImportError saying ``what`` needs it."""
    try:
        import torch
        import torch._dynamo
    except ImportError as e:
        raise ImportError(f"{what}: install torch (pip install torch)") from e
    return torch


@contextlib.contextmanager
def _no_recompiles(torch: Any, where: str) -> Iterator[None]:
    """Turns a recompilation into opbench's RecompileError, with torch's reason (the
    failed guard) and the cell."""
    exc = getattr(torch._dynamo.exc, "RecompileError", None)
    with torch._dynamo.config.patch(error_on_recompile=True):
        try:
            yield
        except Exception as e:
            if exc is not None and isinstance(e, exc):
                raise RecompileError(
                    f"torch.compile recompiled while timing {where}: {e}\nA benchmark must "
                    "time one compiled graph: keep the inputs' shapes, dtypes, requires_grad "
                    "and the globals the function reads the same for every call (or mark "
                    "dimensions dynamic).") from e
            raise


def overheads(
    fn: Callable[..., Any],
    *args: Any,
    columns: Sequence[str] = COLUMNS,
    backend: str = "inductor",
    mode: str | None = None,
    target: float = 0.02,
    min_run_time: float = 0.2,
    max_run_time: float = 2.0,
    rounds: int = 3,
    split: bool = True,
    split_blocks: int = 60,
    split_block_time: float = 0.002,
    profile: bool = False,
    instructions: bool = False,
    num_threads: int = 1,
    label: str | None = None,
    independent: Callable[[Callable[[], Any]], float] | None = None,
    **kwargs: Any,
) -> CompileOverheads:
    """Eager against ``torch.compile(fn)`` per call, in each setting, with the compiled
    call split by layer. ``args`` and ``kwargs`` are ``fn``'s (the option names below are
    taken; pass such an argument of ``fn`` positionally).

    Args:
        columns: settings, any of ``COLUMNS``: ``"requires_grad=False"``,
            ``"requires_grad=True"`` (floating-point tensor arguments require grad;
            backward is not called), ``"inference_mode"`` (ambient, entered once).
        backend, mode: for ``torch.compile``. The split follows Inductor.
        target, min_run_time, max_run_time: each cell's stopping rule
            (``opbench.core.stopping.converge``: the median's 95% interval within
            +-``target``), per round.
        rounds: rounds per cell, alternating with ``independent``; each keeps its
            least-disturbed round (the least median).
        split: split each compiled cell by layer.
        split_blocks, split_block_time: the split times each layer's callable in
            ``split_blocks`` blocks of about ``split_block_time`` seconds, the callables
            taking turns, spread over the cell's rounds, and keeps each one's least block.
        profile: add a cProfile view of each compiled call under its split.
        instructions: also count instructions per call of each cell and each layer
            under callgrind, in a child process (needs valgrind, and ``fn``
            importable by name; minutes: the child imports torch and compiles).
        num_threads: torch threads while timing (compiled code guards on it).
        label: the table's title (default: ``fn``'s name).
        independent: an independent timer, ``independent(call) -> seconds per call``
            (e.g. ``timeit``), run on each cell alternately with opbench's rounds; its
            least figure is shown next to opbench's.

    Returns:
        ``CompileOverheads``: iterable of the Measurements; ``print`` it for the table,
        first calls, recompiles and the split.

    Raises:
        ValueError: an unknown column, bad times or counts.
        TypeError: ``fn`` is not callable.
        opbench.RecompileError: torch.compile recompiled while a cell was timed.
        ImportError: torch is not installed.
    """
    if not callable(fn):
        raise TypeError(f"overheads needs a callable, got {type(fn).__name__}")
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or not columns:
        raise ValueError(f"columns must be some of {COLUMNS}, got {list(columns)!r}")
    check_count("rounds", rounds)
    check_count("split_blocks", split_blocks)
    check_count("num_threads", num_threads)
    for name, value in (("target", target), ("min_run_time", min_run_time),
                        ("max_run_time", max_run_time), ("split_block_time", split_block_time)):
        check_positive(name, value)
    torch = import_torch("opbench.analysis.compile.overheads measures torch.compile")
    from opbench.core.identity import callable_name

    code = frame_code(fn)
    study = _Study(fn, args, kwargs, code, label or callable_name(fn), backend, mode, target,
                   min_run_time, max_run_time, rounds, split, split_blocks, split_block_time,
                   profile, num_threads, independent)
    measurements: list[Measurement] = []
    splits: dict[str, LayerSplit] = {}
    independent_s: dict[tuple[str, str], float] = {}
    for column in dict.fromkeys(columns):
        eager_s: float | None = None
        for row in ROWS:
            m, cell_split, other = study.cell(torch, row, column)
            if other is not None:
                independent_s[(row, column)] = other
            measurements.append(m)
            if row == "eager":
                eager_s = m.median
            elif cell_split is not None:
                cell_split.cell, cell_split.eager = m.median, eager_s
                splits[column] = cell_split
    if instructions:
        from opbench.analysis.compile_instructions import count

        _add_instructions(count(fn, args, kwargs, list(dict.fromkeys(columns)), backend, mode,
                                num_threads), measurements, splits)
    return CompileOverheads(study.label, measurements, splits, independent_s)


@dataclass
class _Study:
    """``overheads``'s arguments, and how one cell of its table is measured."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    code: Any
    label: str
    backend: str
    mode: str | None
    target: float
    min_run_time: float
    max_run_time: float
    rounds: int
    split: bool
    split_blocks: int
    split_block_time: float
    profile: bool
    num_threads: int
    independent: Callable[[Callable[[], Any]], float] | None

    def cell(self, torch: Any, row: str, column: str
             ) -> tuple[Measurement, LayerSplit | None, float | None]:
        """The Measurement of ``row`` in ``column``, the compiled cell's split (None for
        eager, or without ``split``) and the independent timer's least figure (or None)."""
        compiled = row == "compiled"
        with set_torch_threads(self.num_threads), setting(torch, column):
            cell_args = call_args(torch, self.args, column)
            cell_kwargs = dict(zip(self.kwargs, call_args(torch, list(self.kwargs.values()),
                                                          column)))
            target_fn = self.fn
            if compiled:
                reset_cache(torch, self.code)
                target_fn = torch.compile(self.fn, backend=self.backend, mode=self.mode)
            call = functools.partial(target_fn, *cell_args, **cell_kwargs)
            timer = python_timer(call, label=self.label, sub_label=row, description=column,
                                 num_threads=self.num_threads)
            first = measure_first_call(timer)
            compiled_entries = cache_entries(self.code) if compiled else None
            call()  # a second call: a guard that fails only now recompiles here
            recompiles = (None if compiled_entries is None
                          else (cache_entries(self.code) or 0) - compiled_entries)
            where = f"{self.label!r}, {row}, {column}"
            with _no_recompiles(torch, where) if compiled else contextlib.nullcontext():
                layers = find_layers(target_fn, self.fn, tuple(cell_args), cell_kwargs) \
                    if compiled and self.split else None
                splitter = SplitTimer(layers, self.split_block_time) if layers else None
                runs, others = self._rounds(timer, call, splitter)
                m = min(runs, key=lambda r: r.median)
                if compiled_entries is not None and \
                        cache_entries(self.code) != compiled_entries + (recompiles or 0):
                    raise RecompileError(f"torch.compile compiled again while timing "
                                         f"{where} (the cache entries changed)")
                cell_split = None
                if layers is not None:
                    cell_split = (splitter.result(column) if splitter is not None
                                  else LayerSplit(column, reason=layers.reason))
                    if self.profile:
                        cell_split.profile = timer.profile()
            m.info["first_call_s"] = first
            m.info["rounds"] = len(runs)
            if recompiles is not None:
                m.info["recompiles"] = recompiles
                m.info["backend"] = self.backend
        return m, cell_split, min(others) if others else None

    def _rounds(self, timer: Any, call: Callable[[], Any], splitter: SplitTimer | None
                ) -> tuple[list[Measurement], list[float]]:
        """The cell's rounds: opbench's stopping rule, the independent timer and a share of
        the split's blocks, taking turns."""
        from opbench.core.stopping import converge

        runs, others = [], []
        for r in range(self.rounds):
            runs.append(converge(timer, self.target, min_run_time=self.min_run_time,
                                 max_run_time=self.max_run_time))
            if self.independent is not None:
                others.append(self.independent(call))
            if splitter is not None:  # the split's blocks, a share each round
                splitter.blocks(self.split_blocks // self.rounds
                                + (r < self.split_blocks % self.rounds))
        return runs, others
