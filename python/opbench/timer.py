"""Timer: measure a Python statement, a callable or a C++ statement.

A drop-in for ``torch.utils.benchmark.Timer``: same constructor, same
``timeit`` / ``blocked_autorange`` / ``adaptive_autorange`` algorithms (block
size search, warm-up, stopping rules), so the same underlying timer gives the
same ``number_per_run``, times and text as torch. Beyond torch: callables as
``stmt`` (timed by the cheapest loop for their kind), working ``repeat`` /
``autorange``, overhead calibration, device-time measurement and
``collect_callgrind`` without torch.

Timer owns the arguments, torch's algorithms and the Measurement; running the
statement belongs to an engine (``opbench.engines``: Python, C++, CUDA).
Other modules (``converge``, ``compare_ab``, first-call timing, profiles,
progress bars, the pytest plugin) use a Timer through its sampling protocol
(``task_spec``, ``engine``, ``block_size``, ``run``, ``measurement``) and
nothing else.
"""
from __future__ import annotations

import enum
import sys
import textwrap
import time
import types
from collections.abc import Callable
from typing import Any, NoReturn

from opbench import _C, environment
from opbench._checks import check_count, check_positive
from opbench._threads import set_torch_threads
from opbench.callgrind.globals import CopyIfCallgrind
from opbench.core import disturbance, first_call, work
from opbench.core.identity import callable_name, callable_source, describe_callable
from opbench.core.measurement import Measurement, TaskSpec
from opbench.engines import Engine, Foreign, as_engine
from opbench.engines.python import PythonEngine, check_syntax, default_timer, is_python_code
from opbench.errors import WarningRecord, recording
from opbench.stats.numerics import f32

__all__ = ["Language", "Timer", "default_timer"]

# Largest block size torch will try: its C++ timers take an int32 count.
_MAX_BLOCK_SIZE = 2147483647


class Language(enum.Enum):
    """The language of a Timer's statement.

    torch's members (``torch.utils.benchmark.utils.timer.Language``) compare equal to
    these, both ways, so arguments built with either enum work with either Timer:

        >>> import enum
        >>> TorchLanguage = enum.Enum("Language", "PYTHON CPP", start=0,
        ...                           module="torch.utils.benchmark.utils.timer")
        >>> TorchLanguage.CPP == Language.CPP, Language.CPP in (TorchLanguage.CPP,)
        (True, True)
    """

    PYTHON = 0
    CPP = 1

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Language):
            return self is other
        kind = type(other)
        if (isinstance(other, enum.Enum) and kind.__name__ == "Language"
                and kind.__module__.startswith("torch.utils.benchmark")):
            return other.name == self.name
        return NotImplemented

    # Members of both enums hash by name: one dict key.
    __hash__ = enum.Enum.__hash__


def _normalize(src: str) -> str:
    """Dedents and drops the leading newline of block strings, as torch does, so
    code written inside a function neither fails to parse nor prints oddly."""
    src = textwrap.dedent(src)
    return (src[1:] if src and src[0] == "\n" else src).rstrip()


def _names_used(code: Any) -> set[str]:
    """Every global-ish name a code object (and the code nested in it) refers to."""
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names"):
            names |= _names_used(const)
    return names


def _provide_torch(globals_: dict[str, Any], codes: list[Any]) -> None:
    """Makes ``torch`` available to code that uses it without importing it, as torch's
    Timer does, but imports torch only when the code actually names it."""
    if "torch" in globals_:
        return
    if not any("torch" in _names_used(code) for code in codes):
        return
    try:
        import torch
    except ImportError as e:
        raise ImportError(
            "the statement uses `torch`, which is not installed: pip install torch"
        ) from e
    globals_["torch"] = torch


