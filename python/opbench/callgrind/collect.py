"""collect_callgrind: instruction counts of a Timer's statement under callgrind.

Called by ``opbench.Timer.collect_callgrind``; returns one CallgrindStats per
repeat (a single one when ``repeats`` is None), as torch does.

Why it is fast: the child runs under valgrind with instrumentation off until
the measured loop (``--instr-atstart=no``), so ``import torch`` runs at
valgrind's uninstrumented speed, and only the loop is collected
(``--collect-atstart=no`` + toggles). Output files are read directly.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from typing import Any

from opbench.callgrind import _child
from opbench.callgrind._parse import parse_callgrind_out
from opbench.callgrind.function_counts import FunctionCount, FunctionCounts
from opbench.callgrind.stats import CallgrindStats
from opbench.engines.cpp import CppEngine
from opbench.errors import CallgrindError, CallgrindUnavailableError

__all__ = ["collect_callgrind", "callgrind_unavailable_reason"]

# Instrumentation and collection both start off: the child switches them on
# around the measured loop. Line-level positions keep retained files useful to
# callgrind_annotate; per-instruction positions (torch's --dump-instr=yes) would
# only make the files larger and slower to write and read.
_VALGRIND_FLAGS = (
    "--tool=callgrind",
    "--instr-atstart=no",
    "--collect-atstart=no",
    "--dump-line=yes",
    "--dump-instr=no",
)
_TAIL = 4000  # characters of child output quoted in errors


def callgrind_unavailable_reason() -> str | None:
    """Why collect_callgrind cannot run here, or None when it can.

    >>> callgrind_unavailable_reason() is None or "valgrind" in callgrind_unavailable_reason()
    True
    """
    if not sys.platform.startswith("linux"):
        return f"collect_callgrind needs Linux (valgrind); this is {sys.platform}."
    if shutil.which("valgrind") is None:
        return ("collect_callgrind needs valgrind, which is not on PATH. Install it, e.g. "
                "`apt-get install valgrind` (Debian/Ubuntu package `valgrind`).")
    try:
        from opbench import _C
    except ImportError as e:
        return f"collect_callgrind needs opbench's native extension, which failed to import: {e}"
    if not _C.callgrind.available():
        return ("opbench._C was built without valgrind's headers (valgrind/callgrind.h), so it "
                "cannot send callgrind client requests. Install the Debian package `valgrind` "
                "(it ships the headers) and rebuild opbench.")
    return None


def _child_env() -> dict[str, str]:
    # The caller's environment, plus its import path: the child must import the
    # same opbench (and torch) even when the venv is not on PATH or installed.
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def _tail(path: str) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return text[-_TAIL:]


def _run(cmd: list[str], work: str, *, dumps_prefix: str, expected_dumps: int) -> None:
    """Runs the valgrind child; kills it on Ctrl-C; raises with its stderr on failure.

    Each repeat ends with a dump file, so counting them gives a progress bar
    (shown on a terminal, for more than one dump; see opbench.progress).
    """
    from opbench.progress import Progress

    stdout_path, stderr_path = os.path.join(work, "stdout.txt"), os.path.join(work, "stderr.txt")
    show = None if expected_dumps > 1 else False
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err, \
            Progress(expected_dumps, desc="callgrind", enabled=show) as bar:
        # Its own session: Ctrl-C reaches us, and we decide to kill it (no half-dead child).
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=_child_env(), start_new_session=True)
        try:
            while (rc := _wait(proc, 0.25 if bar.enabled else None)) is None:
                dumped = len(_dump_files(dumps_prefix))
                if dumped > bar.done:
                    bar.update(dumped - bar.done)
            bar.update(max(len(_dump_files(dumps_prefix)) - bar.done, 0))
        except BaseException:
            proc.kill()
            proc.wait()
            raise
    if rc != 0:
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        raise CallgrindError(
            f"collect_callgrind: the callgrind child process failed ({how}).\n"
            f"--- its stderr (last {_TAIL} characters) ---\n{_tail(stderr_path)}\n"
            f"--- valgrind log ---\n{_tail(os.path.join(work, 'valgrind.log'))}"
        )


def _wait(proc: subprocess.Popen[bytes], timeout: float | None) -> int | None:
    """The exit status, or None if the child is still running after ``timeout`` s."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def _dump_files(prefix: str) -> list[str]:
    """callgrind's numbered dumps (prefix.1, prefix.2, ...), in order."""
    folder, base = os.path.split(prefix)
    pattern = re.compile(re.escape(base) + r"\.(\d+)$")
    found = [(int(m.group(1)), name) for name in os.listdir(folder) if (m := pattern.match(name))]
    return [os.path.join(folder, name) for _, name in sorted(found)]


def _read(path: str, retain: bool) -> tuple[FunctionCounts, FunctionCounts, str | None]:
    with open(path) as f:
        text = f.read()
    profile = parse_callgrind_out(text.splitlines())

    def counts(by_fn: dict[str, int], inclusive: bool) -> FunctionCounts:
        # As torch (via callgrind_annotate): drop zero rows, and inclusive rows equal
        # to the program total (top-level frames that only restate it). torch drops
        # such exclusive rows too, which empties a C++ statement the compiler inlined
        # whole into the loop (one function holds every instruction): counts of 0.
        rows = (FunctionCount(c, fn) for fn, c in by_fn.items()
                if c and not (inclusive and c == profile.total))
        return FunctionCounts(tuple(sorted(rows, reverse=True)), inclusive=inclusive)

    raw = text if retain else None
    return counts(profile.inclusive, True), counts(profile.exclusive, False), raw


