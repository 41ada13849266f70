"""Measurement: the result of timing one task (``TaskSpec``, what was timed, is
``opbench.core.task_spec``'s).

Both mirror ``torch.utils.benchmark``'s classes of the same names: same fields,
same statistics, the same ``__repr__`` text (apart from the class path), so
code written for torch reads opbench results unchanged. Where torch 2.13 is
broken, opbench is right (see the comments marked "torch 2.13").
"""
from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Iterable
from typing import Any

from opbench import stats
from opbench._text import WARNING_STYLE, html_pre
from opbench.core import disturbance as _disturbance
from opbench.core import throughput
from opbench.core.task_spec import TaskSpec
from opbench.core.throughput import Throughput
from opbench.stats import numerics as _numerics

__all__ = [
    "Measurement",
    "TaskSpec",
    "ordered_unique",
    "select_unit",
    "trim_sigfig",
    "unit_to_english",
]

_MAX_SIGNIFICANT_FIGURES = 4
_MIN_CONFIDENCE_INTERVAL = 25e-9  # 25 ns: no timer resolves better than this

# A Measurement carries a warning when its spread is suspect. All runs vary
# somewhat; these are the IQR/median levels torch warns at.
_IQR_WARN_THRESHOLD = 0.1
_IQR_GROSS_WARN_THRESHOLD = 0.25


_MISSING = object()
_TASKSPEC_FIELDS = frozenset(f.name for f in dataclasses.fields(TaskSpec))


