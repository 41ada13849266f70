"""Disturbance: whether other work on the machine pushed a measurement's figure up.

On a busy machine (a laptop, a shared CI runner) a thread that is ready to run
can still wait for a CPU. A block that waited reads slower than the code is,
and a parallel region (torch's intra-op pool, OpenMP) waits at its barrier
for its slowest thread: one preempted thread can make an op many times slower
with a small spread, so torch's IQR warning stays silent. opbench measures
the waiting instead of guessing it from the times.

**Signals**, all read outside the timed region:

* per block, the time the process's threads spent runnable but waiting for a
  CPU (Linux schedstat, ``opbench._C.SchedProbe``),
  as a fraction of the block's wall time (``waits``: two threads waiting the
  whole block read 2.0);
* per block, how fast the core ran just before and after it against the
  fastest this process has seen (``opbench._C.cpu_speed_probe_ns``, a fixed 1 us
  mix of integer work and L1 traffic; ``slowdowns``: 1.0 is full speed). A
  virtual CPU whose hyperthread sibling is busy (another guest, or this
  guest's other CPU) runs code slower with nothing in the scheduler's
  counters; so does a hot laptop;
* per measurement, the CPUs other processes kept busy meanwhile and the
  hypervisor's steal (``/proc/stat``, ``opbench.environment.cpu_snapshot``),
  against the CPUs this process may use and the threads it asked for: the
  "why" of a verdict.

**Verdict** (``Disturbance.disturbed``). A block is *disturbed* when its threads
waited for more than ``WAIT_LIMIT`` of its time, or the core ran more than
``SLOW_LIMIT`` slower than its best around it. The measurement is disturbed
when its median is more than ``SHIFT_LIMIT`` above the median of its
undisturbed blocks, or, with fewer than ``MIN_CLEAN`` of those to compare
with, when at the median its blocks waited more than ``SHIFT_LIMIT`` of their
time or ran more than ``SLOW_LIMIT`` slow. A few preempted blocks among many
clean ones leave the median where it was and are not a disturbance; an
oversubscribed parallel region is, and so is a core shared all along.

The limits come from ``benchmarks/busy.py``; what it measured, and which
signals were kept, is in the documentation's busy-machine page.

Example:
    >>> d = judge([1e-3] * 8 + [5e-3] * 12, {"waits": [0.0] * 8 + [0.8] * 12, "threads": 2,
    ...                                      "cpus": 2, "others": 1.6})
    >>> d.disturbed, d.waiting_blocks, round(d.shift, 1)
    (True, 12, 4.0)
    >>> d.reason()
    '12 of 20 blocks waited for a CPU (threads waited 71% of the time); 2 threads asked, 0.4 CPUs free'
"""
from __future__ import annotations

import collections
import dataclasses
import math
import os
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from opbench import _C, environment
from opbench.errors import DisturbanceWarning, warn

__all__ = [
    "ENV_VAR",
    "FULL_SPEED",
    "INFO_KEY",
    "MARK",
    "MIN_CLEAN",
    "SHIFT_LIMIT",
    "SLOW_LIMIT",
    "WAIT_LIMIT",
    "Disturbance",
    "Probe",
    "check_threads",
    "enabled",
    "figure_slowdown",
    "footnote",
    "full_speed_ns",
    "judge",
    "machine_full_speed_ns",
    "machine_slowdown",
    "merge",
    "slowdown_now",
    "speed_ns",
    "undisturbed",
    "warn_disturbed",
]

#: Where a Measurement keeps the signals (``Measurement.info``).
INFO_KEY = "disturbance"
#: ``OPBENCH_DISTURBANCE=off`` takes no signals (measurements then carry none).
ENV_VAR = "OPBENCH_DISTURBANCE"
#: A block whose threads waited for a CPU for more than this fraction of its time.
WAIT_LIMIT = 0.02
#: A block around which the core ran more than this much slower than its best.
SLOW_LIMIT = 1.25
#: A median this much above the non-waiting blocks' median is a disturbed figure (at
#: 0.05, busy.py's quiet tables had cells flagged within 15% of their best figure).
SHIFT_LIMIT = 0.10
#: Non-waiting blocks needed to compare the median with.
MIN_CLEAN = 3

