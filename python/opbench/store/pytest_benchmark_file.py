"""pytest-benchmark's saved JSON, read as opbench results: a suite's old baseline compares
with opbench's runs (``opbench compare old.json new.json``, ``--opbench-compare``).

pytest-benchmark writes ``{"machine_info": ..., "commit_info": ..., "benchmarks":
[...], "datetime": ..., "version": ...}`` (``--benchmark-json``,
``--benchmark-save``, ``--benchmark-autosave``); each benchmark has its
``fullname`` (the test's node id, which is the key opbench's fixtures give the
same test), its ``group``, ``extra_info``, ``params`` and ``stats``. ``stats.data``
holds every round's time per iteration (always with ``--benchmark-json``; with
``--benchmark-save-data`` for saved runs), and ``stats.iterations`` the calls per
round: the round is a block of ``iterations`` calls, as an opbench block is, so
the result compares as an opbench Measurement does. A benchmark saved without
its data (only summary statistics) cannot be compared as runs are (its 10th
percentile and its interval are unknown): it is left out, with a
``ResultsFileWarning`` that says how to save it.

pytest-benchmark sizes its rounds by timing a first call: a round of one call
that took less than its own target round (``options.min_time``, 5 us by
default) means that first call was slow (cold) and the rounds stayed single
calls, each with the timer's own cost in it. Such a benchmark reads slow against
opbench's blocks of many calls, unchanged code included (packaging's
``canonicalize_name``: 330 ns a round against opbench's 205 ns; ``SpecifierSet.contains``
1.83 us against 1.59 us: ``benchmarks/real_history.py``'s suite). It is kept, and
a ``ResultsFileWarning`` names it and the fix: ``--benchmark-warmup=on``, with
which pytest-benchmark sizes its rounds by the fastest of its warm-up calls.

Example:
    >>> doc = {"machine_info": {"python_version": "3.11.7"}, "commit_info": {},
    ...        "benchmarks": [{"fullname": "t.py::test_a", "group": None, "name": "test_a",
    ...                        "stats": {"data": [0.5, 0.75], "iterations": 4}}],
    ...        "datetime": "2024-01-01T00:00:00", "version": "5.1.0"}
    >>> is_pytest_benchmark(doc)
    True
    >>> converted = as_results_document(doc, "bench.json", ("opbench-results", 2))
    >>> m = converted["measurements"][0]
    >>> m["task_spec"]["name"], m["number_per_run"], m["raw_times"]
    ('t.py::test_a', 4, [2.0, 3.0])
"""
from __future__ import annotations

import math
from typing import Any

from opbench.errors import ResultsFileError, ResultsFileWarning, warn

__all__ = ["as_results_document", "is_pytest_benchmark"]

# machine_info fields -> the environment facts opbench's gate names (and compares).
_MACHINE = (("python_version", "python"), ("node", "hostname"), ("machine", "machine"),
            ("system", "system"))


def _names(names: list[str]) -> str:
    """The first five of ``names``, and ``...`` where there are more."""
    return ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")


def is_pytest_benchmark(doc: Any) -> bool:
    """Whether a parsed JSON document is pytest-benchmark's output."""
    return (isinstance(doc, dict) and "format" not in doc and isinstance(doc.get("benchmarks"), list)
            and "machine_info" in doc)


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _environment(doc: dict[str, Any]) -> dict[str, Any]:
    machine = _object(doc.get("machine_info"))
    env: dict[str, Any] = {opbench: machine[theirs] for theirs, opbench in _MACHINE
                           if isinstance(machine.get(theirs), (str, int))}
    cpu = _object(machine.get("cpu"))
    if isinstance(cpu.get("brand_raw"), str):
        env["cpu_model"] = cpu["brand_raw"]
    if isinstance(cpu.get("count"), int):
        env["cpu_count"] = cpu["count"]
    commit = _object(doc.get("commit_info"))
    if isinstance(commit.get("id"), str):
        env["git_commit"] = commit["id"] + ("+dirty" if commit.get("dirty") else "")
    env["source"] = f"pytest-benchmark {doc.get('version', '?')}"
    if isinstance(doc.get("datetime"), str):
        env["saved_at"] = doc["datetime"]
    return env


