"""Sweep files: a sweep's results streamed to disk one line per result, as they arrive.

``run_all(..., results_path=PATH)`` writes JSON Lines: a header, then one
line per finished task::

    {"format": "opbench-sweep", "version": 1, "method": ..., "kwargs": {...},
     "environment": {...the driver's...}}
    {"key": "3f2a...", "index": 0, "status": "ok",
     "result": {...an opbench results document: the worker's environment, one measurement...}}
    {"key": "9b1c...", "index": 1, "status": "failed", "title": ..., "error": ...,
     "traceback": ..., "worker": ..., "attempts": 2, "environment": {...} or null}

Each line is appended whole by one ``write`` on a file opened for appending,
then flushed to disk, so the file is readable while the sweep runs and a
crash or Ctrl-C loses nothing already written: at worst the line being
written is cut short, and readers skip such a last line (with a
``ResultsFileWarning``); resuming removes it. One sweep writes a file at a
time (an exclusive ``flock``). A task's ``key`` is a hash of its TaskSpec
and of how many earlier timers of the sweep share that TaskSpec, so a
resumed sweep skips exactly what the file holds.

``opbench.load`` and ``python -m opbench show`` read a sweep file as one
results document (``as_results_document``): its successful measurements in
the order of the sweep's timers, each with its worker's environment in ``info["environment"]``,
and as ``environment`` the facts all workers share (a fact that differs
lists its values, ``"a, b"``). ``failures`` lists the tasks that never
succeeded. The writer takes results documents (``opbench.store.results.dumps``),
so this module knows lines, not Measurements.

Example:
    >>> import json, os, tempfile
    >>> from opbench import Measurement, TaskSpec, load
    >>> from opbench.store.results import dumps
    >>> from opbench.store.sweep_file import SweepWriter
    >>> path = os.path.join(tempfile.mkdtemp(), "sweep.jsonl")
    >>> m = Measurement(100, [1e-4, 2e-4], TaskSpec("f()", "pass", label="demo"))
    >>> with SweepWriter(path, "timeit", {"number": 100}) as out:
    ...     out.add_result("k0", 0, json.loads(dumps(m, environment={"hostname": "a"})))
    >>> loaded = load(path)
    >>> loaded[0].raw_times == m.raw_times, loaded.environment["hostname"]
    (True, 'a')
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from opbench import environment as _environment
from opbench.errors import ResultsFileError, ResultsFileWarning, warn

__all__ = ["FORMAT", "VERSION", "SweepWriter", "as_results_document", "failures", "is_sweep",
           "jsonish"]

FORMAT = "opbench-sweep"
VERSION = 1
# Facts of each worker that do not describe the machine, left out of the summary.
_PER_WORKER = ("worker", "slot")


def jsonish(value: Any) -> Any:
    """``value`` as JSON would store it, ``repr`` for what JSON cannot hold (a callback)."""
    return json.loads(json.dumps(value, default=repr, sort_keys=True))


def is_sweep(data: bytes) -> bool:
    """Whether ``data`` (a file's bytes) is a sweep file: its first line is the header."""
    first = data.split(b"\n", 1)[0]
    if b'"' + FORMAT.encode() + b'"' not in first:
        return False
    try:
        header = json.loads(first)
    except ValueError:
        return False
    return isinstance(header, dict) and header.get("format") == FORMAT


def _parse(data: bytes, source: str) -> tuple[dict[str, Any], list[dict[str, Any]], int]:
    """The header, the entries, and the length of the complete lines (a last line
    without its newline was cut short by a crash, or is being written)."""
    complete = data.rfind(b"\n") + 1
    lines = data[:complete].split(b"\n")[:-1]
    if not lines:
        raise ResultsFileError(f"{source}: no sweep header line")
    entries = []
    for number, line in enumerate(lines, 1):
        try:
            entry = json.loads(line)
        except ValueError as e:  # a JSONDecodeError, or an int of more digits than Python reads
            raise ResultsFileError(f"{source}: line {number}: corrupt JSON ({e})") from None
        except RecursionError:
            raise ResultsFileError(f"{source}: line {number}: corrupt: nested too deeply") \
                from None
        if not isinstance(entry, dict):
            raise ResultsFileError(f"{source}: line {number}: expected a JSON object")
        entry["_line"] = number
        entries.append(entry)
    header = entries.pop(0)
    if header.get("format") != FORMAT:
        raise ResultsFileError(f"{source}: not an opbench sweep file (format "
                               f"{header.get('format')!r}, expected {FORMAT!r})")
    version = header.get("version")
    if not isinstance(version, int) or version > VERSION:
        raise ResultsFileError(f"{source}: sweep file version {version!r}; this opbench reads "
                               f"up to version {VERSION}: upgrade opbench")
    for entry in entries:
        where = f"{source}: line {entry['_line']}"
        if not isinstance(entry.get("key"), str) or entry.get("status") not in ("ok", "failed"):
            raise ResultsFileError(f"{where}: expected a key and a status 'ok' or 'failed'")
        if entry["status"] == "ok" and not isinstance(entry.get("result"), dict):
            raise ResultsFileError(f"{where}: a result line without its result")
    if complete < len(data):
        warn(ResultsFileWarning,
             f"{source}: skipped an incomplete last line ({len(data) - complete} bytes): a "
             "sweep is writing it, or one stopped in the middle of writing it")
    return header, entries, complete


def _with_environment(doc: dict[str, Any]) -> dict[str, Any]:
    """A result line's document with the worker's environment copied into each
    measurement's ``info["environment"]``, where it stays when documents merge."""
    measurements = [{**m, "info": {**(m.get("info") or {}), "environment": doc.get("environment")}}
                    if isinstance(m, dict) else m for m in doc.get("measurements") or []]
    return {**doc, "measurements": measurements}


def _completed(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """key -> results document of each task that succeeded (its last success: a result
    measured again because the machine was busy replaces the first), in the order of
    the sweep's timers (results arrive in any order)."""
    done: dict[str, dict[str, Any]] = {}
    ordered = sorted(entries, key=lambda e: e["index"] if isinstance(e.get("index"), int) else -1)
    for entry in ordered:
        if entry["status"] == "ok":
            done[entry["key"]] = _with_environment(entry["result"])
    return done


def _summary(environments: list[dict[str, Any]]) -> dict[str, Any]:
    """The facts every environment shares; a fact that differs lists its values."""
    summary: dict[str, Any] = {}
    keys = dict.fromkeys(k for env in environments for k in env if k not in _PER_WORKER)
    for key in keys:
        values = dict.fromkeys(json.dumps(env.get(key), sort_keys=True) for env in environments)
        if len(values) == 1:
            summary[key] = environments[0].get(key)
        else:
            summary[key] = ", ".join(sorted(str(json.loads(v)) for v in values))
    return summary


def as_results_document(data: bytes, source: str, format_version: tuple[str, int]) -> bytes:
    """A sweep file's bytes as one results document (``opbench.store.results``' format, given
    as ``format_version``), for ``opbench.store.results.loads``; other bytes unchanged."""
    if not is_sweep(data):
        return data
    _, entries, _ = _parse(data, source)
    docs = list(_completed(entries).values())
    versions = [d["version"] for d in docs if isinstance(d.get("version"), int)]
    merged = {
        "format": format_version[0],
        "version": max([format_version[1], *versions]),
        "environment": _summary([d.get("environment") or {} for d in docs]),
        "measurements": [m for d in docs for m in d["measurements"]],
    }
    return json.dumps(merged).encode()


def failures(data: bytes, source: str = "<string>") -> list[dict[str, Any]]:
    """The failed-task lines of a sweep file whose task never succeeded."""
    _, entries, _ = _parse(data, source)
    done = _completed(entries)
    return [{k: v for k, v in e.items() if k != "_line"} for e in entries
            if e["status"] == "failed" and e["key"] not in done]


class SweepWriter:
    """Appends a sweep's results to ``path``, one whole line each, as they arrive.

    Args:
        path: the file; created with its header when missing or empty.
        method, kwargs: what the sweep calls on each Timer (in the header; a
            resumed sweep must call the same).
        resume: continue a file that already holds results. Without it, such
            a file is refused rather than overwritten.

    ``completed`` maps the key of each task the file already holds to its
    results document (the worker's environment in each measurement's info). Use as a
    context manager (``close()`` releases the file).

    Raises:
        ResultsFileError: the file holds results and ``resume`` is False; it
            is not a sweep file; it was written for another method or
            keywords; or another sweep is writing it.
    """

    def __init__(self, path: str | os.PathLike[str], method: str, kwargs: dict[str, Any],
                 *, resume: bool = False) -> None:
        self.path = Path(path)
        if not self.path.parent.is_dir():
            raise FileNotFoundError(f"cannot write {self.path}: directory {self.path.parent} "
                                    "does not exist")
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            self._open(method, jsonish(kwargs), resume)
        except BaseException:
            os.close(self._fd)
            raise

    def _open(self, method: str, kwargs: Any, resume: bool) -> None:
        import fcntl

        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ResultsFileError(f"{self.path}: another sweep is writing this file; wait "
                                   "for it, or choose another path") from None
        data = self.path.read_bytes()
        self.completed: dict[str, dict[str, Any]] = {}
        if data.strip() and not is_sweep(data):
            raise ResultsFileError(f"{self.path}: exists and is not an opbench sweep file; "
                                   "choose another path (it is left as it is)")
        header, entries, complete = _parse(data, str(self.path)) if data.strip() else ({}, [], 0)
        if not entries:  # new, or a sweep that stopped before its first result
            os.ftruncate(self._fd, 0)
            self._append({"format": FORMAT, "version": VERSION, "method": method,
                          "kwargs": kwargs, "environment": _environment.collect()})
            return
        if not resume:
            raise ResultsFileError(
                f"{self.path}: already holds {len(entries)} result line(s) of a sweep. Pass "
                "resume=True (--resume) to continue it, skipping what it holds, or choose "
                "another path.")
        if (header.get("method"), header.get("kwargs")) != (method, kwargs):
            raise ResultsFileError(
                f"{self.path}: was written by run_all(method={header.get('method')!r}, "
                f"**{header.get('kwargs')}); this sweep calls method={method!r} with "
                f"**{kwargs}. Resume with the same method and keywords, or use another path.")
        self.completed = _completed(entries)
        if complete < len(data):
            os.ftruncate(self._fd, complete)  # the cut-short line of a crashed sweep

    def _append(self, entry: dict[str, Any]) -> None:
        line = (json.dumps(entry, allow_nan=False, separators=(",", ":")) + "\n").encode()
        view = memoryview(line)
        while view:  # O_APPEND: every write lands at the end, after the previous one
            view = view[os.write(self._fd, view):]
        os.fsync(self._fd)

    def add_result(self, key: str, index: int, document: dict[str, Any]) -> None:
        """Appends a successful task's result: a results document (``opbench.store.results``)
        of its Measurement, with the worker's environment as the document's."""
        self._append({"key": key, "index": index, "status": "ok", "result": document})

    def add_failure(self, key: str, index: int, failure: dict[str, Any]) -> None:
        """Appends a failed task: its title, error, traceback, worker, attempts, environment."""
        self._append({"key": key, "index": index, "status": "failed", **jsonish(failure)})

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # drops the lock
            self._fd = -1

    def __enter__(self) -> SweepWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