# Snapshots of the machine's CPU time at the ends of recent measurements, for the
# CPUs other processes used lately (/proc/stat ticks need a window of a second or so).
_history: collections.deque[environment.CpuSnapshot] = collections.deque(maxlen=64)
_USAGE_WINDOW_S = 1.0


def enabled() -> bool:
    """Whether measurements take the signals (``$OPBENCH_DISTURBANCE`` is not ``off``)."""
    return os.environ.get(ENV_VAR, "on").strip().lower() not in ("off", "0", "false", "no")


def _snapshot() -> environment.CpuSnapshot | None:
    snap = environment.cpu_snapshot()
    if snap is not None:
        _history.append(snap)
    return snap


def _recent_others(now: environment.CpuSnapshot | None) -> tuple[float | None, float | None]:
    """(CPUs busy elsewhere, steal fraction) over about the last second up to ``now``."""
    if now is None:
        return None, None
    earlier = [s for s in _history if now.wall - s.wall >= _USAGE_WINDOW_S]
    start = earlier[-1] if earlier else (_history[0] if _history else None)
    if start is None:
        return None, None
    return now.others_since(start), now.steal_since(start)


# The fastest the speed probe has run in this process (ns): "full speed".
_best_speed_ns: list[int] = []
# Calibration: tries of the speed probe when the first measurement starts.
_CALIBRATION_TRIES = 20


def speed_ns() -> int:
    """One reading of the speed probe on this core, in nanoseconds: what every block's
    slowdown and a record's ``speed_ns`` are made of, so readings compare across
    processes (``opbench.core.recovery.wait_for_speed``). The first reading of a process
    also calibrates its full speed."""
    ns = int(_C.cpu_speed_probe_ns(2, 1000))
    if not _best_speed_ns:
        _best_speed_ns.append(min(int(_C.cpu_speed_probe_ns(_CALIBRATION_TRIES, 1000)), ns))
    elif ns < _best_speed_ns[0]:
        _best_speed_ns[0] = ns
    return ns


def slowdown_now() -> float:
    """How much slower than its best this core runs right now (1.0: full speed), by the
    speed probe: what ``recovery.wait_until_free`` waits on, since a core whose
    sibling is busy (a hyperthread the guest cannot see: virtual CPUs that report no
    SMT can still run slow while another is busy) runs slow with
    every CPU this process may use reading free.

    >>> slowdown_now() >= 1.0
    True
    """
    ns = speed_ns()
    return ns / _best_speed_ns[0] if _best_speed_ns and _best_speed_ns[0] > 0 else 1.0


class Probe:
    """The signals of one measurement, taken around each block (``Timer`` uses it).

    ``begin()`` / ``end(seconds)`` bracket a block, outside its clock reads;
    ``record(times)`` is what ``Measurement.info["disturbance"]`` keeps for the
    blocks ``times`` (matched by value, so a stopping rule may keep any of them).
    """

    def __init__(self, threads: int) -> None:
        self._native = _C.SchedProbe()
        self._threads = threads
        # block seconds -> (wait fraction, speed probe ns before + after) of each such block
        self._blocks: dict[float, list[tuple[float, int]]] = {}
        self._speed_before = 0
        self._start = _snapshot()

    @property
    def available(self) -> bool:
        """Whether this kernel gives the per-thread counters (Linux schedstat)."""
        return bool(self._native.available)

    def begin(self) -> None:
        self._speed_before = speed_ns()
        self._native.begin()

    def end(self, seconds: float) -> None:
        """Records the wait and the core's speed around the block that took ``seconds``."""
        waited_ns = self._native.end()[1]
        speed = self._speed_before + speed_ns()
        self._blocks.setdefault(seconds, []).append((max(0.0, waited_ns * 1e-9 / seconds), speed))

    def discard(self) -> None:
        """Forgets the blocks so far (warm-up, not samples)."""
        self._blocks.clear()

    def record(self, times: Sequence[float]) -> dict[str, Any] | None:
        """The JSON-able signals of the blocks ``times``; None when the counters are
        unavailable or a block was not seen by this probe."""
        if not self.available:
            return None
        pending = {t: list(blocks) for t, blocks in self._blocks.items()}
        full = _best_speed_ns[0] if _best_speed_ns else 0
        best = 2 * full  # a block's speed is the sum of the probes before and after it
        waits, slowdowns = [], []
        for t in times:
            seen = pending.get(t)
            if not seen:
                return None
            wait, speed = seen.pop(0)
            waits.append(round(wait, 4))
            slowdowns.append(round(speed / best, 3) if best else 1.0)
        end = _snapshot()
        others, steal = _recent_others(end)
        # speed_ns: what "full speed" was for this process, so a history can compare
        # processes (one that ran slowed all along reads 1.0 against its own best).
        return {"waits": waits, "slowdowns": slowdowns, "speed_ns": full or None,
                "threads": self._threads, "cpus": environment.allowed_cpus(),
                "others": None if others is None else round(others, 2),
                "steal": None if steal is None else round(steal, 3)}


