"""Results files: Measurements saved as versioned JSON, loaded back exactly.

A file holds every raw time, the TaskSpec, the opbench fields (overhead,
clock, info), user metadata where it is JSON-able, the statistics (for
readers other than opbench; recomputed on load) and the environment that
produced it::

    {"format": "opbench-results", "version": 1,
     "environment": {...}, "measurements": [{...}, ...]}

Round trips are exact: floats are written with ``repr`` (shortest exact
form). Writes are atomic (temporary file in the same directory, fsync,
``os.replace``): a crash leaves the old file or the new one, never half of
one. Loading validates the whole file before building any Measurement, so a
truncated, corrupt, foreign or future-version file raises
``ResultsFileError`` naming the file and the problem, and nothing half-loads.
Pickling Measurements keeps working; this is the portable, inspectable form.

Example:
    >>> import os, tempfile
    >>> from opbench import Measurement, TaskSpec
    >>> from opbench.results import save, load
    >>> m = Measurement(100, [1.25e-4, 1.5e-4], TaskSpec("f()", "pass", label="demo"))
    >>> path = os.path.join(tempfile.mkdtemp(), "run.json")
    >>> _ = save([m], path)
    >>> load(path)[0].raw_times == m.raw_times
    True
"""
from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opbench import environment as _environment
from opbench import stats
from opbench._checks import is_count, is_finite_number
from opbench._files import atomic_write_text
from opbench.errors import ResultsFileError, ResultsFileWarning, warn
from opbench.measurement import Measurement, TaskSpec

__all__ = ["FORMAT", "VERSION", "Results", "ResultsFileError", "save", "load"]

FORMAT = "opbench-results"
VERSION = 1

_OPTIONAL_STR_SPEC_FIELDS = ("label", "sub_label", "description", "env")
_MEASUREMENT_KEYS = {"number_per_run", "raw_times", "task_spec", "metadata", "overhead",
                     "clock", "info", "statistics", "omitted"}


class Results(list):  # type: ignore[type-arg]
    """The Measurements of a results file (a list), with the ``environment`` that produced them."""

    def __init__(self, measurements: Iterable[Measurement] = (),
                 environment: dict[str, Any] | None = None, version: int = VERSION) -> None:
        super().__init__(measurements)
        self.environment: dict[str, Any] = environment or {}
        self.version = version


# -- saving -------------------------------------------------------------------

def _round_trips(value: Any) -> bool:
    try:
        return json.loads(json.dumps(value, allow_nan=False)) == value
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


def _measurement_to_dict(m: Measurement) -> dict[str, Any]:
    if not isinstance(m, Measurement):
        raise TypeError(f"save() takes Measurements, got {type(m).__name__}")
    bad = [t for t in m.raw_times if not (isinstance(t, (int, float)) and math.isfinite(t))]
    if bad:
        raise ValueError(f"raw_times must be finite numbers, got {bad[0]!r} in {m.title!r}")
    entry: dict[str, Any] = {
        "number_per_run": m.number_per_run,
        "raw_times": list(m.raw_times),
        "task_spec": dataclasses.asdict(m.task_spec),
        "overhead": m.overhead,
        "clock": m.clock,
    }
    omitted = {}
    for field in ("metadata", "info"):
        entry[field], dropped = _jsonable(getattr(m, field))
        if dropped:
            omitted[field] = dropped
    if omitted:
        entry["omitted"] = omitted
        warn(
            ResultsFileWarning,
            f"saving {m.title!r}: not JSON-able, left out of the file: {omitted}. "
            "Keep metadata to str keys and JSON values (or pickle the Measurement).",
            stacklevel=4,
        )
    entry["statistics"] = stats.summary(m.times).to_dict() if m.raw_times else None
    return entry


def save(
    results: Measurement | Iterable[Measurement],
    path: str | os.PathLike[str],
    *,
    environment: dict[str, Any] | None = None,
) -> Path:
    """Writes ``results`` (one Measurement or many) to ``path`` as JSON, atomically.

    ``environment`` defaults to ``opbench.environment.collect()``. Metadata or
    info entries that JSON cannot hold unchanged are left out, with a
    ResultsFileWarning. Returns the path written.

    Raises:
        TypeError: an item that is not a Measurement.
        ValueError: a non-finite raw time.
    """
    # Serialise fully before touching the disk: an error leaves no file behind.
    text = dumps(results, environment=environment)
    target = Path(path)
    atomic_write_text(target, text)
    return target


