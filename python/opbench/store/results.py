"""Results files: Measurements and instruction counts saved as versioned JSON, loaded
back exactly.

A file holds every raw time, the TaskSpec, the opbench fields (overhead,
clock, info), user metadata where it is JSON-able, the statistics (for
readers other than opbench; recomputed on load), instruction counts, and the
environment that produced them::

    {"format": "opbench-results", "version": 2,
     "environment": {...}, "measurements": [{...}, ...], "instructions": [{...}, ...],
     "memory": [{...}, ...]}

Round trips are exact: floats are written with ``repr`` (shortest exact
form). Writes are atomic (temporary file in the same directory, fsync,
``os.replace``), with the permissions a new file gets from the umask (0644
under umask 022), or the old file's: a crash leaves the old file or the new
one, never half of one, and a CI artifact server can read it.

pytest-benchmark's saved JSON loads too (``opbench.store.pytest_benchmark_file``):
its benchmarks as Measurements keyed by their test's node id, so an old suite's
baseline compares with opbench's runs of it.

Loading validates every field before building anything
(``opbench.store.results_schema``), so a truncated,
corrupt, foreign or future-version file, or one holding what no result can
have (no times, a time that is zero, negative, nan or infinite, a count that
is not a positive integer, a thread count beyond reason), raises
``ResultsFileError`` naming the file, the measurement and the field, and
nothing half-loads. What loads is usable: every Measurement prints, has
statistics and goes into a Compare.

Each result has a key (``opbench.core.identity.key``: its name, else its labels,
else its statement; its thread count, env and clock) that regression gates
match files on. Two different statements
under one key in one file would be silently pooled, so ``save`` refuses
them, naming both.

Example:
    >>> import os, tempfile
    >>> from opbench import Measurement, TaskSpec
    >>> from opbench.store.results import save, load
    >>> m = Measurement(100, [1.25e-4, 1.5e-4], TaskSpec("f()", "pass", label="demo"))
    >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
    >>> _ = save([m], path)
    >>> load(path)[0].raw_times == m.raw_times
    True
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Union

from opbench import environment as _environment
from opbench import stats
from opbench._checks import is_finite_number
from opbench._files import atomic_write_text
from opbench.core import identity
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement
from opbench.core.memory import MemoryCounts
from opbench.core.task_spec import TaskSpec
from opbench.errors import KeyCollisionError, ResultsFileError, ResultsFileWarning, warn
from opbench.store import pytest_benchmark_file, sweep_file
from opbench.store.results_schema import FORMAT, VERSION, Checker

__all__ = ["FORMAT", "VERSION", "Results", "ResultsFileError", "check_keys", "dumps", "load",
           "load_valid", "loads", "merge", "save", "to_result"]

# The largest file read (a results file of a sweep of 100,000 results is ~200 MB);
# $OPBENCH_MAX_FILE_MB moves it.
MAX_FILE_ENV = "OPBENCH_MAX_FILE_MB"
_MAX_FILE_MB = 512.0

Result = Union[Measurement, InstructionCounts, MemoryCounts]
_COUNTS = (InstructionCounts, MemoryCounts)


class Results(list):  # type: ignore[type-arg]
    """The Measurements of a results file (a list), with its ``instructions`` (a list of
    InstructionCounts), its ``memory`` (a list of MemoryCounts) and the ``environment``
    that produced them."""

    def __init__(self, measurements: Iterable[Measurement] = (),
                 environment: dict[str, Any] | None = None, version: int = VERSION,
                 instructions: Iterable[InstructionCounts] = (),
                 memory: Iterable[MemoryCounts] = ()) -> None:
        super().__init__(measurements)
        self.instructions: list[InstructionCounts] = list(instructions)
        self.memory: list[MemoryCounts] = list(memory)
        self.environment: dict[str, Any] = environment or {}
        self.version = version

    def all(self) -> list[Result]:
        """Measurements, instruction counts and memory counts together, in that order."""
        return [*self, *self.instructions, *self.memory]


# -- what can be saved ------------------------------------------------------------

def _from_torch_measurement(m: Any) -> Measurement:
    """A torch.utils.benchmark Measurement as opbench's (same fields, same numbers)."""
    spec = m.task_spec
    task_spec = TaskSpec(**{f.name: getattr(spec, f.name)
                            for f in dataclasses.fields(TaskSpec) if hasattr(spec, f.name)})
    return Measurement(m.number_per_run, list(m.raw_times), task_spec,
                       metadata=getattr(m, "metadata", None))