@dataclasses.dataclass(frozen=True)
class Disturbance:
    """The verdict on one measurement's signals (``judge``).

    Attributes:
        blocks: blocks judged.
        waiting_blocks: blocks whose threads waited more than ``WAIT_LIMIT`` of their time.
        slow_blocks: blocks around which the core ran more than ``SLOW_LIMIT`` slow.
        disturbed_blocks: blocks that did either.
        wait: the threads' wait over all blocks, as a fraction of the blocks' time.
        median_wait: the median block's wait.
        slowdown: how much slower than its best the core ran around the median block
            (1.0: full speed).
        shift: the median's excess over the undisturbed blocks' median (0.5: 50% high);
            None with fewer than ``MIN_CLEAN`` undisturbed blocks.
        threads: the thread count asked for.
        cpus: CPUs this process may use.
        others: CPUs other processes kept busy meanwhile (None: not known).
        steal: the hypervisor's steal over the same time, a fraction (None: not known).
    """

    blocks: int
    waiting_blocks: int
    slow_blocks: int
    disturbed_blocks: int
    wait: float
    median_wait: float
    slowdown: float
    shift: float | None
    threads: int
    cpus: int
    others: float | None = None
    steal: float | None = None

    @property
    def disturbed(self) -> bool:
        """Whether the figure is pushed up by the machine's other work."""
        if not self.disturbed_blocks:
            return False
        if self.shift is not None:
            return self.shift > SHIFT_LIMIT
        return self.median_wait > SHIFT_LIMIT or self.slowdown > SLOW_LIMIT

    @property
    def cpus_free(self) -> float | None:
        """CPUs left for this process while it measured (None: not known)."""
        return None if self.others is None else max(0.0, self.cpus - self.others)

    def reason(self) -> str:
        """Why, in one line: what waited or ran slow, what was asked and what was free."""
        parts = []
        if self.waiting_blocks:
            parts.append(f"{self.waiting_blocks} of {self.blocks} blocks waited for a CPU "
                         f"(threads waited {self.wait:.0%} of the time)")
        if self.slow_blocks:
            parts.append(f"{self.slow_blocks} of {self.blocks} blocks ran on a core "
                         f"{self.slowdown:.1f}x slower than its best (a busy hyperthread "
                         "sibling or virtual machine)")
        free = self.cpus_free
        if free is not None:
            parts.append(f"{self.threads} thread{'s' if self.threads != 1 else ''} asked, "
                         f"{free:.1f} CPUs free")
        if self.steal is not None and self.steal >= 0.05:
            parts.append(f"the hypervisor stole {self.steal:.0%} of CPU time")
        return "; ".join(parts)

    def warning(self) -> str:
        """The warning a disturbed Measurement prints, in torch's warning layout."""
        if self.shift is None:
            excess = "no block ran undisturbed"
        elif self.shift >= 1:
            excess = f"the median is {1 + self.shift:.1f}x that of the undisturbed blocks"
        else:
            excess = f"the median is {self.shift:.0%} above that of the undisturbed blocks"
        return (f"  WARNING: the machine was busy: {self.reason()};\n"
                f"           {excess}. Measure again on a quiet machine "
                "(python -m opbench check says what is running).")


