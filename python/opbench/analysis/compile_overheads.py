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
  A layer's cost is its callable's time minus the next one's. Printed as
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

    import opbench.compile, torch
    result = opbench.compile.overheads(lambda x: x + 1, torch.randn(10))
    print(result)                       # the table, first calls, the split
    opbench.Compare(list(result)).print()
"""
from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opbench._checks import check_count, check_positive
from opbench._text import text_table
from opbench._threads import set_torch_threads
from opbench.analysis.compile_layers import Layers, find_layers, frame_code
from opbench.analysis.compile_settings import COLUMNS, cache_entries, call_args, reset_cache, setting
from opbench.core.first_call import measure_first_call
from opbench.core.measurement import Measurement
from opbench.errors import RecompileError

__all__ = ["COLUMNS", "CompileOverheads", "LayerSplit", "SplitRow", "overheads"]

ROWS = ("eager", "compiled")

# The cross-checks: the layers' sum against the cell's own figure; the order of the
# layers by instructions against their order by time (Spearman's rho).
SUM_TOLERANCE = 0.10
RANK_AGREEMENT = 0.8


@dataclass
class SplitRow:
    """One layer's part of a compiled call: seconds per call (negative when noise
    exceeds the layer), and instructions per call where counted."""

    layer: str
    part: str
    seconds: float
    instructions: float | None = None


@dataclass
class LayerSplit:
    """The split of one compiled cell, or the ``reason`` it was skipped.

    Attributes:
        column: the cell's setting.
        rows: the layers' parts, outermost first.
        total: the split's own figure for the whole compiled call (the layers sum to it).
        cell: the cell's figure from the table (measured apart).
        eager: the eager cell's figure in the same column (None if not measured).
        probes: seconds per call of each boundary's callable (``compile_layers.BOUNDARIES``).
        notes: what could not be told apart on this torch.
        profile: the cProfile view (``profile=True``).
    """

    column: str
    rows: list[SplitRow] = field(default_factory=list)
    total: float = math.nan
    cell: float = math.nan
    eager: float | None = None
    probes: dict[str, float] = field(default_factory=dict)
    reason: str | None = None
    notes: list[str] = field(default_factory=list)
    kernels: list[str] = field(default_factory=list)
    profile: Any = None
    boundaries: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    @property
    def sum_ratio(self) -> float:
        """The layers' sum over the cell's figure (1.0: they agree)."""
        return sum(r.seconds for r in self.rows) / self.cell

    @property
    def sum_agrees(self) -> bool:
        """Whether the layers sum to the cell's figure within ``SUM_TOLERANCE``."""
        return abs(self.sum_ratio - 1) <= SUM_TOLERANCE

    @property
    def rank_correlation(self) -> float | None:
        """Spearman's rho between the layers' times and instruction counts (None when
        not every layer was counted)."""
        if len(self.rows) < 2 or any(r.instructions is None for r in self.rows):
            return None
        return _spearman([r.seconds for r in self.rows],
                         [float(r.instructions) for r in self.rows])  # type: ignore[arg-type]

    @property
    def ranks_agree(self) -> bool | None:
        """Whether instruction counts order the layers as their times do."""
        rho = self.rank_correlation
        return None if rho is None else rho >= RANK_AGREEMENT

    def table(self) -> str:
        """The split as text: µs per call per layer, share of the call and of the
        overhead over eager, then the cross-checks."""
        title = f"Split of the compiled call, {self.column}"
        if self.reason is not None:
            return f"{title}: skipped: {self.reason}"
        overhead = self.cell - self.eager if self.eager is not None else None
        headers = ["layer", "part", "us/call", "% of call", "% of overhead over eager"]
        counted = any(r.instructions is not None for r in self.rows)
        if counted:
            headers.append("instructions/call")
        body = []
        for r in self.rows:
            kernel = r.layer == "Kernels"
            line = [r.layer, r.part + (f" ({', '.join(self.kernels)})" if kernel else ""),
                    f"{r.seconds * 1e6:.2f}", f"{100 * r.seconds / self.total:.1f}",
                    "-" if kernel or not overhead else f"{100 * r.seconds / overhead:.1f}"]
            if counted:
                line.append("-" if r.instructions is None else f"{r.instructions:,.0f}")
            body.append(line)
        total = sum(r.seconds for r in self.rows)
        heading = f" ({self.cell * 1e6:.2f} us per call)"
        if self.eager is not None and overhead is not None:
            heading = (f" ({self.cell * 1e6:.2f} us per call; eager {self.eager * 1e6:.2f} us, "
                       f"overhead {overhead * 1e6:.2f} us)")
        lines = [title + heading,
                 text_table(headers, body, [False, False] + [True] * (len(headers) - 2),
                            github=False),
                 f"cross-check: layers sum to {total * 1e6:.2f} us = {self.sum_ratio:.3f} x the "
                 f"cell's figure ({'within' if self.sum_agrees else 'NOT within'} "
                 f"{SUM_TOLERANCE:.0%})"]
        negative = [r.part for r in self.rows if r.seconds < 0]
        if negative:
            lines.append("noise exceeds these layers (negative): " + ", ".join(negative))
        if self.rank_correlation is not None:
            lines.append(f"cross-check: instructions rank the layers with Spearman's rho "
                         f"{self.rank_correlation:.2f} against their times "
                         f"({'agrees' if self.ranks_agree else 'does NOT agree'}: "
                         f">= {RANK_AGREEMENT})")
        lines += [f"note: {n}" for n in self.notes]
        if self.profile is not None:
            lines += ["", str(self.profile)]
        return "\n".join(lines)


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