@dataclasses.dataclass(init=True, repr=False)
class Measurement(Throughput):
    """The times of one task: ``raw_times[i]`` seconds for ``number_per_run`` runs each.

    Statistics (``median``, ``mean``, ``iqr``, ...) are per run: raw times
    divided by ``number_per_run``. Picklable; ``merge`` pools replicates.

    Beyond torch's fields:
        overhead: estimated harness cost per run in seconds (loop and call
            dispatch), set when the Timer was asked to calibrate it
            (``Timer.calibrate_overhead``); ``raw_times`` are never adjusted.
            ``without_overhead()`` returns a copy with it subtracted.
        clock: which clock produced the times when it is not torch's default
            (host clock after a device synchronize), e.g. ``"cuda-events"``.
        info: opbench's own facts about the run (device clocks, first-call
            time, ...); ``metadata`` stays reserved for the user, as in torch.

    Throughput (``opbench.core.throughput``): ``flops``, ``bytes`` (one run's work,
    declared or counted; None when unknown), ``flop_rate``, ``byte_rate``,
    ``arithmetic_intensity``, ``bound`` and ``efficiency``.

    Example:
        >>> m = Measurement(10, [1e-5, 2e-5, 3e-5], TaskSpec("f()", "pass"))
        >>> round(m.median * 1e9)
        2000
    """

    number_per_run: int
    raw_times: list[float]
    task_spec: TaskSpec
    metadata: dict[Any, Any] | None = None  # Reserved for user payloads.
    overhead: float | None = None
    clock: str | None = None
    info: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        # torch accepts these and prints a median of -1 s; nothing downstream can use them.
        if not self.raw_times:
            raise ValueError(f"a Measurement needs at least one time; got none for "
                             f"{self.task_spec.title!r}")
        if isinstance(self.number_per_run, bool) or not isinstance(self.number_per_run, int) \
                or self.number_per_run < 1:
            raise ValueError(f"number_per_run must be a positive int, got {self.number_per_run!r}")
        self._sorted_times: tuple[float, ...] = ()
        self._warnings: tuple[str, ...] = ()
        self._median = -1.0
        self._mean = -1.0
        self._p25 = -1.0
        self._p75 = -1.0

    def __getattr__(self, name: str) -> Any:
        # Forward TaskSpec fields (stmt, label, num_threads, ...) for convenience.
        # Only reached for names not found normally; guard against recursion
        # while unpickling, before task_spec exists.
        if name in _TASKSPEC_FIELDS and "task_spec" in self.__dict__:
            return getattr(self.task_spec, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A Measurement that torch pickled (loaded through torch's paths: opbench.utils,
        # or the sys.modules swap) has torch's fields only: opbench's take their defaults.
        for field in dataclasses.fields(self):
            if field.name not in state:
                if field.default_factory is not dataclasses.MISSING:
                    state[field.name] = field.default_factory()
                elif field.default is not dataclasses.MISSING:
                    state[field.name] = field.default
        self.__dict__.update(state)

    # Statistics use raw time / number_per_run: an extrapolation that hides
    # how overhead amortises over different block sizes, harmless when the
    # Timer chose a block size that makes overhead negligible.
    @property
    def times(self) -> list[float]:
        """Seconds per run, one entry per raw time."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def median(self) -> float:
        self._lazy_init()
        return self._median

    @property
    def mean(self) -> float:
        self._lazy_init()
        return self._mean

    @property
    def iqr(self) -> float:
        self._lazy_init()
        return self._p75 - self._p25

    @property
    def significant_figures(self) -> int:
        """Approximate significant figures of the median (1 to 4), used by Compare.

        Uses the interquartile points only and a fixed z of 1.645: a rough
        guide for display, not a statistical claim.
        """
        self._lazy_init()
        n_total = len(self._sorted_times)
        lower = n_total // 4
        upper = math.ceil(_numerics.f32(3 * n_total / 4))
        points = self._sorted_times[lower:upper]
        std = _numerics.std_f32(points)
        sqrt_n = _numerics.f32(math.sqrt(len(points)))
        confidence_interval = max(1.645 * std / sqrt_n, _MIN_CONFIDENCE_INTERVAL)
        relative_ci = _numerics.log10_f32(self._median / confidence_interval)
        if not math.isfinite(relative_ci):  # a zero or negative median
            return 1
        return min(max(math.floor(relative_ci), 1), _MAX_SIGNIFICANT_FIGURES)

    @property
    def has_warnings(self) -> bool:
        """torch's IQR warning, or (opbench) a figure the busy machine pushed up."""
        self._lazy_init()
        return bool(self._warnings) or self.disturbed

    @property
    def high_variance(self) -> bool:
        """torch's warning alone: IQR / median of 10% or more (Compare's ``(! XX%)``)."""
        self._lazy_init()
        return bool(self._warnings)

    @property
    def disturbance(self) -> _disturbance.Disturbance | None:
        """What the machine's other work did to this measurement
        (``opbench.core.disturbance``), from the signals in ``info["disturbance"]``;
        None where none were taken (a mock timer, a device clock, no schedstat)."""
        record = (self.info or {}).get(_disturbance.INFO_KEY)
        if not isinstance(record, dict):
            return None
        try:
            return _disturbance.judge(self.raw_times, record)
        except (ValueError, TypeError):  # signals that do not fit the times: not judged
            return None

    @property
    def disturbed(self) -> bool:
        """Whether other work on the machine pushed this figure up (see ``disturbance``)."""
        d = self.disturbance
        return d is not None and d.disturbed

    def _lazy_init(self) -> None:
        if self.raw_times and not self._sorted_times:
            self._sorted_times = tuple(sorted(self.times))
            values = self._sorted_times
            self._median = _numerics.quantile(values, 0.5)
            # torch sums in a vectorised cascade; fsum is exactly rounded, so
            # the mean can differ from torch's in the last bit (it is not printed).
            self._mean = math.fsum(values) / len(values)
            self._p25 = _numerics.quantile(values, 0.25)
            self._p75 = _numerics.quantile(values, 0.75)

            if not self.meets_confidence(_IQR_GROSS_WARN_THRESHOLD):
                self._add_warning("This suggests significant environmental influence.")
            elif not self.meets_confidence(_IQR_WARN_THRESHOLD):
                self._add_warning("This could indicate system fluctuation.")

    def _add_warning(self, msg: str) -> None:
        rel_iqr = self._relative_iqr() * 100
        self._warnings += (
            f"  WARNING: Interquartile range is {rel_iqr:.1f}% "
            f"of the median measurement.\n           {msg}",
        )

    def meets_confidence(self, threshold: float = _IQR_WARN_THRESHOLD) -> bool:
        """True when IQR / median is under ``threshold``."""
        return self._relative_iqr() < threshold

    def _relative_iqr(self) -> float:
        # A zero median (hand-made Measurements) has no relative spread to speak
        # of; torch divides by zero here.
        return self.iqr / self.median if self.median else math.inf

    @property
    def title(self) -> str:
        return self.task_spec.title

    @property
    def env(self) -> str:
        # torch 2.13 misspells `taskspec` here, so its property raises and
        # __getattr__ returns the raw env (None) instead of this default.
        return "Unspecified env" if self.task_spec.env is None else self.task_spec.env

    @property
    def as_row_name(self) -> str:
        return self.sub_label or self.stmt or "[Unknown]"

    # -- opbench's statistics (opbench.stats); torch's text above stays unchanged --

    @property
    def std(self) -> float:
        """Sample standard deviation of the per-run times, seconds."""
        return stats.std(self.times)

    def median_ci(self, confidence: float = 0.95) -> tuple[float, float] | None:
        """Distribution-free (order-statistic) confidence interval of the median,
        seconds; None when there are too few times for ``confidence``."""
        return stats.median_ci(self.times, confidence)

    @property
    def relative_ci(self) -> float:
        """Half-width of the 95% median interval over the median (inf: too few times)."""
        return stats.relative_ci(self.times)

    @property
    def outliers(self) -> stats.Outliers:
        """Counts of times outside Tukey's fences (1.5 and 3 IQR beyond the quartiles)."""
        return stats.outliers(self.times)

    def summary(self, confidence: float = 0.95) -> stats.Summary:
        """All statistics as one JSON-ready record (``opbench.stats.Summary``)."""
        return stats.summary(self.times, confidence)

    def describe(self, confidence: float = 0.95) -> str:
        """torch's text followed by the spread, the median's interval, outliers, the
        throughput when the work is known and, for a noise-targeted run, whether it
        converged.

        Example:
            >>> m = Measurement(1, [1e-6 * (1 + i / 100) for i in range(20)], TaskSpec("f()", "pass"))
            >>> print(m.describe().split("\\n", 1)[1])  # doctest: +NORMALIZE_WHITESPACE
            f()
              Median: 1.10 us
              IQR:    0.10 us (1.05 to 1.14)
              20 measurements, 1 runs per measurement, 1 thread
              Mean:   1.09 us, std 0.06 us (5.4% of mean)
              Median 95% CI: 1.05 to 1.14 us (+-4.1%, order statistic)
              Outliers (Tukey fences): none of 20
        """
        s = self.summary(confidence)
        if s.n == 0:
            return repr(self)
        unit, scale = select_unit(s.median)
        lines = [repr(self)]
        if s.n > 1:
            rel_std = s.std / s.mean * 100 if s.mean else math.inf
            lines.append(f"  Mean:   {s.mean / scale:.2f} {unit}, std {s.std / scale:.2f} {unit} "
                         f"({rel_std:.1f}% of mean)")
        label = f"Median {confidence:.0%} CI"
        if s.ci_low is None or s.ci_high is None:
            lines.append(f"  {label}: n/a (too few samples: {s.n})")
        else:
            lines.append(f"  {label}: {s.ci_low / scale:.2f} to {s.ci_high / scale:.2f} {unit} "
                         f"(+-{s.relative_ci * 100:.1f}%, order statistic)")
        o = s.outliers
        if o.total:
            severe = o.low_severe + o.high_severe
            lines.append(f"  Outliers (Tukey fences): {o.low} low, {o.high} high"
                         f"{f' ({severe} severe)' if severe else ''} of {s.n}")
        else:
            lines.append(f"  Outliers (Tukey fences): none of {s.n}")
        work = throughput.describe(self)
        if work:
            lines.append(work)
        info = self.info or {}
        if "converged" in info:
            achieved = info.get("relative_ci")
            achieved_text = (f"{achieved * 100:.2f}%" if isinstance(achieved, float)
                             and math.isfinite(achieved) else "n/a")
            lines.append(
                f"  {'Converged' if info['converged'] else 'NOT converged'}: relative CI "
                f"{achieved_text}, target {info.get('target', math.nan) * 100:.2f}% "
                f"(stopped on {info.get('stop_reason')})"
            )
        return "\n".join(lines)

    @property
    def converged(self) -> bool | None:
        """From ``Timer.converge``: whether the noise target was reached (None otherwise)."""
        return self.info.get("converged")

    def without_overhead(self) -> Measurement:
        """A copy with the calibrated per-run overhead subtracted from every raw time.

        Raises OverheadError (a ValueError) when no overhead was calibrated, or
        when it is at least as large as some run: such a run cannot be told from
        the harness, and a time of zero or less would be a confident wrong figure.
        """
        from opbench.errors import OverheadError

        if self.overhead is None:
            raise OverheadError(
                "this Measurement has no overhead estimate: call Timer.calibrate_overhead() "
                "before measuring"
            )
        shift = self.overhead * self.number_per_run
        if shift >= min(self.raw_times):
            raise OverheadError(
                f"the harness's calibrated overhead ({self.overhead * 1e9:.3g} ns per run) is "
                f"at least the fastest run ({min(self.raw_times) / self.number_per_run * 1e9:.3g}"
                " ns): the statement costs less than the harness can resolve; report the raw "
                "times (or instruction counts) instead")
        return dataclasses.replace(
            self, raw_times=[t - shift for t in self.raw_times], overhead=0.0
        )

    def __repr__(self) -> str:
        """torch's text: title, description, setup, median, IQR, counts, warnings."""
        self._lazy_init()
        n = len(self._sorted_times)
        unit, scale = select_unit(self._median)
        lines = [
            object.__repr__(self),
            self.task_spec.summarize(),
        ]
        if self.clock is not None:
            lines.append(f"  clock: {self.clock}")
        lines.append(f"  {'Median: ' if n > 1 else ''}{self._median / scale:.2f} {unit}")
        if n >= 4:
            lines.append(
                f"  IQR:    {self.iqr / scale:.2f} {unit} "
                f"({self._p25 / scale:.2f} to {self._p75 / scale:.2f})"
            )
        threads = self.num_threads
        lines.append(
            f"  {n} measurement{'s' if n > 1 else ''}, {self.number_per_run} runs "
            f"{'per measurement,' if n > 1 else ','} {threads} thread{'s' if threads > 1 else ''}"
        )
        d = self.disturbance
        busy = [d.warning()] if d is not None and d.disturbed else []
        lines.append("\n".join([*self._warnings, *busy]))
        return "\n".join("\n".join(lines).strip().splitlines())

    def _repr_html_(self) -> str:
        """A notebook's view: torch's text without the object line, its warnings in red."""
        lines = repr(self).split("\n")[1:]
        first = next((i for i, line in enumerate(lines) if line.startswith("  WARNING")),
                     len(lines))
        return html_pre([(line, None if i < first else WARNING_STYLE)
                         for i, line in enumerate(lines)], "opbench-measurement")

    @staticmethod
    def merge(measurements: Iterable[Measurement]) -> list[Measurement]:
        """Pools replicates of the same TaskSpec into one Measurement per task.

        Times are extrapolated to ``number_per_run=1``; metadata is dropped,
        since it may differ between replicates (as torch does); ``info`` keeps the
        entries every replicate agrees on.
        """
        groups: dict[TaskSpec, list[Measurement]] = collections.defaultdict(list)
        for m in measurements:
            groups[m.task_spec].append(m)
        merged = []
        for task_spec, group in groups.items():
            info = {k: v for k, v in group[0].info.items()
                    if all(m.info.get(k, _MISSING) == v for m in group[1:])}
            # The blocks' signals pool with their blocks, so the merged figure is judged.
            signals = _disturbance.merge([m.info.get(_disturbance.INFO_KEY) for m in group])
            if signals is not None:
                info[_disturbance.INFO_KEY] = signals
            merged.append(Measurement(number_per_run=1, raw_times=[t for m in group for t in m.times],
                                      task_spec=task_spec, metadata=None, info=info))
        return merged


_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def select_unit(t: float) -> tuple[str, float]:
    """The unit that shows ``t`` seconds with an O(1) magnitude, and its scale.

    Example:
        >>> select_unit(3.2e-6)
        ('us', 1e-06)
    """
    exponent = _numerics.log10_f32(t)
    # torch 2.13 answers "s" below 1 ns (and fails on 0): nanoseconds are right.
    if not math.isfinite(exponent) or exponent < -9:
        return "ns", _UNITS["ns"]
    unit = {-3: "ns", -2: "us", -1: "ms"}.get(int(exponent // 3), "s")
    return unit, _UNITS[unit]


def unit_to_english(u: str) -> str:
    return {"ns": "nanosecond", "us": "microsecond", "ms": "millisecond", "s": "second"}[u]


def trim_sigfig(x: float, n: int) -> float:
    """``x`` trimmed to ``n`` significant figures (3.14159, 2 -> 3.1), as torch rounds it."""
    if n != int(n):
        raise AssertionError("Number of significant figures must be an integer")
    magnitude = math.ceil(_numerics.log10_f32(abs(x)))
    scale = 10 ** (magnitude - n)
    return _numerics.f32(_numerics.round_half_even_f32(x / scale) * _numerics.f32(scale))


def ordered_unique(elements: Iterable[Any]) -> list[Any]:
    return list(dict.fromkeys(elements))