def to_result(item: Any) -> Result:
    """``item`` as a result opbench saves: a Measurement, InstructionCounts or MemoryCounts
    as is, a
    CallgrindStats (or a tuple of repeats) as InstructionCounts, and torch's own
    Measurement and CallgrindStats converted, so results produced by
    ``torch.utils.benchmark`` can be saved too.

    Raises:
        TypeError: anything else.
    """
    if isinstance(item, (Measurement, *_COUNTS)):
        return item
    first = item[0] if isinstance(item, tuple) and item else item
    if hasattr(first, "stmt_exclusive_stats") and hasattr(first, "counts"):
        return InstructionCounts.from_callgrind(item)
    if all(hasattr(item, a) for a in ("number_per_run", "raw_times", "task_spec")):
        return _from_torch_measurement(item)
    raise TypeError(f"save() takes Measurements, InstructionCounts, MemoryCounts or CallgrindStats "
                    f"(opbench's or torch's), got {type(item).__name__}")


def _items(results: Any) -> list[Result]:
    if isinstance(results, (Measurement, *_COUNTS)) or hasattr(results, "raw_times"):
        return [to_result(results)]
    if isinstance(results, Results):
        return results.all()
    return [to_result(r) for r in results]


def check_keys(results: Iterable[Result], where: str = "results") -> None:
    """Raises KeyCollisionError when two different statements share a key.

    Replicates of one statement (same code, same key) are fine: they pool.
    """
    seen: dict[str, Result] = {}
    for r in results:
        key = identity.key(r)
        other = seen.setdefault(key, r)
        if not identity.same_code(other, r):
            raise KeyCollisionError(
                f"{where}: two different statements share the benchmark key {key!r}: "
                f"{_describe(other)} and {_describe(r)}. They would be pooled into one row: "
                "give each a name= (Timer, fixture, --name) or different labels.")


def _describe(r: Result) -> str:
    spec = r.task_spec
    source = r.info.get("source")
    text = " ".join(spec.stmt.split())
    return f"`{text}`" + (f" ({source})" if source else "")


def merge(old: Iterable[Result], new: Iterable[Result]) -> list[Result]:
    """``old`` with every result whose key ``new`` has replaced by ``new``'s: what saving
    a partial run (``pytest -k``, an interrupted session) over a full file keeps.

    A kept result keeps the environment it was measured in: when ``old`` is a
    loaded file (``Results``), its environment goes into each kept result's
    ``info["environment"]`` (unless it has its own), since the saved file's
    environment will be the new run's.
    """
    new = list(new)
    replaced = {identity.key(r) for r in new}
    environment = getattr(old, "environment", None)
    kept = [r for r in (old.all() if isinstance(old, Results) else old)
            if identity.key(r) not in replaced]
    if environment:
        kept = [r if "environment" in r.info else
                dataclasses.replace(r, info={**r.info, "environment": environment})
                for r in kept]
    return kept + new


# -- saving -------------------------------------------------------------------

def _round_trips(value: Any) -> bool:
    try:
        return bool(json.loads(json.dumps(value, allow_nan=False)) == value)
    except (TypeError, ValueError):
        return False


def _jsonable(value: Any) -> tuple[Any, list[str]]:
    """``value`` if it survives JSON unchanged; for a dict, the entries that do, plus the
    names of those dropped (tuples, objects, non-string keys, nan would change or fail)."""
    if _round_trips(value):
        return value, []
    if isinstance(value, dict):
        kept = {k: v for k, v in value.items() if isinstance(k, str) and _round_trips(v)}
        return kept, [repr(k) for k in value if k not in kept]
    return None, ["<the whole value>"]


def _with_extras(entry: dict[str, Any], r: Result, fields: tuple[str, ...]) -> dict[str, Any]:
    """Adds the free-form fields (metadata, info) that survive JSON; warns about the rest."""
    omitted = {}
    for field in fields:
        entry[field], dropped = _jsonable(getattr(r, field))
        if dropped:
            omitted[field] = dropped
    if omitted:
        entry["omitted"] = omitted
        warn(
            ResultsFileWarning,
            f"saving {r.title!r}: not JSON-able, left out of the file: {omitted}. "
            "Keep metadata to str keys and JSON values (or pickle the Measurement).",
            stacklevel=5,
        )
    return entry


def _measurement_to_dict(m: Measurement) -> dict[str, Any]:
    bad = [t for t in m.raw_times if not (is_finite_number(t) and t > 0)]
    if bad:
        raise ValueError(f"raw_times must be finite positive numbers, got {bad[0]!r} in "
                         f"{m.title!r}")
    entry: dict[str, Any] = {
        "number_per_run": m.number_per_run,
        "raw_times": list(m.raw_times),
        "task_spec": m.task_spec.to_dict(),
        "overhead": m.overhead,
        "clock": m.clock,
    }
    _with_extras(entry, m, ("metadata", "info"))
    entry["statistics"] = stats.summary(m.times).to_dict()
    return entry