def judge(times: Sequence[float], record: dict[str, Any]) -> Disturbance:
    """The verdict on blocks that took ``times`` seconds, from their signals ``record``
    (``Probe.record``: ``waits`` and, optionally, ``slowdowns``, aligned with ``times``).

    Raises:
        ValueError: the signals and ``times`` differ in length.
    """
    waits = [float(w) for w in record.get("waits", ())]
    slowdowns = [float(v) for v in record.get("slowdowns") or [1.0] * len(waits)]
    if not len(waits) == len(slowdowns) == len(times):
        raise ValueError(f"{len(waits)} block waits and {len(slowdowns)} slowdowns for "
                         f"{len(times)} blocks")
    waiting = [w > WAIT_LIMIT for w in waits]
    slow = [v > SLOW_LIMIT for v in slowdowns]
    disturbed = [a or b for a, b in zip(waiting, slow)]
    clean = sorted(t for t, bad in zip(times, disturbed) if not bad)
    shift = None
    if len(clean) >= MIN_CLEAN and any(disturbed):
        shift = statistics.median(times) / statistics.median(clean) - 1
    total = math.fsum(times)
    wait = math.fsum(w * t for w, t in zip(waits, times)) / total if total > 0 else 0.0
    return Disturbance(
        blocks=len(times), waiting_blocks=sum(waiting), slow_blocks=sum(slow),
        disturbed_blocks=sum(disturbed), wait=wait,
        median_wait=statistics.median(waits) if waits else 0.0,
        slowdown=statistics.median(slowdowns) if slowdowns else 1.0, shift=shift,
        threads=int(record.get("threads", 1)), cpus=int(record.get("cpus", 1)),
        others=record.get("others"), steal=record.get("steal"),
    )


