"""MemoryCounts: what one call of a statement allocates, as results files store it and
regression gates compare it.

``Timer.memory`` (``opbench.memory``) counts a statement's allocations in windows of
``2 * number`` calls: the first ``number`` calls are warm-up, the second ``number``
are counted, so whatever a window's start costs once (a freelist refilled, a cache
made) falls outside the figures. Each repeat of the window gives, per source, whole
numbers over those ``number`` calls:

* ``allocations`` and ``bytes``: allocations made, and the bytes they asked for (a
  ``realloc`` is one allocation of its new size);
* ``peak``: the most bytes live at once above the live bytes where the counted calls
  started (the mark), among the blocks the window allocated. Not divided by
  ``number``: for a statement that frees what it makes, it is the peak of one call;
* ``growth``: the bytes those calls left live, net. It rises with ``number`` when the
  statement leaks, and is then reported as leaking ``growth / number`` bytes a call.

Sources: ``"python"`` (objects, through CPython's allocator domains, as tracemalloc
sees them), ``"native"`` (the C library's allocator: ``malloc``, ``operator new``,
torch's CPU tensor storage; CPython's own calls excluded) and ``"host"`` (both, with
the peak of both together); ``"cuda"`` (torch's caching allocator: ``allocations``
are requests to it, plus ``device_allocations`` / ``device_bytes``: what it took from
the device, ``cudaMalloc``). Figures are exact, and equal in every repeat for code
whose work does not change from call to call (``exact``).

Example:
    >>> from opbench.core.measurement import TaskSpec
    >>> c = MemoryCounts(100, {"host": {"allocations": (500,), "bytes": (409_600,),
    ...                                "peak": (4096,), "growth": (0,)}},
    ...                  TaskSpec("torch.add(a, b)", "pass", name="add"))
    >>> c.allocations, c.bytes, c.leak
    (5.0, 4096.0, 0.0)
    >>> c
    <MemoryCounts 'add': 5 allocations, 4.00 KiB per call, peak 4.00 KiB, no leak>
"""
from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Mapping
from typing import Any

from opbench.core.measurement import TaskSpec
from opbench.stats import decide

__all__ = [
    "CUDA_FIELDS",
    "FIELDS",
    "GATED",
    "KINDS",
    "SOURCES",
    "MemoryCounts",
    "decide_memory",
    "format_bytes",
    "format_count",
]

SOURCES = ("python", "native", "host", "cuda")
FIELDS = ("allocations", "bytes", "peak", "growth")
CUDA_FIELDS = (*FIELDS, "device_allocations", "device_bytes")
# Fields divided by the calls counted to give a figure per call (peak is not: it is a
# level, not a sum).
_SUMMED = frozenset({"allocations", "bytes", "growth", "device_allocations", "device_bytes"})
# What a gate compares, per source: metric name -> (field, kind). The kind says how
# a value prints and is judged: "allocations" (a count per call) or "bytes".
GATED = {"allocations": ("allocations", "allocations"), "bytes": ("bytes", "bytes"),
         "peak": ("peak", "bytes"), "leak": ("growth", "bytes")}
_CUDA_GATED = {**GATED, "device allocations": ("device_allocations", "allocations")}
KINDS = ("allocations", "bytes")


def format_bytes(n: float) -> str:
    """``4.00 KiB``, ``512 B``, ``-1.50 MiB``: binary units, three significant figures.

    >>> format_bytes(4096), format_bytes(100), format_bytes(1.5 * 2**20)
    ('4.00 KiB', '100 B', '1.50 MiB')
    """
    size = abs(n)
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B" if float(n).is_integer() else f"{n:.1f} B"


def format_count(n: float) -> str:
    """``5``, ``1,024``, ``2.50``: a count, its decimals only when it has some."""
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.2f}"