def dumps(
    results: Measurement | Iterable[Measurement],
    *,
    environment: dict[str, Any] | None = None,
) -> str:
    """The text ``save`` writes: the results file format as a string (for sending
    results between processes). Same arguments and errors as ``save``."""
    items = [results] if isinstance(results, Measurement) else list(results)
    doc = {
        "format": FORMAT,
        "version": VERSION,
        "environment": _environment.collect() if environment is None else environment,
        "measurements": [_measurement_to_dict(m) for m in items],
    }
    if not _round_trips(doc["environment"]):
        raise ValueError("environment must be a JSON-able dict")
    return json.dumps(doc, indent=1, allow_nan=False) + "\n"


# -- loading ------------------------------------------------------------------

class _Checker:
    """Validates a parsed document, naming the file and the JSON path of any problem."""

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
        entries = doc.get("measurements")
        self.expect(isinstance(entries, list), "measurements", "missing or not a list")
        for i, entry in enumerate(entries):
            self.measurement(entry, f"measurements[{i}]")

    def measurement(self, e: Any, where: str) -> None:
        self.expect(isinstance(e, dict), where, "expected an object")
        missing = {"number_per_run", "raw_times", "task_spec"} - e.keys()
        self.expect(not missing, where, f"missing keys {sorted(missing)}")
        unknown = e.keys() - _MEASUREMENT_KEYS
        self.expect(not unknown, where, f"unknown keys {sorted(unknown)}")
        self.expect(is_count(e["number_per_run"]), f"{where}.number_per_run",
                    "expected a positive int")
        times = e["raw_times"]
        self.expect(isinstance(times, list) and all(is_finite_number(t) for t in times),
                    f"{where}.raw_times", "expected a list of finite numbers")
        self.task_spec(e["task_spec"], f"{where}.task_spec")
        self.expect(e.get("metadata") is None or isinstance(e["metadata"], dict),
                    f"{where}.metadata", "expected an object or null")
        self.expect(e.get("overhead") is None or is_finite_number(e["overhead"]),
                    f"{where}.overhead", "expected a number or null")
        self.expect(e.get("clock") is None or isinstance(e["clock"], str),
                    f"{where}.clock", "expected a string or null")
        self.expect(isinstance(e.get("info", {}), dict), f"{where}.info", "expected an object")

    def task_spec(self, s: Any, where: str) -> None:
        self.expect(isinstance(s, dict), where, "expected an object")
        for key in ("stmt", "setup"):
            self.expect(isinstance(s.get(key), str), f"{where}.{key}", "missing or not a string")
        self.expect(isinstance(s.get("global_setup", ""), str), f"{where}.global_setup",
                    "expected a string")
        for key in _OPTIONAL_STR_SPEC_FIELDS:
            self.expect(s.get(key) is None or isinstance(s[key], str), f"{where}.{key}",
                        "expected a string or null")
        self.expect(is_count(s.get("num_threads", 1)), f"{where}.num_threads",
                    "expected a positive int")
        known = {f.name for f in dataclasses.fields(TaskSpec)}
        self.expect(not (s.keys() - known), where, f"unknown keys {sorted(s.keys() - known)}")


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


def load(path: str | os.PathLike[str]) -> Results:
    """The Measurements saved in ``path``, as a list with ``.environment``.

    Raises:
        ResultsFileError: truncated or corrupt JSON (with the error's position),
            not an opbench results file, a newer format version, or a missing
            or mistyped field. Nothing is returned partially.
        OSError: the file cannot be read.
    """
    p = Path(path)
    return loads(p.read_bytes(), source=str(p))


def loads(data: bytes | str, *, source: str = "<string>") -> Results:
    """``load`` from the text (or bytes) itself; ``source`` names it in errors."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
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
    _Checker(source).document(doc)
    return Results(
        (_measurement_from_dict(e) for e in doc["measurements"]),
        environment=doc["environment"],
        version=doc["version"],
    )