def merge(records: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The signals of replicates pooled in order (their blocks concatenated, as
    ``Measurement.merge`` pools times); None when any replicate has none."""
    if not records or any(r is None for r in records):
        return None
    known = [r for r in records if r is not None]
    others = [r["others"] for r in known if r.get("others") is not None]
    steal = [r["steal"] for r in known if r.get("steal") is not None]
    merged: dict[str, Any] = {"waits": [w for r in known for w in r["waits"]]}
    if all(r.get("slowdowns") for r in known):
        # Replicates from several processes: each one's slowdowns against the fastest of
        # their full speeds, where they all say what theirs was.
        speeds = [float(r.get("speed_ns") or 0) for r in known]
        best = min(speeds)
        merged["slowdowns"] = [round(v * s / best, 3) if best else v
                               for r, s in zip(known, speeds) for v in r["slowdowns"]]
        if best:
            merged["speed_ns"] = best
    merged.update({"threads": known[0].get("threads", 1), "cpus": known[0].get("cpus", 1),
                   "others": max(others) if others else None,
                   "steal": max(steal) if steal else None})
    return merged


def undisturbed(result: Any) -> tuple[list[float], str | None]:
    """The per-run times a decision should use from ``result`` (a Measurement), and what
    was done to them, for a gate's report: all of them when it is not disturbed; its
    undisturbed blocks when it is and has at least ``MIN_CLEAN`` of them (the waiting
    and slowed blocks dropped); all of them, said to be too high, when it has fewer."""
    d = result.disturbance
    times = list(result.times)
    if d is None or not d.disturbed:
        return times, None
    record = result.info[INFO_KEY]
    slowdowns = record.get("slowdowns") or [1.0] * len(times)
    kept = [t for t, w, v in zip(times, record["waits"], slowdowns)
            if w <= WAIT_LIMIT and v <= SLOW_LIMIT]
    if len(kept) >= MIN_CLEAN:
        return kept, (f"the machine was busy: decided on its {len(kept)} undisturbed of "
                      f"{len(times)} blocks")
    return times, (f"the machine was busy and no block ran undisturbed ({d.reason()}): its "
                   "figure is too high and the verdict may be wrong")


def figure_slowdown(result: Any, figure: float) -> float | None:
    """How much slower than its process's full speed the core ran around the blocks of
    ``result`` (a Measurement) its ``figure`` is taken from, those at or below it (a low
    quantile's: the fastest few): the median of their slowdowns; None without probe
    readings."""
    record = _record(result)
    slowdowns = record.get("slowdowns") if record else None
    if not slowdowns or len(slowdowns) != len(result.times):
        return None
    below = [v for t, v in zip(result.times, slowdowns) if t <= figure]
    return float(statistics.median(below or slowdowns))


#: A figure whose blocks ran this much slower than the machine's full speed, by the
#: speed probe, shared its core with another tenant's work. The probe (a native loop) feels
#: a busy sibling less than Python code does, and by how much depends on the machine: beside
#: two spinning processes (benchmarks/real_history.py) one machine's points read below
#: 1.125 or above 1.2, and the Python code of its points from 1.06 to 1.15 ran 3% to 11%
#: slow; another's read below 1.04 (within 2% of their commit's other runs, the median)
#: or above 1.08, and all 20 of its points from 1.09 to 1.15 ran 36% to 45% slow, two of
#: them a false +32% step. A point above 1.06 is made again (a make-up run, a round's
#: run again): cheap, where counting it is a false change.
FULL_SPEED = 1.06


def machine_slowdown(slowdown: float, own_ns: float | None, full_ns: float | None) -> float:
    """A process's ``slowdown`` (against its own full speed, ``own_ns``) made the machine's:
    against ``full_ns``, the fastest any process of a history or session recorded as its
    own (``machine_full_speed_ns``). Against its own best, a process that ran on a shared
    core all along reads 1.0. Either speed unknown: ``slowdown`` as it is.

    Example:
        >>> machine_slowdown(1.0, 2000.0, 1000.0)
        2.0
    """
    return slowdown * own_ns / full_ns if own_ns and full_ns else slowdown


def machine_full_speed_ns(results: Iterable[Any]) -> float | None:
    """The machine's full speed: the fastest any of ``results`` recorded as its process's
    own (``full_speed_ns``; None when none recorded one)."""
    return min((s for r in results if (s := full_speed_ns(r)) is not None), default=None)


def full_speed_ns(result: Any) -> float | None:
    """The speed probe's nanoseconds at the full speed of the process that measured
    ``result``, which its slowdowns are against (None where the record predates it). Against
    other processes' (``opbench.store.history``) it tells a process that ran slowed all
    along, whose blocks read 1.0 against its own best."""
    speed = (_record(result) or {}).get("speed_ns")
    return float(speed) if isinstance(speed, (int, float)) and speed > 0 else None


def _record(result: Any) -> dict[str, Any] | None:
    record = (getattr(result, "info", None) or {}).get(INFO_KEY)
    return record if isinstance(record, dict) else None


#: What a figure the busy machine pushed up carries after it, in tables and summaries.
MARK = " (busy)"


def footnote(results: Sequence[Any], what: str = "cells") -> str | None:
    """The note under a table whose figures include disturbed ones (marked ``MARK``): how
    many, and why; None when none is disturbed. ``results`` are Measurements (anything
    else is counted, never judged)."""
    hit = [d for r in results if (d := getattr(r, "disturbance", None)) is not None
           and d.disturbed]
    if not hit:
        return None
    worst = min(hit, key=lambda d: math.inf if d.cpus_free is None else d.cpus_free)
    why = [f"{sum(d.waiting_blocks for d in hit)} of {sum(d.blocks for d in hit)} of their "
           "blocks waited for a CPU"]
    if any(d.slow_blocks for d in hit):
        why.append(f"{sum(d.slow_blocks for d in hit)} ran on a core slowed by other work")
    if worst.cpus_free is not None:
        why.append(f"{worst.threads} thread{'s' if worst.threads != 1 else ''} asked, "
                   f"{worst.cpus_free:.1f} CPUs free")
    return (f"{MARK.strip()} {len(hit)} of {len(results)} {what} were measured while the machine "
            f"was busy ({'; '.join(why)}): their figures are too high. Measure them again on a "
            "quiet machine (python -m opbench check).")


def check_threads(threads: int) -> None:
    """Warns before timing when ``threads`` is more than the CPUs other processes left
    free over the last second: a parallel region would wait at its barriers."""
    others, _ = _recent_others(_snapshot())
    if others is None:
        return
    free = environment.allowed_cpus() - others
    if threads > 1 and threads > free + 0.5:
        warn(DisturbanceWarning,
             f"{threads} threads asked, but other processes keep {others:.1f} of "
             f"{environment.allowed_cpus()} CPUs busy ({max(free, 0):.1f} free): threads will "
             "wait for CPUs and at barriers, and the figures will be too high. Measure on a "
             "quiet machine, or with fewer threads.", once=f"oversubscribed-{threads}")


def warn_disturbed(title: str) -> None:
    """Warns (shown once per process, recorded on every Measurement it concerns) that a
    measurement was disturbed; its ``info`` and text say by what."""
    warn(DisturbanceWarning,
         f"the machine was busy while {title!r} was measured: its threads waited for CPUs "
         "and its figure is too high (Measurement.disturbance says how much). Measure again "
         "on a quiet machine; `python -m opbench check` says what is running.",
         once="disturbed")