@dataclasses.dataclass(frozen=True)
class MemoryCounts:
    """Memory of ``number_per_run`` calls of one task, by source, one total per repeat.

    Attributes:
        number_per_run: calls counted in each total (``Timer.memory``'s ``number``).
        counts: source -> field -> one whole number per repeat (module doc).
        task_spec: what was counted (its ``key`` matches it across files).
        info: facts about the count (how it was made, the counter, devices ...).
    """

    number_per_run: int
    counts: Mapping[str, Mapping[str, tuple[int, ...]]]
    task_spec: TaskSpec
    info: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.number_per_run, int) or self.number_per_run < 1:
            raise ValueError(f"number_per_run must be a positive int, got {self.number_per_run!r}")
        if not self.counts:
            raise ValueError("MemoryCounts needs at least one source")
        lengths = set()
        for source, fields in self.counts.items():
            if source not in SOURCES:
                raise ValueError(f"unknown memory source {source!r} (one of {', '.join(SOURCES)})")
            known = CUDA_FIELDS if source == "cuda" else FIELDS
            if set(fields) != set(known):
                raise ValueError(f"source {source!r} needs the fields {', '.join(known)}, got "
                                 f"{', '.join(fields)}")
            lengths |= {len(v) for v in fields.values()}
        if len(lengths) != 1 or 0 in lengths:
            raise ValueError("every figure needs one value per repeat, at least one")
        # Plain tuples of ints, whatever came in (lists from JSON).
        object.__setattr__(self, "counts", {s: {f: tuple(int(x) for x in v) for f, v in d.items()}
                                            for s, d in self.counts.items()})

    # -- figures ----------------------------------------------------------------------

    @property
    def sources(self) -> tuple[str, ...]:
        """The sources counted, in ``SOURCES`` order."""
        return tuple(s for s in SOURCES if s in self.counts)

    @property
    def repeats(self) -> int:
        return len(next(iter(next(iter(self.counts.values())).values())))

    @property
    def _default_source(self) -> str:
        return "host" if "host" in self.counts else self.sources[0]

    def values(self, field: str = "allocations", source: str | None = None) -> tuple[float, ...]:
        """``field`` of ``source`` (default: host, else the first counted), one value per
        repeat, per call (``peak``: as counted, not divided).

        Raises:
            KeyError: a source or field that was not counted.
        """
        source = self._default_source if source is None else source
        if source not in self.counts:
            raise KeyError(f"{source!r} was not counted (counted: {', '.join(self.sources)})")
        totals = self.counts[source][field]
        if field not in _SUMMED:
            return tuple(float(v) for v in totals)
        return tuple(v / self.number_per_run for v in totals)

    def per_call(self, field: str = "allocations", source: str | None = None) -> float:
        """The median over repeats of ``values(field, source)``."""
        return float(statistics.median(self.values(field, source)))

    @property
    def allocations(self) -> float:
        """Allocations per call, Python objects and the native heap together."""
        return self.per_call("allocations")

    @property
    def bytes(self) -> float:
        """Bytes allocated per call (asked for), Python objects and the native heap."""
        return self.per_call("bytes")

    @property
    def peak(self) -> float:
        """The most bytes live at once above the starting point, while counting."""
        return self.per_call("peak")

    @property
    def growth(self) -> float:
        """Net bytes left live per call (negative when calls free what was there)."""
        return self.per_call("growth")

    @property
    def leak(self) -> float:
        """Bytes per call the statement leaks: its net growth per call when positive."""
        return max(self.growth, 0.0)

    @property
    def leaking(self) -> bool:
        """Whether live memory grows with the calls (host or CUDA)."""
        return any(self.per_call("growth", s) > 0 for s in self.sources)

    @property
    def exact(self) -> bool:
        """Whether every repeat counted the same, figure by figure."""
        return all(len(set(v)) == 1 for d in self.counts.values() for v in d.values())

    @property
    def median(self) -> float:
        """Allocations per call, under the name tables and colours look for."""
        return self.allocations

    @property
    def title(self) -> str:
        return self.task_spec.title

    def gated(self) -> dict[str, tuple[str, tuple[float, ...]]]:
        """What a gate compares: metric -> (kind, one value per repeat). Host metrics
        are named plainly (``allocations``, ``bytes``, ``peak``, ``leak``), CUDA's with
        ``cuda `` before them; ``leak`` is the net growth per call."""
        out: dict[str, tuple[str, tuple[float, ...]]] = {}
        for prefix, source, metrics in (("", self._default_source, GATED),
                                        ("cuda ", "cuda", _CUDA_GATED)):
            if source not in self.counts:
                continue
            for metric, (field, kind) in metrics.items():
                values = self.values(field, source)
                if metric == "leak":  # memory a call frees is no leak, and no gain
                    values = tuple(max(v, 0.0) for v in values)
                out[prefix + metric] = (kind, values)
        return out

    @classmethod
    def joined(cls, replicates: list[MemoryCounts]) -> MemoryCounts:
        """Replicates of one task as one MemoryCounts, their repeats joined (a Compare's
        cell). Raises ValueError for replicates counted over different numbers of calls or
        sources: they do not join."""
        first = replicates[0]
        if any((c.number_per_run, c.sources) != (first.number_per_run, first.sources)
               for c in replicates):
            raise ValueError(f"replicates of {first.task_spec.key!r} were counted over different "
                             "numbers of calls or sources: count them alike to compare them")
        return dataclasses.replace(first, counts={
            s: {f: tuple(v for c in replicates for v in c.counts[s][f]) for f in fields}
            for s, fields in first.counts.items()})

    # -- text -------------------------------------------------------------------------

    def _summary(self, source: str) -> str:
        leak, n = self.per_call("growth", source), self.per_call("allocations", source)
        return (f"{format_count(n)} allocation{'' if n == 1 else 's'}, "
                f"{format_bytes(self.per_call('bytes', source))} per call, peak "
                f"{format_bytes(self.per_call('peak', source))}, "
                + (f"leaks {format_bytes(leak)} per call" if leak > 0 else "no leak"))

    def cell_text(self) -> str:
        """A Compare cell: ``5 / 4.00 KiB`` (allocations / bytes per call), with
        ``leaks 165 B`` after it when the statement leaks."""
        text = f"{format_count(self.allocations)} / {format_bytes(self.bytes)}"
        return text + (f" leaks {format_bytes(self.leak)}" if self.leak > 0 else "")

    def describe(self) -> str:
        """Every source's figures per call, one line each, and how they were counted."""
        lines = [self.title, f"  {self.number_per_run} calls counted, {self.repeats} repeat(s), "
                             + ("exact (every repeat the same)" if self.exact
                                else "repeats differ: figures are medians")]
        for source in self.sources:
            line = f"  {source:>6}: {self._summary(source)}"
            if source == "cuda":
                line += (f"; device: {format_count(self.per_call('device_allocations', 'cuda'))} "
                         f"allocations, {format_bytes(self.per_call('device_bytes', 'cuda'))} "
                         "per call")
            lines.append(line)
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<MemoryCounts {self.task_spec.key!r}: {self._summary(self._default_source)}>"

    # -- files --------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The fields a results file holds (``info`` left to the file's writer)."""
        return {"number_per_run": self.number_per_run,
                "counts": {s: {f: list(v) for f, v in d.items()} for s, d in self.counts.items()},
                "task_spec": self.task_spec.to_dict()}

    @staticmethod
    def problem(entry: Mapping[str, Any]) -> str | None:
        """What is wrong with a results file's memory entry's ``counts``, or None."""
        counts = entry.get("counts")
        if not isinstance(counts, dict) or not counts:
            return "expected an object of sources"
        lengths = set()
        for source, fields in counts.items():
            known = CUDA_FIELDS if source == "cuda" else FIELDS
            if source not in SOURCES or not isinstance(fields, dict) or set(fields) != set(known):
                return f"source {source!r}: expected one of {', '.join(SOURCES)} with fields " \
                       f"{', '.join(known)}"
            for field, values in fields.items():
                if not (isinstance(values, list) and values
                        and all(isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2**63
                                for v in values)):
                    return f"{source}.{field}: expected a non-empty list of whole numbers"
                lengths.add(len(values))
        return None if len(lengths) == 1 else "every figure needs one value per repeat"