class Timer:
    """Measures the execution time of a statement, torch.utils.benchmark-compatible.

    Args:
        stmt: code to time: a string of Python (or C++ with ``language="c++"``),
            or a zero-argument callable (C callables run in a native loop,
            Python functions in an unrolled one: see opbench.engines.python).
        setup: code run before timing, defining what ``stmt`` uses (a string,
            or a zero-argument callable). Runs before every block, as in torch.
        global_setup: C++ only: top-level code such as ``#include`` lines.
        timer: the clock, seconds as float. The default synchronizes the
            accelerator (when torch uses one) before reading a monotonic clock.
        globals: names visible to ``stmt`` and ``setup``. ``torch`` is added
            automatically when the code uses it.
        label, sub_label, description, env: names that title and group results
            in ``Measurement`` text and ``Compare`` tables.
        num_threads: torch thread-pool size while timing (default 1).
        language: ``Language.PYTHON`` / ``"py"`` / ``"python"`` or
            ``Language.CPP`` / ``"cpp"`` / ``"c++"``.
        device_timing: None (torch's host clock after a synchronize), or a CUDA
            device-time mode: ``"events"``, ``"per_iteration"`` or ``"graph"``.
        l2_cache: with device timing, ``"warm"`` or ``"cold"`` (flush the L2
            before each timed call).
        device: with device timing, the CUDA device to time (an index,
            ``"cuda:N"`` or a torch.device); default the device of the CUDA
            tensors in ``globals``, else torch's current device
            (``Measurement.info["device_source"]`` says which).
        record_first_call: time the very first (cold) call alone, before any
            warm-up, into ``Measurement.info["first_call_s"]``: the cost of
            lazy initialisation or compilation (``torch.compile``).
        setup_per_block: C++ only. By default a C++ setup runs once per
            measurement (torch re-runs it before every block, so state the
            statement changes is reset each block); True restores torch's way.
        name: the benchmark's name in results files and regression gates
            (``TaskSpec.key``). Default: for a callable timed without labels,
            its module-qualified name; otherwise the labels, else the statement.
        layouts: C++ only. N > 1 builds N copies of the statement with its code
            at N offsets from the 64-byte grid and times them in turn: the
            Measurement's ``info`` gets each layout's median and their spread
            (``layout_spread``), the part of a figure code placement can swing.
        flops, bytes: the work of one run of ``stmt``, for throughput and the
            roofline (``Measurement.flop_rate``, ``byte_rate``, ``bound``...): a
            number; a callable of the statement's inputs (its parameters name
            globals or names setup defines, resolved when measuring starts);
            or ``"count"``: counted from the ATen ops a torch statement runs
            (``opbench.work``; None when it cannot be). With work known, the
            Measurement carries this machine's measured peaks (``opbench.peaks``,
            measured once per machine and thread count, a few seconds).

    Raises:
        TypeError: ``stmt`` or ``setup`` is neither a string nor a callable.
        SyntaxError: ``stmt`` or ``setup`` does not parse (raised here, not
            when timing).
        ValueError: bad ``language`` or ``num_threads``, or ``global_setup``
            for Python.

    Example:
        >>> import opbench
        >>> m = opbench.Timer("sorted(xs)", setup="xs = list(range(100))").timeit(1000)
        >>> m.number_per_run
        1000
    """

    # The class that runs the statement (timeit.Timer's protocol). torch's own
    # tests swap it for a deterministic mock; so can yours.
    _timer_cls: type = PythonEngine

    def __init__(
        self,
        stmt: str | Callable[[], Any] = "pass",
        setup: str | Callable[[], Any] = "pass",
        global_setup: str = "",
        timer: Callable[[], float] = default_timer,
        globals: dict[str, Any] | None = None,
        label: str | None = None,
        sub_label: str | None = None,
        description: str | None = None,
        env: str | None = None,
        num_threads: int = 1,
        language: Language | str = Language.PYTHON,
        *,
        device_timing: str | None = None,
        l2_cache: str = "warm",
        device: Any = None,
        setup_per_block: bool = False,
        record_first_call: bool = False,
        name: str | None = None,
        layouts: int = 1,
        flops: float | Callable[..., Any] | str | None = None,
        bytes: float | Callable[..., Any] | str | None = None,
    ) -> None:
        # As given, for `kwargs` (and pickling): Timer(**t.kwargs) is the same Timer.
        self._kwargs: dict[str, Any] = {
            "stmt": stmt, "setup": setup, "global_setup": global_setup, "timer": timer,
            "globals": None if globals is None else dict(globals), "label": label,
            "sub_label": sub_label, "description": description, "env": env,
            "num_threads": num_threads, "language": language,
            "device_timing": device_timing, "l2_cache": l2_cache, "device": device,
            "setup_per_block": setup_per_block, "record_first_call": record_first_call,
            "name": name,
            "layouts": layouts, "flops": flops, "bytes": bytes,
        }
        work.check_declared("flops", flops)
        work.check_declared("bytes", bytes)
        for what, value in (("stmt", stmt), ("setup", setup)):
            if not isinstance(value, str) and not callable(value):
                raise TypeError(
                    f"{what} must be a string of code or a zero-argument callable, "
                    f"got {type(value).__name__}"
                )
        check_count("num_threads", num_threads)
        if isinstance(timer, _CallableModule):  # `timer=opbench.timer`, as torch code writes it
            timer = default_timer

        # A copy, so `exec` adding __builtins__ (or us adding torch) never
        # leaks into the caller's dict.
        globals_ = dict(globals or {})
        stmt_text = describe_callable(stmt) if callable(stmt) else _normalize(stmt)
        setup_text = describe_callable(setup) if callable(setup) else _normalize(setup)

        engine_cls = self._timer_cls
        engine_kwargs: dict[str, Any] = {}
        if language in (Language.PYTHON, "py", "python"):
            self._language = Language.PYTHON
            if global_setup:
                raise ValueError(
                    f"global_setup is C++ only, got `{global_setup}`. Most likely this code "
                    "can simply be moved to `setup`."
                )
            if layouts != 1:
                raise ValueError("layouts is C++ only (a study of compiled code's placement)")
            # Compiled here too, not only by the engine: a swapped-in _timer_cls
            # (a mock) must not let a syntax error through.
            codes = [
                check_syntax(text, what)
                for code, text, what in ((stmt, stmt_text, "stmt"), (setup, setup_text, "setup"))
                if not callable(code)
            ]
            _provide_torch(globals_, codes)
        elif language in (Language.CPP, "cpp", "c++"):
            if callable(stmt) or callable(setup):
                raise TypeError("C++ timers take stmt and setup as strings of C++ code")
            if self._timer_cls is not PythonEngine:
                raise AssertionError("_timer_cls has already been swapped.")
            from opbench.engines.cpp.engine import CppEngine

            engine_cls = CppEngine
            self._language = Language.CPP
            setup_text = "" if setup_text == "pass" else setup_text
            engine_kwargs = {"global_setup": global_setup, "setup_per_block": setup_per_block,
                             "layouts": layouts}
        else:
            raise ValueError(f"Invalid language `{language}`.")

        self._globals = CopyIfCallgrind.unwrap_all(globals_)
        self._engine: Engine = as_engine(engine_cls(
            stmt=stmt if callable(stmt) else stmt_text,
            setup=setup if callable(setup) else setup_text,
            timer=timer,
            globals=self._globals,
            **engine_kwargs,
        ))
        if device_timing is not None:
            from opbench.engines.cuda.engine import DeviceEngine

            self._engine = DeviceEngine(self._engine, device_timing, l2_cache, device, globals_)
        self._info: dict[str, Any] = {}
        if callable(stmt):
            source = callable_source(stmt)
            if source is not None:
                self._info["source"] = source
            if name is None and not (label or sub_label or description):
                name = callable_name(stmt)
        if name is not None and (not isinstance(name, str) or not name.strip()):
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        self._record_first_call = record_first_call
        self._overhead: float | None = None
        # Warnings about the measurement in progress (opbench.errors.recording).
        self._warnings: list[WarningRecord] = []
        # The scheduler's signals around each block (opbench.core.disturbance), for a
        # real wall clock only: a mock's times have nothing to do with this machine.
        self._probes = (timer is default_timer or timer in _WALL_CLOCKS) and not isinstance(
            self._engine, Foreign) and self._engine.clock is None
        self._probe: disturbance.Probe | None = None
        self._task_spec = TaskSpec(
            stmt=stmt_text,
            setup=setup_text,
            global_setup=global_setup,
            label=label,
            sub_label=sub_label,
            description=description,
            env=env,
            num_threads=num_threads,
            name=name,
            flops=flops if isinstance(flops, (int, float)) else None,
            bytes=bytes if isinstance(bytes, (int, float)) else None,
        )
        # What is resolved when measuring starts: callables, counting, peaks.
        self._work_pending = any(v is not None for v in (flops, bytes))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt from its arguments: what a worker process needs (and all it may
        # trust: engines hold compiled code, loaded libraries, device handles).
        return (_rebuild, (type(self), self._kwargs))

    # -- the sampling protocol --------------------------------------------------
    # What every part of opbench that runs a Timer uses (converge, compare_ab,
    # first-call timing, profiles, progress bars, the pytest plugin), and what
    # a custom stopping rule needs: start with block_size, time blocks with
    # run, build the result with measurement.

    @property
    def task_spec(self) -> TaskSpec:
        """What is timed and how results are labelled."""
        return self._task_spec

    @property
    def language(self) -> Language:
        return self._language

    @property
    def engine(self) -> Engine:
        """The engine that runs the statement (``opbench.engines``)."""
        return self._engine

    @property
    def kwargs(self) -> dict[str, Any]:
        """The arguments this Timer was built with: ``Timer(**t.kwargs)`` is the same Timer."""
        return dict(self._kwargs)

    def block_size(self, min_run_time: float) -> int:
        """Starts a measurement and returns torch's block size for ``min_run_time``.

        Starting a measurement checks the machine, times the first call when
        asked to (``record_first_call``), and resets the engine; the block-size
        search (grow tenfold until the clock's overhead is under 0.01% of a
        block and a block takes ``min_run_time / 1000``) doubles as warm-up: its
        calls are discarded, never samples.
        """
        check_positive("min_run_time", min_run_time)
        number = self._estimate_block_size(min_run_time)
        # The search's blocks (and the cold first call) are warm-up: an engine that
        # keeps each call must not put them among the measurement's samples.
        self._discard_warm_up()
        return number

    def block_size_for(self, seconds: float) -> int:
        """Starts a measurement and returns the block size whose blocks take about
        ``seconds``: sized from the fastest of three single calls, then one untimed
        block of that size as the warm-up.

        ``block_size``'s tenfold search costs about a thousand blocks of its own minimum
        (12 ms for a 50 us statement); where blocks must last a fixed time whatever the
        clock's overhead (processes taking turns to time, ``opbench.gate.turns``), that
        search is pure warm-up, and one block warms as well.

        Example:
            >>> import opbench
            >>> t = opbench.Timer("sum(range(100))")
            >>> number = t.block_size_for(0.002)
            >>> 0.0002 < t.run(number) < 0.2
            True
        """
        check_positive("seconds", seconds)
        self._begin_measurement()
        with set_torch_threads(self._task_spec.num_threads):
            self._engine.warm_up()
            unit = self._engine.block_unit()
            per_call = min(self._timeit(unit) for _ in range(3)) / unit
            number = min(max(1, round(seconds / per_call / unit)) * unit, _MAX_BLOCK_SIZE)
            self._timeit(number)
        self._discard_warm_up()  # the calls so far were warm-up, not samples
        return number

    def run(self, number: int) -> float:
        """Seconds for one block of ``number`` runs, in the Timer's thread setting.

        Raises ValueError if ``number`` is not a positive int; whatever the
        statement raises propagates with its own traceback.
        """
        check_count("number", number)
        with set_torch_threads(self._task_spec.num_threads):
            return self._timeit(number)

    def measurement(self, number: int, times: list[float]) -> Measurement:
        """The Measurement of blocks of ``number`` runs that took ``times`` seconds,
        with the engine's facts and this measurement's warnings in ``info``.

        This ends the measurement: what the engine held for it is released (a C++
        setup's frame is unwound, so guards it declared end here, on this thread);
        a later ``run`` starts a new one, setup included.
        """
        try:
            return self._result(number, times, final=True)
        finally:
            self._engine.finish()

    def _result(self, number: int, times: list[float], final: bool = False) -> Measurement:
        """The Measurement so far, the measurement going on (a stopping rule's look), or
        (``final``) the one it ends with, judged for disturbance."""
        number_per_run, raw_times = self._engine.samples(number, list(times))
        info = dict(self._info)
        info.update(self._engine.info())
        if number_per_run != number:  # the engine kept each call, not the blocks
            info["block_size"] = number
        signals = self._probe.record(raw_times) if final and self._probe is not None else None
        if signals is not None:
            info[disturbance.INFO_KEY] = signals
            if disturbance.judge(raw_times, signals).disturbed:
                with recording(self._warnings):
                    disturbance.warn_disturbed(
                        next(iter(self._task_spec.title.splitlines()), "(empty statement)"))
        if self._warnings:
            info["warnings"] = list(self._warnings)
        return Measurement(
            number_per_run=number_per_run,
            raw_times=raw_times,
            task_spec=self._task_spec,
            overhead=self._overhead,
            clock=self._engine.clock,
            info=info,
        )

    # -- the measurement primitives ------------------------------------------

    def _begin_measurement(self) -> None:
        """Starts a measurement: machine checks, the first-call time if asked for
        (before anything warms up), fresh engine state."""
        self._warnings = []
        with recording(self._warnings):
            environment.check_machine()
            if self._record_first_call and first_call.INFO_KEY not in self._info:
                self._info[first_call.INFO_KEY] = first_call.measure_first_call(self)
            if self._work_pending:
                self._work_pending = False
                self._task_spec = work.for_timer(self, self._globals, self._info)
            self._engine.reset()
            self._probe = None
            if self._probes and disturbance.enabled():
                disturbance.check_threads(self._task_spec.num_threads)
                self._probe = disturbance.Probe(self._task_spec.num_threads)

    def _discard_warm_up(self) -> None:
        """Forgets the calls timed so far: they warmed up, they are not samples."""
        self._engine.discard_samples()
        if self._probe is not None:
            self._probe.discard()

    def _timeit(self, number: int) -> float:
        with recording(self._warnings):
            probe = self._probe
            if probe is not None:
                probe.begin()  # outside the engine's clock reads, as is end()
            # Even a C++ clock read takes tens of ns, so no real block takes under
            # 1 ns; the floor also keeps later divisions finite.
            seconds = max(self._engine.timeit(number), 1e-9)
            if probe is not None:
                probe.end(seconds)
            return seconds

    def _warm_up(self, number: int) -> None:
        """One untimed block of ``number // 100`` runs (at least 2), as timeit does."""
        self._timeit(number=max(int(number // 100), 2))
        self._discard_warm_up()

    def timeit(self, number: int = 1000000) -> Measurement:
        """Runs the statement ``number`` times (after a short warm-up) as one measurement.

        Mirrors ``timeit.Timer.timeit`` but returns a Measurement of time per
        run. Raises ValueError if ``number`` is not a positive int.
        """
        check_count("number", number)
        self._begin_measurement()
        with set_torch_threads(self._task_spec.num_threads):
            self._warm_up(number)
            return self.measurement(number, [self._timeit(number=number)])

    def repeat(self, repeat: int = 5, number: int = 1000000) -> Measurement:
        """``repeat`` measurements of ``number`` runs each, after one warm-up block.

        torch leaves this unimplemented; unlike ``timeit.Timer.repeat`` it
        returns one Measurement holding the ``repeat`` times (per run via
        ``.times``), so statistics and Compare work on it.
        """
        check_count("number", number)
        check_count("repeat", repeat)
        self._begin_measurement()
        with set_torch_threads(self._task_spec.num_threads):
            self._warm_up(number)
            return self.measurement(number, [self._timeit(number) for _ in range(repeat)])

    def autorange(
        self, callback: Callable[[int, float], Any] | None = None
    ) -> Measurement:
        """``timeit.Timer.autorange``'s search: 1, 2, 5, 10, 20, 50, ... runs until one
        block takes at least 0.2 s; that block is the Measurement.

        ``callback(number, time_taken)`` is called after each block.
        """
        self._begin_measurement()
        with set_torch_threads(self._task_spec.num_threads):
            i = 1
            while True:
                for j in (1, 2, 5):
                    number = i * j
                    time_taken = self._timeit(number)
                    if callback:
                        callback(number, time_taken)
                    if time_taken >= 0.2:
                        return self.measurement(number, [time_taken])
                i *= 10

    def calibrate_overhead(self, number: int = 100000) -> float:
        """Measures the harness's own cost per run, in seconds, and returns it.

        The same harness timing an empty statement of the same kind: for a
        string, the template running ``pass`` (one loop iteration); for a
        Python function, the unrolled loop calling a no-op Python function
        (loop, call and frame); for a C callable, the native loop calling a
        C no-op (loop and call dispatch). Measurements taken afterwards carry
        the estimate in ``Measurement.overhead``; raw times stay as measured.
        """
        check_count("number", number)
        if self._language is not Language.PYTHON:
            raise ValueError("overhead calibration is for Python statements and callables")
        empty: str | Callable[[], Any] = "pass"
        stmt = self._kwargs["stmt"]
        if callable(stmt):
            empty = _noop if is_python_code(stmt) else _C.noop
        probe = PythonEngine(empty, "pass", default_timer, {})
        probe.timeit(max(number // 100, 2))  # warm-up
        self._overhead = min(probe.timeit(number) for _ in range(5)) / number
        return self._overhead

    # -- torch's algorithms (kept step for step: parity depends on it) --------

    def _threaded_measurement_loop(
        self,
        number: int,
        time_hook: Callable[[], float],
        stop_hook: Callable[[list[float]], bool],
        min_run_time: float,
        max_run_time: float | None = None,
        callback: Callable[[int, float], NoReturn] | None = None,
    ) -> list[float]:
        total_time = 0.0
        can_stop = False
        times: list[float] = []
        self._discard_warm_up()  # block-size search calls are not samples
        with set_torch_threads(self._task_spec.num_threads):
            while (total_time < min_run_time) or (not can_stop):
                time_spent = time_hook()
                times.append(time_spent)
                total_time += time_spent
                if callback:
                    callback(number, time_spent)
                can_stop = stop_hook(times)
                if max_run_time and total_time > max_run_time:
                    break
        return times

    def _estimate_block_size(self, min_run_time: float) -> int:
        """Grows the block size tenfold until timer overhead is under 0.01% of a block
        (and the block takes at least min_run_time / 1000). Doubles as a warm-up."""
        self._begin_measurement()
        with set_torch_threads(self._task_spec.num_threads):
            self._engine.warm_up()  # a device's cold first call must not size the blocks
            overhead = _median_f32([self._timeit(0) for _ in range(5)])
            number = self._engine.block_unit()
            while True:
                time_taken = self._timeit(number)
                relative_overhead = overhead / time_taken
                if relative_overhead <= 1e-4 and time_taken >= min_run_time / 1000:
                    break
                if time_taken > min_run_time:
                    break
                if number * 10 > _MAX_BLOCK_SIZE:
                    break
                number *= 10
        return number

    def blocked_autorange(
        self,
        callback: Callable[[int, float], NoReturn] | None = None,
        min_run_time: float = 0.2,
    ) -> Measurement:
        """Many blocks of one size, until their total time reaches ``min_run_time`` seconds.

        The block size is grown until the clock's overhead is negligible
        against a block (see ``block_size``). Raises ValueError for
        ``min_run_time <= 0``.
        """
        number = self.block_size(min_run_time)
        times = self._threaded_measurement_loop(
            number,
            lambda: self._timeit(number),
            lambda times: True,
            min_run_time=min_run_time,
            callback=callback,
        )
        return self.measurement(number, times)

    def adaptive_autorange(
        self,
        threshold: float = 0.1,
        *,
        min_run_time: float = 0.01,
        max_run_time: float = 10.0,
        callback: Callable[[int, float], NoReturn] | None = None,
    ) -> Measurement:
        """Blocks until IQR / median < ``threshold`` (with more than 3 blocks and at least
        ``min_run_time`` seconds), or ``max_run_time`` seconds are spent.

        Raises ValueError for ``threshold`` outside (0, 1) or non-positive times.
        """
        if not 0 < threshold < 1:
            raise ValueError(f"threshold must be in (0, 1), got {threshold!r}")
        check_positive("min_run_time", min_run_time)
        check_positive("max_run_time", max_run_time)
        number = self._estimate_block_size(min_run_time=0.05)

        def stop_hook(times: list[float]) -> bool:
            if len(times) > 3:
                return self._result(number, times).meets_confidence(threshold=threshold)
            return False

        times = self._threaded_measurement_loop(
            number,
            lambda: self._timeit(number),
            stop_hook,
            min_run_time,
            max_run_time,
            callback=callback,
        )
        return self.measurement(number, times)

    # -- beyond torch -----------------------------------------------------------

    def profile(self, number: int = 1000, top: int = 20) -> Any:
        """Runs the statement ``number`` times under cProfile; returns the top
        functions by cumulative and own time, the harness's frames removed
        (``opbench.core.profile.ProfileReport``; ``.dump(path)`` for snakeviz)."""
        from opbench.core.profile import profile

        return profile(self, number, top)

    def converge(self, target: float = 0.01, **kwargs: Any) -> Measurement:
        """Measures until the median's 95% confidence interval is within +-``target``
        (relative), with minimum samples and time, a time limit and a plateau
        exit; ``Measurement.converged`` says whether the target was reached.
        Keywords: see ``opbench.core.stopping.converge``."""
        from opbench.core.stopping import converge

        return converge(self, target, **kwargs)

    def collect_callgrind(
        self,
        number: int = 100,
        *,
        repeats: int | None = None,
        collect_baseline: bool = True,
        retain_out_file: bool = False,
    ) -> Any:
        """Instruction counts of ``number`` runs under callgrind (valgrind), in a child process.

        Returns a CallgrindStats, or a tuple of ``repeats`` of them. Globals
        must be wrapped in ``CopyIfCallgrind`` to cross into the child.
        """
        check_count("number", number)
        if repeats is not None and repeats < 1:
            raise ValueError("If specified, `repeats` must be >= 1")
        # Fail fast, in this process, on a statement that cannot run at all.
        self._timeit(1)
        from opbench.callgrind.collect import collect_callgrind

        return collect_callgrind(
            self,
            number=number,
            repeats=repeats,
            collect_baseline=collect_baseline,
            retain_out_file=retain_out_file,
        )

    def memory(self, number: int = 100, *, repeats: int = 3, cuda: bool | None = None) -> Any:
        """Memory per call of the statement: allocations, bytes, peak and leak, split into
        Python objects, the native heap and CUDA (``opbench.core.memory.MemoryCounts``).

        Counted in a process started with opbench's allocation counter (this one when it
        was, else a child: the Timer must pickle), separately from any timing: setup,
        warm-up and opbench's own loop are outside the figures, which are exact.
        ``number`` calls are counted per repeat; ``cuda``: True requires CUDA figures,
        None (default) counts them when the statement uses CUDA. See ``opbench.memory``.

        Raises:
            MemoryUnavailableError: no allocation counter here, or ``cuda=True`` without CUDA.
            MemoryCountError: the statement started a process while counted.
        """
        from opbench.memory.collect import measure

        return measure(self, number=number, repeats=repeats, cuda=cuda)


# Clocks that read wall time, as the default does: only their blocks can wait for a CPU.
_WALL_CLOCKS = (time.perf_counter, time.monotonic)


def _rebuild(cls: type[Timer], kwargs: dict[str, Any]) -> Timer:
    return cls(**kwargs)


def _noop() -> None:
    """The empty Python function: the reference for a Python callable's harness cost."""


def _median_f32(values: list[float]) -> float:
    """``torch.tensor(values).median().item()``: float32 values, the lower middle one."""
    ordered = sorted(f32(v) for v in values)
    return ordered[(len(ordered) - 1) // 2]


class _CallableModule(types.ModuleType):
    """``opbench.timer`` is this module, and calling it reads the default clock.

    torch exports its clock function as ``torch.utils.benchmark.timer``; code
    written for torch calls ``benchmark.timer()`` or passes ``timer=benchmark.timer``.
    opbench names the function ``default_timer`` (as ``timeit`` does), so that
    ``import opbench.timer`` gives this module, and keeps that code working by
    making the module callable.
    """

    def __call__(self) -> float:
        return default_timer()


sys.modules[__name__].__class__ = _CallableModule