def _built_with_debug_symbols() -> bool:
    # torch's warning is about torch's build; only relevant where torch is loaded.
    torch = sys.modules.get("torch")
    if torch is None:
        return True
    found = re.search("BUILD_TYPE=(.+),", torch.__config__.show())
    return found is not None and found.group(1).split(",")[0] == "RelWithDebInfo"


def _cpp_child_command(timer: Any, work: str, *, number: int, repeats: int) -> list[str]:
    """argv of the child for a C++ timer: Python driving the timer's cached library,
    which toggles collection around its own loop (see _child.cpp_script)."""
    engine = timer.engine  # CppEngine; the parent compiles, so errors surface here
    library = engine.library_path()
    if not engine.callgrind_available():
        raise CallgrindUnavailableError(
            f"the compiled C++ statement ({library}) was built without valgrind's headers "
            "(valgrind/callgrind.h), so it cannot toggle callgrind's collection. Install the "
            "Debian package `valgrind` (it ships the headers) and delete the cached library.")
    path = os.path.join(work, "child.py")
    with open(path, "w") as f:
        f.write(_child.cpp_script(library=str(library), number=number, repeats=repeats,
                                  import_torch=engine.needs_torch,
                                  num_threads=timer.task_spec.num_threads))
    return [sys.executable, path]


def collect_callgrind(
    timer: Any,
    *,
    number: int,
    repeats: int | None,
    collect_baseline: bool,
    retain_out_file: bool,
) -> CallgrindStats | tuple[CallgrindStats, ...]:
    """Counts the instructions of ``number`` runs of the timer's statement, ``repeats`` times.

    Example (needs valgrind):
        >>> import opbench  # doctest: +SKIP
        >>> t = opbench.Timer("x + 1", setup="x = 1")  # doctest: +SKIP
        >>> t.collect_callgrind(number=100).counts()  # doctest: +SKIP
    """
    reason = callgrind_unavailable_reason()
    if reason is not None:
        raise CallgrindUnavailableError(reason)
    spec = timer.task_spec
    n_repeats = 1 if repeats is None else repeats
    is_python = not isinstance(timer.engine, CppEngine)
    collect_baseline = collect_baseline and is_python

    with tempfile.TemporaryDirectory(prefix="opbench_callgrind_") as work:
        out_prefix = os.path.join(work, "callgrind.out")
        if is_python:
            cmd = [sys.executable, _write_python_child(timer, work, number=number,
                                                      repeats=n_repeats,
                                                      collect_baseline=collect_baseline)]
        else:
            cmd = _cpp_child_command(timer, work, number=number, repeats=n_repeats)
        expected = n_repeats + int(collect_baseline)
        _run(["valgrind", *_VALGRIND_FLAGS, f"--callgrind-out-file={out_prefix}",
              f"--log-file={os.path.join(work, 'valgrind.log')}", *cmd], work,
             dumps_prefix=out_prefix, expected_dumps=expected)

        files = _dump_files(out_prefix)
        if len(files) != expected:
            raise CallgrindError(f"collect_callgrind: expected {expected} callgrind dumps, found "
                               f"{len(files)}.\n{_tail(os.path.join(work, 'valgrind.log'))}")
        results = [_read(path, retain_out_file) for path in files]

    if collect_baseline:
        base_incl, base_excl, _ = results.pop()
    else:
        base_incl = FunctionCounts((), inclusive=True)
        base_excl = FunctionCounts((), inclusive=False)
    debug = _built_with_debug_symbols()
    stats = tuple(
        CallgrindStats(
            task_spec=spec,
            number_per_run=number,
            built_with_debug_symbols=debug,
            baseline_inclusive_stats=base_incl,
            baseline_exclusive_stats=base_excl,
            stmt_inclusive_stats=incl,
            stmt_exclusive_stats=excl,
            stmt_callgrind_out=raw,
        )
        for incl, excl, raw in results
    )
    return stats[0] if repeats is None else stats


def _write_python_child(timer: Any, work: str, *, number: int, repeats: int,
                        collect_baseline: bool) -> str:
    spec = timer.task_spec
    args = timer.kwargs  # as given: globals keep their CopyIfCallgrind wrappers
    data = os.path.join(work, "data")
    os.mkdir(data)
    load_code, needs_torch = _child.globals_loader(args["globals"] or {}, data)
    stmt, setup = spec.stmt, spec.setup
    loaders = [load_code]
    if callable(args["stmt"]):
        loaders.append(_child.callable_loader(_child.STMT_FN, args["stmt"], data, "stmt"))
        stmt = f"{_child.STMT_FN}()"
    if callable(args["setup"]):
        loaders.append(_child.callable_loader(_child.SETUP_FN, args["setup"], data, "setup"))
        setup = f"{_child.SETUP_FN}()"
    import_torch = needs_torch or _child.mentions_torch(stmt, setup, spec.global_setup or "")
    text = _child.script(
        stmt=stmt, setup=setup or "pass", global_setup=spec.global_setup or "",
        load_code="\n".join(l for l in loaders if l), number=number, repeats=repeats,
        collect_baseline=collect_baseline, import_torch=import_torch,
        num_threads=spec.num_threads,
    )
    path = os.path.join(work, "child.py")
    with open(path, "w") as f:
        f.write(text)
    return path