def decide_memory(old: list[float], new: list[float], threshold: float,
                  kind: str) -> decide.Decision:
    """The verdict on a memory figure per call, one value per repeat: exact counts, so
    no interval from sampling, only the range the repeats allow (as
    ``opbench.stats.decide.counts``).

    * Allocations: one allocation a call more is a regression (``"slower"``) whatever
      the threshold, and one fewer an improvement: each is a new or removed block
      (a copy, a temporary), never noise.
    * Bytes (``bytes``, ``peak``, ``leak``): judged on the ratio against
      ``threshold``; from nothing to something (a first allocation, a new leak) is a
      regression.

    A baseline of zero has no ratio; there the ratio is taken as if each side had one
    more (allocation or byte), so that it stays finite: 0 to 1 allocation is 2.000x.

    Example:
        >>> decide_memory([100.0], [101.0], 0.05, "allocations").verdict
        'slower'
        >>> decide_memory([4096.0], [4100.0], 0.05, "bytes").verdict
        'same'
        >>> decide_memory([0.0], [64.0], 0.05, "bytes").verdict
        'slower'
    """
    decide.check_threshold(threshold)
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    if not old or not new or not all(math.isfinite(v) for v in [*old, *new]):
        raise ValueError("decide_memory needs finite values on both sides")
    lo_old, hi_old, lo_new, hi_new = min(old), max(old), min(new), max(new)
    shift = 1.0 if min(lo_old, lo_new) <= 0 else 0.0

    def ratio(a: float, b: float) -> float:
        return (b + shift) / (a + shift) if a + shift > 0 else math.inf

    median_ratio = ratio(statistics.median(old), statistics.median(new))
    ci = (ratio(hi_old, lo_new), ratio(lo_old, hi_new))
    if kind == "allocations":
        # Whole allocations per call: a difference of at least one in every repeat.
        verdict = ("slower" if lo_new - hi_old >= 1 else "faster" if lo_old - hi_new >= 1
                   else "same" if hi_new - lo_old < 1 and hi_old - lo_new < 1 else "inconclusive")
    elif hi_old <= 0 < lo_new:
        verdict = "slower"
    elif hi_new <= 0 < lo_old:
        verdict = "faster"
    elif hi_old <= 0 and hi_new <= 0:
        verdict = "same"
    else:
        verdict = decide.verdict(*ci, threshold)
    reason = "the repeats' spread straddles the threshold" if verdict == "inconclusive" else ""
    return decide.Decision(verdict, median_ratio, ci, median_ratio, threshold, None, reason)
