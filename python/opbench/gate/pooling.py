"""Results pooled for the gate: each benchmark's per-run values matched by key
(``opbench.core.identity.key``), replicates kept apart as runs, the blocks the busy
machine disturbed left out, and the notes that say what was done.

A result counts by what the gate decides on: a Measurement by its per-run times (or,
for ``metric="byte_rate"`` / ``"flop_rate"``, its time per byte or FLOP of the work
declared or counted), InstructionCounts by its per-run counts, MemoryCounts by one row
per figure (``key [allocations]``, ``[bytes]``, ...). A key whose results are of
different kinds is ``"mixed"`` (not compared).

Example:
    >>> from opbench import Measurement, TaskSpec
    >>> m = Measurement(1, [1e-6, 2e-6], TaskSpec("f()", "pass", name="f"))
    >>> pool([m, m])
    {'f': ('time', [1e-06, 2e-06, 1e-06, 2e-06])}
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opbench import _choices
from opbench.core import disturbance as _disturbance
from opbench.core import identity
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement
from opbench.core.memory import MemoryCounts
from opbench.core.throughput import declared_or_counted

__all__ = ["METRICS", "by_run", "disturbed_notes", "pool", "remeasured"]

# Gated metric -> the work a throughput divides by (None: time itself).
METRICS = _choices.GATE_METRICS


def pool(results: Iterable[Any], metric: str = "time",
         disturbed: dict[str, str] | None = None) -> dict[str, tuple[str, list[float]]]:
    """key -> (kind, per-run values), replicates pooled, in first-seen order; what was
    done about disturbed results is added to ``disturbed`` (see ``by_run``)."""
    return {key: (kind, [v for values in runs for v in values])
            for key, (kind, runs) in by_run(results, metric, disturbed).items()}


def by_run(results: Iterable[Any], metric: str = "time",
            disturbed: dict[str, str] | None = None) -> dict[str, tuple[str, list[list[float]]]]:
    """key -> (kind, per-run values of each result of the key), in first-seen order.

    A result the busy machine disturbed (``opbench.core.disturbance``) counts with its
    undisturbed blocks only, when it has enough; a run with none is dropped when the key
    has a run that has some. ``disturbed`` gets key -> what was done, for the report.
    """
    pooled: dict[str, tuple[str, list[list[float]]]] = {}
    notes: dict[str, list[str]] = {}
    hopeless: dict[str, list[int]] = {}  # key -> its runs with no undisturbed block
    what = METRICS[metric]
    for r in results:
        if isinstance(r, MemoryCounts):  # a row per figure (MemoryCounts.gated)
            for name, (kind, counted) in r.gated().items():
                key = f"{identity.key(r)} [{name}]"
                before = pooled.get(key, (kind, []))
                pooled[key] = (kind if before[0] == kind else "mixed", [*before[1], list(counted)])
            continue
        work = declared_or_counted(r, what) if what else None
        note = None
        if isinstance(r, Measurement):
            times, note = _disturbance.undisturbed(r)
        if isinstance(r, Measurement) and work:
            kind, values = metric, [t / work for t in times]
        elif isinstance(r, Measurement):
            kind, values = "time", times
        elif isinstance(r, InstructionCounts):
            kind, values = "instructions", list(r.per_run_values)
        else:
            raise TypeError(f"the gate compares Measurements, InstructionCounts and MemoryCounts, got "
                            f"{type(r).__name__}")
        key = identity.key(r)
        if key in pooled and pooled[key][0] != kind:
            kind = "mixed"
        pooled.setdefault(key, (kind, []))
        if note is not None:
            notes.setdefault(key, []).append(note)
            if "no block ran undisturbed" in note:
                hopeless.setdefault(key, []).append(len(pooled[key][1]))
        pooled[key] = (kind, [*pooled[key][1], values])
    for key, drop in hopeless.items():
        kind, runs = pooled[key]
        if len(drop) < len(runs):  # another run has undisturbed blocks: decide on those
            pooled[key] = (kind, [v for i, v in enumerate(runs) if i not in drop])
            notes[key] = [n for n in notes[key] if "no block ran undisturbed" not in n]
            notes[key].append(f"{len(drop)} of {len(runs)} runs dropped: no block of theirs "
                              "ran undisturbed (the machine was busy)")
    if disturbed is not None:
        disturbed.update({key: "; ".join(dict.fromkeys(n)) for key, n in notes.items()})
    return pooled


def remeasured(results: Iterable[Any]) -> list[str]:
    """"key: 3 measurements pooled" for each result the plugin measured again."""
    notes = []
    for r in results:
        again = r.info.get("remeasured")
        if isinstance(again, dict):
            notes.append(f"{identity.key(r)}: {again.get('measurements')} measurements "
                         f"{again.get('how', 'pooled')}")
    return notes


def disturbed_notes(baseline: dict[str, str], new: dict[str, str],
                    keys: Iterable[str]) -> list[str]:
    """"key (new): what was done" for each compared benchmark the busy machine disturbed
    on either side (``pool``'s ``disturbed``)."""
    return [f"{key} ({side}): {notes[key]}" for key in keys
            for side, notes in (("baseline", baseline), ("new", new)) if key in notes]