def _instructions_to_dict(c: InstructionCounts) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "number_per_run": c.number_per_run,
        "counts": list(c.counts),
        "baseline": c.baseline,
        "task_spec": c.task_spec.to_dict(),
    }
    _with_extras(entry, c, ("info",))
    entry["per_run"] = c.per_run  # for readers other than opbench; recomputed on load
    return entry


def _memory_to_dict(c: MemoryCounts) -> dict[str, Any]:
    entry = c.to_dict()
    _with_extras(entry, c, ("info",))
    # For readers other than opbench (recomputed on load): each source's figures per call.
    entry["per_call"] = {s: {f: c.per_call(f, s) for f in fields}
                         for s, fields in c.counts.items()}
    return entry


def save(
    results: Any,
    path: str | os.PathLike[str],
    *,
    environment: dict[str, Any] | None = None,
) -> Path:
    """Writes ``results`` (one result or many: Measurements, InstructionCounts,
    CallgrindStats, torch's Measurements) to ``path`` as JSON, atomically.

    ``environment`` defaults to ``opbench.environment.collect()``. Metadata or
    info entries that JSON cannot hold unchanged are left out, with a
    ResultsFileWarning. Returns the path written.

    Raises:
        TypeError: an item that is none of the above.
        ValueError: a time that is not finite and positive.
        KeyCollisionError: two different statements under one key.
        FileNotFoundError / IsADirectoryError: ``path``'s directory is missing, or
            ``path`` is a directory (checked before anything is written).
    """
    # Serialise fully before touching the disk: an error leaves no file behind.
    text = dumps(results, environment=environment)
    return atomic_write_text(Path(path), text)


def dumps(results: Any, *, environment: dict[str, Any] | None = None) -> str:
    """The text ``save`` writes: the results file format as a string (for sending
    results between processes). Same arguments and errors as ``save``."""
    items = _items(results)
    check_keys(items, "save")
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "environment": _environment.collect() if environment is None else environment,
        "measurements": [_measurement_to_dict(r) for r in items if isinstance(r, Measurement)],
        "instructions": [_instructions_to_dict(r) for r in items
                         if isinstance(r, InstructionCounts)],
        "memory": [_memory_to_dict(r) for r in items if isinstance(r, MemoryCounts)],
    }
    if not _round_trips(doc["environment"]):
        raise ValueError("environment must be a JSON-able dict")
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


# -- loading ------------------------------------------------------------------

def _measurement_from_dict(e: dict[str, Any]) -> Measurement:
    return Measurement(
        number_per_run=e["number_per_run"],
        raw_times=list(e["raw_times"]),
        task_spec=TaskSpec(**e["task_spec"]),
        metadata=e.get("metadata"),
        overhead=e.get("overhead"),
        clock=e.get("clock"),
        info=dict(e.get("info", {})),
    )


def _instructions_from_dict(e: dict[str, Any]) -> InstructionCounts:
    return InstructionCounts(
        number_per_run=e["number_per_run"],
        counts=tuple(e["counts"]),
        task_spec=TaskSpec(**e["task_spec"]),
        baseline=e.get("baseline", 0),
        info=dict(e.get("info", {})),
    )


def _memory_from_dict(e: dict[str, Any]) -> MemoryCounts:
    return MemoryCounts(number_per_run=e["number_per_run"], counts=e["counts"],
                        task_spec=TaskSpec(**e["task_spec"]), info=dict(e.get("info", {})))


def load(path: str | os.PathLike[str]) -> Results:
    """The results saved in ``path``: a list of Measurements with ``.instructions``,
    ``.memory`` and ``.environment``.

    Raises:
        ResultsFileError: truncated or corrupt JSON (with the error's position),
            not an opbench results file, a newer format version, or a missing,
            mistyped or impossible field (named with its entry). Nothing is
            returned partially.
        OSError: the file cannot be read.
    """
    p = Path(path)
    return loads(_read(p), source=str(p))


def _max_file_bytes() -> int:
    text = os.environ.get(MAX_FILE_ENV)
    try:
        return int(float(text) * (1 << 20)) if text else int(_MAX_FILE_MB * (1 << 20))
    except ValueError:
        raise ResultsFileError(f"${MAX_FILE_ENV} must be a number of megabytes, got "
                               f"{text!r}") from None


