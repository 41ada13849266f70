"""What a results file may hold: the format's name and version, and every field of a
parsed document checked before anything is built from it.

``Checker`` names the file, the entry (with its key) and the field of the first
problem in a ``ResultsFileError``: a missing or unknown key, a mistyped field, or a
value no result can have (no times, a time that is zero, negative, nan, infinite or
beyond any clock, a count that is not a positive integer below 2**64, a thread count
beyond reason). ``opbench.store.results`` loads what it passes.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from opbench._checks import is_count, is_finite_number
from opbench.core.memory import MemoryCounts
from opbench.core.task_spec import TaskSpec
from opbench.errors import ResultsFileError

__all__ = ["FORMAT", "VERSION", "Checker"]

FORMAT = "opbench-results"
VERSION = 2

_OPTIONAL_STR_SPEC_FIELDS = ("label", "sub_label", "description", "env", "name")
_WORK_FIELDS = ("flops", "bytes")  # declared work per run (opbench.core.throughput)
_MEASUREMENT_KEYS = {"number_per_run", "raw_times", "task_spec", "metadata", "overhead",
                     "clock", "info", "statistics", "omitted"}
_INSTRUCTION_KEYS = {"number_per_run", "counts", "task_spec", "baseline", "info", "per_run"}
_MEMORY_KEYS = {"number_per_run", "counts", "task_spec", "info", "per_call"}
# The lists a file may lack (written before they existed): read as empty.
_OPTIONAL_LISTS = ("instructions", "memory")
# More threads than any machine has had: a larger count is corruption, not a setting.
_MAX_THREADS = 1 << 16
# A count past 64 bits (instructions, calls per run) is corruption, and a float
# conversion of it overflows; times and declared work beyond these bounds are no
# clock's or machine's, and overflow the statistics (float32 included) of `show`.
_MAX_COUNT = 1 << 64
_TIME_RANGE = (1e-30, 1e30)
_MAX_WORK = 1e30


def _is_time(v: Any) -> bool:
    return is_finite_number(v) and _TIME_RANGE[0] <= v <= _TIME_RANGE[1]


def _is_count(v: Any, minimum: int = 1) -> bool:
    return is_count(v, minimum) and v < _MAX_COUNT


class Checker:
    """Validates a parsed document, naming the file, the entry and the field of any problem."""

    def __init__(self, path: Path | str) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ResultsFileError:
        return ResultsFileError(f"{self.path}: {where}: {problem}")

    def expect(self, ok: bool, where: str, problem: str) -> None:
        if not ok:
            raise self.fail(where, problem)

    def document(self, doc: Any) -> None:
        self.expect(isinstance(doc, dict), "top level", "expected a JSON object")
        self.expect(doc.get("format") == FORMAT, "format",
                    f"not an opbench results file (format {doc.get('format')!r}, "
                    f"expected {FORMAT!r})")
        version = doc.get("version")
        self.expect(is_count(version), "version", f"expected a positive int, got {version!r}")
        if version > VERSION:
            raise self.fail("version", f"format version {version} was written by a newer "
                            f"opbench; this one reads up to version {VERSION}: upgrade opbench")
        self.expect(isinstance(doc.get("environment"), dict), "environment",
                    "missing or not an object")
        for field, check in self.entry_checks():
            entries = doc.get(field, [] if field in _OPTIONAL_LISTS else None)
            self.expect(isinstance(entries, list), field, "missing or not a list")
            for i, entry in enumerate(entries):
                check(entry, f"{field}[{i}]")

    def entry_checks(self) -> tuple[tuple[str, Any], ...]:
        return (("measurements", self.measurement), ("instructions", self.instructions),
                ("memory", self.memory))

    def _entry(self, e: Any, where: str, required: set[str], known: set[str]) -> str:
        """Checks an entry's shape and task_spec; returns ``where`` with the entry's key."""
        self.expect(isinstance(e, dict), where, "expected an object")
        missing = required - e.keys()
        self.expect(not missing, where, f"missing keys {sorted(missing)}")
        unknown = e.keys() - known
        self.expect(not unknown, where, f"unknown keys {sorted(unknown)}")
        self.task_spec(e["task_spec"], f"{where}.task_spec")
        where = f"{where} ({TaskSpec(**e['task_spec']).key})"
        self.expect(_is_count(e["number_per_run"]), f"{where}.number_per_run",
                    f"expected a positive int below 2**64, got {e['number_per_run']!r}")
        self.expect(isinstance(e.get("info", {}), dict), f"{where}.info", "expected an object")
        return where

    def measurement(self, e: Any, where: str) -> None:
        where = self._entry(e, where, {"number_per_run", "raw_times", "task_spec"},
                            _MEASUREMENT_KEYS)
        times = e["raw_times"]
        self.expect(isinstance(times, list) and len(times) > 0, f"{where}.raw_times",
                    "expected a non-empty list of times")
        bad = [t for t in times if not (is_finite_number(t) and t > 0)]
        self.expect(not bad, f"{where}.raw_times",
                    f"times must be finite positive numbers, got {bad[0]!r}" if bad else "")
        n = e["number_per_run"]
        bad = [t for t in times if not (_is_time(t) and _is_time(t / n))]
        self.expect(not bad, f"{where}.raw_times",
                    f"times (and times per run) must be between {_TIME_RANGE[0]:g} and "
                    f"{_TIME_RANGE[1]:g} seconds, got {bad[0]!r}" if bad else "")
        self.expect(e.get("metadata") is None or isinstance(e["metadata"], dict),
                    f"{where}.metadata", "expected an object or null")
        overhead = e.get("overhead")
        self.expect(overhead is None or overhead == 0 or _is_time(overhead),
                    f"{where}.overhead", f"expected 0, null or seconds from {_TIME_RANGE[0]:g} "
                    f"to {_TIME_RANGE[1]:g}")
        self.expect(e.get("clock") is None or isinstance(e["clock"], str),
                    f"{where}.clock", "expected a string or null")

    def instructions(self, e: Any, where: str) -> None:
        where = self._entry(e, where, {"number_per_run", "counts", "task_spec"},
                            _INSTRUCTION_KEYS)
        counts = e["counts"]
        self.expect(isinstance(counts, list) and len(counts) > 0
                    and all(_is_count(c) for c in counts), f"{where}.counts",
                    "expected a non-empty list of positive ints below 2**64")
        self.expect(_is_count(e.get("baseline", 0), minimum=0), f"{where}.baseline",
                    "expected an int from 0 to 2**64")

    def memory(self, e: Any, where: str) -> None:
        where = self._entry(e, where, {"number_per_run", "counts", "task_spec"}, _MEMORY_KEYS)
        problem = MemoryCounts.problem(e)
        self.expect(problem is None, f"{where}.counts", problem or "")

    def task_spec(self, s: Any, where: str) -> None:
        self.expect(isinstance(s, dict), where, "expected an object")
        for key in ("stmt", "setup"):
            self.expect(isinstance(s.get(key), str), f"{where}.{key}", "missing or not a string")
        self.expect(isinstance(s.get("global_setup", ""), str), f"{where}.global_setup",
                    "expected a string")
        for key in _OPTIONAL_STR_SPEC_FIELDS:
            self.expect(s.get(key) is None or isinstance(s[key], str), f"{where}.{key}",
                        "expected a string or null")
        threads = s.get("num_threads", 1)
        self.expect(is_count(threads) and threads <= _MAX_THREADS, f"{where}.num_threads",
                    f"expected an int from 1 to {_MAX_THREADS}, got {threads!r}")
        for key in _WORK_FIELDS:
            v = s.get(key)
            self.expect(v is None or (is_finite_number(v) and 0 <= v <= _MAX_WORK),
                        f"{where}.{key}",
                        f"expected a finite number from 0 to {_MAX_WORK:g} or null, got {v!r}")
        known = {f.name for f in dataclasses.fields(TaskSpec)}
        self.expect(not (s.keys() - known), where, f"unknown keys {sorted(s.keys() - known)}")