def _entry(bench: Any, where: str) -> dict[str, Any] | None:
    """An opbench measurement entry for one pytest-benchmark benchmark; None when it was
    saved without its rounds' data."""
    if not isinstance(bench, dict):
        raise ResultsFileError(f"{where}: expected an object")
    name = bench.get("fullname") or bench.get("name")
    if not isinstance(name, str) or not name:
        raise ResultsFileError(f"{where}: no fullname or name")
    stats = _object(bench.get("stats")) or bench
    data, iterations = stats.get("data"), stats.get("iterations", 1)
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < 1:
        raise ResultsFileError(f"{where} ({name}): stats.iterations must be a positive int, "
                               f"got {iterations!r}")
    if data is None:
        return None
    if not (isinstance(data, list) and data and all(
            isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t) and t > 0
            for t in data)):
        raise ResultsFileError(f"{where} ({name}): stats.data must be a non-empty list of "
                               "positive times")
    info: dict[str, Any] = {"source": "pytest-benchmark"}
    for field in ("group", "extra_info", "params", "param"):
        if bench.get(field) not in (None, {}, ""):
            info[field] = bench[field]
    return {"number_per_run": iterations, "raw_times": [t * iterations for t in data],
            "task_spec": {"stmt": name, "setup": "pass", "name": name}, "info": info}


def _single_calls(bench: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Whether pytest-benchmark left ``bench``'s rounds single calls shorter than its own
    target round (``options.min_time``): its sizing call was slow (module doc)."""
    target = _object(bench.get("options")).get("min_time")
    if isinstance(target, str):  # pytest-benchmark saves the option as the user wrote it
        try:
            target = float(target)
        except ValueError:
            return False
    times = sorted(entry["raw_times"])
    return (entry["number_per_run"] == 1 and isinstance(target, (int, float))
            and times[len(times) // 2] < target)


def as_results_document(doc: dict[str, Any], source: str,
                        fmt: tuple[str, int]) -> dict[str, Any]:
    """``doc`` (pytest-benchmark's) as an opbench results document of format ``fmt``
    (name, version), for the results loader to check and load; benchmarks without data
    are left out with a warning.

    Raises:
        ResultsFileError: a benchmark without a name, or with impossible data; no
            benchmark with data at all.
    """
    entries, missing, single = [], [], []
    for i, bench in enumerate(doc["benchmarks"]):
        entry = _entry(bench, f"{source}: benchmarks[{i}]")
        if entry is None:
            missing.append(str(bench.get("fullname") or bench.get("name")))
        else:
            entries.append(entry)
            if _single_calls(bench, entry):
                single.append(entry["task_spec"]["name"])
    if single:
        warn(ResultsFileWarning,
             f"{source}: {len(single)} pytest-benchmark benchmark(s) timed in rounds of one "
             f"call each, shorter than its own target round (--benchmark-min-time): "
             f"{_names(single)}; their first call was slow, so their rounds stayed single "
             "calls with the timer's own cost in each, and they read slower than the code "
             "against opbench's blocks; save the baseline again with --benchmark-warmup=on")
    if missing:
        message = (f"{source}: {len(missing)} pytest-benchmark benchmark(s) saved without their "
                   f"rounds (stats.data), left out: {_names(missing)}; save them with "
                   "--benchmark-json, or --benchmark-save-data")
        if not entries:
            raise ResultsFileError(message)
        warn(ResultsFileWarning, message)
    return {"format": fmt[0], "version": fmt[1], "environment": _environment(doc),
            "measurements": entries, "instructions": []}