def _read(p: Path) -> bytes:
    """The bytes of ``p``, refused unread when there are more than the limit
    (``$OPBENCH_MAX_FILE_MB``): a damaged or hostile file must not take all memory."""
    if p.is_dir():
        raise ResultsFileError(f"{p}: is a directory, not a results file")
    limit = _max_file_bytes()
    with open(p, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = f.read(limit + 1) if size <= limit else b""
    if size > limit or len(data) > limit:
        raise ResultsFileError(
            f"{p}: {max(size, len(data)):,} bytes, more than the {limit:,} a results file may "
            f"have: damaged, or not a results file (${MAX_FILE_ENV} raises the limit, in MB)")
    return data


def load_valid(path: str | os.PathLike[str]) -> tuple[Results, list[str]]:
    """What of ``path`` is valid, and a line naming each part that is not: a file whose
    header is sound but some of whose results are not keeps the others (a history
    shows what it can). A file that cannot be read or parsed, or whose header is bad,
    gives no results and one line.

    >>> import tempfile, os
    >>> bad = os.path.join(tempfile.mkdtemp(), "bad.json")
    >>> _ = open(bad, "w").write('{"format": "opbench-results"')
    >>> results, problems = load_valid(bad)
    >>> len(results), "truncated or corrupt JSON" in problems[0]
    (0, True)
    """
    p = Path(path)
    try:
        data = _read(p)
    except (OSError, ResultsFileError) as e:
        return Results(), [str(e) if isinstance(e, ResultsFileError) else f"{p}: {e}"]
    try:
        return loads(data, source=str(p)), []
    except ResultsFileError as whole:
        try:
            doc = json.loads(data.decode("utf-8"))
            checker = Checker(p)
            checker.document({**doc, "measurements": [], "instructions": [], "memory": []})
        except (ValueError, RecursionError, TypeError, ResultsFileError):
            return Results(), [str(whole)]
    kept: dict[str, list[Any]] = {"measurements": [], "instructions": [], "memory": []}
    problems = []
    for field, check in checker.entry_checks():
        entries = doc.get(field) if isinstance(doc.get(field), list) else []
        for i, entry in enumerate(entries):
            try:
                check(entry, f"{field}[{i}]")
                kept[field].append(entry)
            except ResultsFileError as e:
                problems.append(str(e))
        if not isinstance(doc.get(field, []), list):
            problems.append(f"{p}: {field}: not a list")
    results = Results((_measurement_from_dict(e) for e in kept["measurements"]),
                      environment=doc["environment"], version=doc["version"],
                      instructions=(_instructions_from_dict(e) for e in kept["instructions"]),
                      memory=(_memory_from_dict(e) for e in kept["memory"]))
    try:
        check_keys(results.all(), str(p))
    except KeyCollisionError as e:
        return Results(), [str(e)]
    return results, problems


def loads(data: bytes | str, *, source: str = "<string>") -> Results:
    """``load`` from the text (or bytes) itself; ``source`` names it in errors."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    # A sweep's streamed file (JSON lines) reads as one document of its results.
    raw = sweep_file.as_results_document(raw, source, (FORMAT, VERSION))
    try:
        doc = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ResultsFileError(f"{source}: corrupt: not UTF-8 text (byte {e.start})") from None
    except json.JSONDecodeError as e:
        cause = "empty file" if not raw.strip() else e.msg
        raise ResultsFileError(
            f"{source}: truncated or corrupt JSON at line {e.lineno} column {e.colno} "
            f"(char {e.pos}): {cause}"
        ) from None
    except ValueError:  # an int longer than Python converts (sys.get_int_max_str_digits)
        limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
        raise ResultsFileError(f"{source}: corrupt: a number of more than {limit} digits") \
            from None
    except RecursionError:
        raise ResultsFileError(f"{source}: corrupt: nested too deeply") from None
    if pytest_benchmark_file.is_pytest_benchmark(doc):  # a pytest-benchmark baseline
        doc = pytest_benchmark_file.as_results_document(doc, source, (FORMAT, VERSION))
    Checker(source).document(doc)
    results = Results(
        (_measurement_from_dict(e) for e in doc["measurements"]),
        environment=doc["environment"],
        version=doc["version"],
        instructions=(_instructions_from_dict(e) for e in doc.get("instructions", [])),
        memory=(_memory_from_dict(e) for e in doc.get("memory", [])),
    )
    try:
        check_keys(results.all(), source)
    except KeyCollisionError as e:
        raise ResultsFileError(str(e)) from None
    return results