def _spearman(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    def ranks(values: Sequence[float]) -> list[float]:
        order = sorted(range(len(values)), key=lambda i: values[i])
        out = [0.0] * len(values)
        i = 0
        while i < len(order):
            j = i
            while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
                j += 1
            for k in range(i, j + 1):
                out[order[k]] = (i + j) / 2
            i = j + 1
        return out

    rx, ry = ranks(xs), ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    var = math.sqrt(sum((a - mx) ** 2 for a in rx) * sum((b - my) ** 2 for b in ry))
    return cov / var if var else 1.0


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


def _python_timer(call: Callable[[], Any], **labels: Any) -> Any:
    """A Timer that calls ``call`` from a Python loop, as user code (and ``timeit``) calls
    a compiled function, rather than from opbench's native loop for C callables."""
    from opbench.timer import Timer

    return Timer("_call()", globals={"_call": call}, **labels)


class _SplitTimer:
    """Times each probe of ``layers`` in blocks of about ``block_time`` seconds, the probes
    taking turns block by block (load on the machine falls on all of them alike), each
    keeping its least block. ``blocks(n)`` is called once per round of the cell, so the
    blocks spread over the cell's whole measurement: a disturbance while one round ran
    cannot hold every block of a probe."""

    def __init__(self, layers: Layers, block_time: float) -> None:
        self._layers = layers
        self._timers = {key: _python_timer(probe.call) for key, probe in layers.probes.items()}
        self._numbers = {}
        for key, timer in self._timers.items():
            timer.run(3)  # warm-up
            estimate = timer.run(10) / 10
            self._numbers[key] = max(1, round(block_time / max(estimate, 1e-9)))
        self.best = dict.fromkeys(self._timers, math.inf)

    def blocks(self, n: int) -> None:
        for _ in range(n):
            for key, timer in self._timers.items():
                number = self._numbers[key]
                self.best[key] = min(self.best[key], timer.run(number) / number)

    def result(self, column: str) -> LayerSplit:
        best, layers = self.best, self._layers
        split = LayerSplit(column, notes=list(layers.notes), kernels=list(layers.kernels))
        split.probes = dict(best)
        split.total = best["compiled"]
        split.rows = [SplitRow(r.layer, r.part, best[r.plus] - sum(best[k] for k in r.minus))
                      for r in layers.rows]
        split.boundaries = [(r.plus, r.minus) for r in layers.rows]
        return split


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
    torch = import_torch("opbench.compile.overheads measures torch.compile")
    from opbench.core.stopping import converge
    from opbench.timer import callable_name

    code = frame_code(fn)
    label = label or callable_name(fn)
    measurements: list[Measurement] = []
    splits: dict[str, LayerSplit] = {}
    independent_s: dict[tuple[str, str], float] = {}
    for column in dict.fromkeys(columns):
        eager_s: float | None = None
        for row in ROWS:
            with set_torch_threads(num_threads), setting(torch, column):
                cell_args = call_args(torch, args, column)
                cell_kwargs = dict(zip(kwargs, call_args(torch, list(kwargs.values()), column)))
                target_fn = fn
                if row == "compiled":
                    reset_cache(torch, code)
                    target_fn = torch.compile(fn, backend=backend, mode=mode)
                call = functools.partial(target_fn, *cell_args, **cell_kwargs)
                timer = _python_timer(call, label=label, sub_label=row, description=column,
                                      num_threads=num_threads)
                first = measure_first_call(timer)
                compiled_entries = cache_entries(code) if row == "compiled" else None
                call()  # a second call: a guard that fails only now recompiles here
                recompiles = (None if compiled_entries is None
                              else (cache_entries(code) or 0) - compiled_entries)
                where = f"{label!r}, {row}, {column}"
                with _no_recompiles(torch, where) if row == "compiled" else \
                        contextlib.nullcontext():
                    layers = find_layers(target_fn, fn, tuple(cell_args), cell_kwargs) \
                        if row == "compiled" and split else None
                    splitter = _SplitTimer(layers, split_block_time) if layers else None
                    runs, others = [], []
                    for r in range(rounds):
                        runs.append(converge(timer, target, min_run_time=min_run_time,
                                             max_run_time=max_run_time))
                        if independent is not None:
                            others.append(independent(call))
                        if splitter is not None:  # the split's blocks, a share each round
                            splitter.blocks(split_blocks // rounds + (r < split_blocks % rounds))
                    m = min(runs, key=lambda r: r.median)
                    if compiled_entries is not None and \
                            cache_entries(code) != compiled_entries + (recompiles or 0):
                        raise RecompileError(f"torch.compile compiled again while timing "
                                             f"{where} (the cache entries changed)")
                    cell_split = None
                    if layers is not None:
                        cell_split = (splitter.result(column) if splitter is not None
                                      else LayerSplit(column, reason=layers.reason))
                        if profile:
                            cell_split.profile = timer.profile()
                m.info["first_call_s"] = first
                m.info["rounds"] = len(runs)
                if recompiles is not None:
                    m.info["recompiles"] = recompiles
                    m.info["backend"] = backend
                if others:
                    independent_s[(row, column)] = min(others)
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
    return CompileOverheads(label, measurements, splits, independent_s)
