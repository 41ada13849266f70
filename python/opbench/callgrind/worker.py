"""The caller's handle on a callgrind worker: one valgrind process serving many statements.

Starting valgrind, starting Python under it and importing torch is most of a
collection's cost (about 10 s of the 13 s of ``x + 1`` on a tensor), and it
is the same for every statement. A :class:`Worker` pays it once: it starts
``_worker_process.main`` under valgrind, a fork server that runs each Job it is sent
in a child of its own (see ``_worker_process``). Each job's loops end in callgrind
dumps, which ``Worker.run`` returns as file names. Sweeps
(``collect_callgrind_all``) share one worker per process (:func:`shared`),
replaced when it died or when the caller's environment or import path
changed (the worker's are the caller's).

Faults: the statement's own exception comes back as :class:`StatementFailed`,
a child that died (a crash in a C extension) as :class:`StatementCrashed`;
the worker serves the next job either way. A worker that dies raises
:class:`WorkerDied`. Ctrl-C (any exception while waiting) kills the worker
and its child and removes their files.
"""
from __future__ import annotations

import atexit
import os
import pickle
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable
from typing import Any, Callable

from opbench.callgrind import _worker_process
from opbench.callgrind._child import Job
from opbench.errors import CallgrindError

__all__ = [
    "StatementCrashed",
    "StatementFailed",
    "Worker",
    "WorkerDied",
    "discard_shared",
    "shared",
]

# Instrumentation and collection both start off: the worker switches them on
# around the measured loops. Line-level positions keep retained files useful to
# callgrind_annotate; per-instruction positions (torch's --dump-instr=yes) would
# only make the files larger and slower to write and read.
VALGRIND_FLAGS = (
    "--tool=callgrind",
    "--instr-atstart=no",
    "--collect-atstart=no",
    "--dump-line=yes",
    "--dump-instr=no",
)
_TAIL = 4000  # characters of the worker's output quoted in errors
_POLL_S = 0.25  # how often a waiting caller reports progress
_EXIT_WAIT_S = 30.0


class StatementFailed(Exception):
    """The statement raised in the worker (which goes on serving). Internal: callers
    turn it into the statement's own exception (``exception()``) or a CallgrindError."""

    def __init__(self, pickled: bytes | None, text: str, traceback: str) -> None:
        super().__init__(text)
        self.pickled, self.text, self.traceback = pickled, text, traceback

    def exception(self) -> BaseException:
        """The statement's exception, rebuilt, with the worker's traceback as its cause."""
        error: BaseException | None = None
        if self.pickled is not None:
            try:
                error = pickle.loads(self.pickled)
            except Exception:  # a class the caller cannot import: fall back to text
                error = None
        if error is None:
            error = CallgrindError(f"the statement raised {self.text}")
        error.__cause__ = ChildTraceback(self.traceback)
        return error


class ChildTraceback(Exception):
    """Holds the worker's traceback text; shown as the cause of the statement's error."""

    def __str__(self) -> str:
        return "\n\n(in the callgrind worker)\n" + self.args[0].rstrip()


class StatementCrashed(Exception):
    """The statement's child process died (``how``: the signal or exit status;
    ``details``: its output and valgrind's log). Internal (callers raise CallgrindError)."""

    def __init__(self, how: str, details: str) -> None:
        super().__init__(how)
        self.how, self.details = how, details


class WorkerDied(Exception):
    """The worker process ended without answering. Internal (callers raise CallgrindError)."""

    def __init__(self, how: str, details: str) -> None:
        super().__init__(how)
        self.how, self.details = how, details


def child_env() -> dict[str, str]:
    # The caller's environment, plus its import path: the child must import the
    # same opbench (and torch) even when the venv is not on PATH or installed.
    env = dict(os.environ)
    paths = [p for p in sys.path if p]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


# Variables that change all the time without changing what a statement does (pytest
# names the running test in one): a worker is not replaced for them.
_VOLATILE = frozenset({"PYTEST_CURRENT_TEST"})


def _environment_key() -> tuple[Any, ...]:
    """What a worker inherited from its caller: a worker is reused only while it matches."""
    env = sorted((k, v) for k, v in child_env().items() if k not in _VOLATILE)
    return (sys.executable, os.getcwd(), tuple(env))


def _tail(path: str, label: str) -> str:
    try:
        with open(path, errors="replace") as f:
            text = f.read()[-_TAIL:]
    except OSError:
        return ""
    return f"--- {label} (last {_TAIL} characters) ---\n{text}\n" if text.strip() else ""


def dump_files(prefix: str) -> list[str]:
    """callgrind's numbered dumps (prefix.1, prefix.2, ...), in order."""
    folder, base = os.path.split(prefix)
    pattern = re.compile(re.escape(base) + r"\.(\d+)$")
    found = [(int(m.group(1)), name) for name in os.listdir(folder) if (m := pattern.match(name))]
    return [os.path.join(folder, name) for _, name in sorted(found)]


def _describe(status: int) -> str:
    """A wait status as words: how the statement's process ended."""
    if os.WIFSIGNALED(status):
        return f"killed by signal {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exit status {os.WEXITSTATUS(status)}, without reporting a result"


def _remove(*paths: str) -> None:
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


class Worker:
    """One valgrind process running ``_worker_process.main``; serves Jobs one at a time.

    Example (needs valgrind; a statement with two repeats: two dump files)::

        >>> import tempfile, opbench
        >>> from opbench.callgrind._child import python_job
        >>> with tempfile.TemporaryDirectory() as data, Worker() as w:
        ...     job = python_job(opbench.Timer("sorted(range(10))"), data, number=10,
        ...                      repeats=2, collect_baseline=False)
        ...     [os.path.basename(f).rsplit(".", 1)[1] for f in w.run(job)]
        ['1', '2']
    """

    def __init__(self, torch: bool = False, preload: Iterable[str] = ()) -> None:
        self.dir = tempfile.mkdtemp(prefix="opbench_callgrind_")
        # Imported once in the worker, for all its statements: torch if asked, then `preload`.
        self.torch = torch
        self._preload = (["torch"] if torch else []) + list(preload)
        self.key = _environment_key()
        self._proc: subprocess.Popen[bytes] | None = None
        self._req: int | None = None
        self._rep: int | None = None
        try:
            self._start()
        except BaseException:
            self.kill()
            raise

    def _path(self, name: str, pid: int | str) -> str:
        return os.path.join(self.dir, name.replace("%p", str(pid)))

    def _start(self) -> None:
        with open(os.path.join(self.dir, _worker_process.PRELOAD_FILE), "w") as f:
            f.write("\n".join(self._preload))
        req_r, self._req = os.pipe()
        self._rep, rep_w = os.pipe()
        cmd = ["valgrind", *VALGRIND_FLAGS,
               f"--callgrind-out-file={self._path('callgrind.out.%p', '%p')}",
               f"--log-file={self._path('valgrind.%p.log', '%p')}", sys.executable, "-c",
               "from opbench.callgrind._worker_process import main; main()",
               str(req_r), str(rep_w), self.dir]
        try:
            with open(self._path("worker.log", ""), "wb") as log:
                # Its own session: Ctrl-C reaches us, and we decide to kill it (and its child).
                self._proc = subprocess.Popen(
                    cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=child_env(),
                    pass_fds=(req_r, rep_w), start_new_session=True)
        finally:
            os.close(req_r)
            os.close(rep_w)
        while self._reply(None)[0] != "ready":  # after its warm-up turn's messages
            pass

    @property
    def pid(self) -> int:
        """The worker's process id (also its process group's: its children share it)."""
        assert self._proc is not None
        return self._proc.pid

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def _died(self) -> WorkerDied:
        assert self._proc is not None
        try:
            rc = self._proc.wait(_EXIT_WAIT_S)
        except subprocess.TimeoutExpired:  # pipe closed but still running: end it
            self.kill()
            rc = self._proc.wait()
        how = f"signal {signal.Signals(-rc).name}" if rc < 0 else f"exit status {rc}"
        details = (_tail(self._path("worker.log", ""), "its output")
                   + _tail(self._path("valgrind.%p.log", self._proc.pid), "valgrind's log"))
        return WorkerDied(how, details)

    def _reply(self, on_wait: Callable[[], None] | None) -> Any:
        """The worker's next message; calls ``on_wait()`` every 0.25 s while waiting."""
        assert self._rep is not None
        while True:
            ready, _, _ = select.select([self._rep], [], [], _POLL_S)
            if ready:
                message = _worker_process.recv(self._rep)
                if message is None:
                    raise self._died()
                return message
            if on_wait is not None:
                on_wait()

    def run(self, job: Job, on_dump: Callable[[int], None] | None = None) -> list[str]:
        """Runs one job; returns its dump files (``job.dumps`` of them, in order).

        Raises StatementFailed or StatementCrashed (the worker goes on), or
        WorkerDied. ``on_dump`` is called with the number of the job's dumps
        written so far, every 0.25 s.
        """
        if not self.alive:
            raise self._died()
        assert self._req is not None
        with open(os.path.join(self.dir, _worker_process.JOB_FILE), "wb") as f:
            pickle.dump(job, f, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            os.write(self._req, b"J")
        except BrokenPipeError:
            raise self._died() from None
        pid = self._expect("started")[1]
        prefix = self._path("callgrind.out.%p", pid)
        log, valgrind_log = self._path("job.%p.log", pid), self._path("valgrind.%p.log", pid)
        try:
            outcome = self._reply(None if on_dump is None
                                  else lambda: on_dump(len(dump_files(prefix))))
            status = outcome[1] if outcome[0] == "exited" else self._expect("exited")[1]
            files = dump_files(prefix)
            if outcome[0] == "exited":
                _remove(*files)
                raise StatementCrashed(_describe(status), _tail(log, "its output")
                                       + _tail(valgrind_log, "valgrind's log"))
            if outcome[0] == "error":
                _remove(*files)
                raise StatementFailed(*outcome[1:])
            if len(files) != job.dumps:
                _remove(*files)
                raise CallgrindError(
                    f"collect_callgrind: expected {job.dumps} callgrind dumps, found "
                    f"{len(files)}.\n{_tail(valgrind_log, 'valgrind log')}")
        finally:
            # The child's output, valgrind's log and the dump written at its exit.
            _remove(log, valgrind_log, prefix)
        return files

    def _expect(self, kind: str) -> Any:
        message = self._reply(None)
        if message[0] != kind:
            raise CallgrindError(f"callgrind worker: expected {kind!r}, got {message!r}")
        return message

    def __enter__(self) -> Worker:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        # After a statement's own failure the worker is idle and exits when asked;
        # after anything else (Ctrl-C mid-statement) it is killed, child and all.
        if kind is None or issubclass(kind, (StatementFailed, StatementCrashed)):
            self.close()
        else:
            self.kill()

    def close(self) -> None:
        """Asks the worker to exit, then removes its files (kills it if it does not exit)."""
        if self.alive and self._req is not None:
            try:
                os.write(self._req, b"X")
                assert self._proc is not None
                self._proc.wait(_EXIT_WAIT_S)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def kill(self) -> None:
        """Ends the worker and its child now (if running) and removes their files.
        Safe to call twice."""
        if self._proc is not None and self._proc.returncode is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)  # its session: the child too
            except ProcessLookupError:
                pass
            self._proc.wait()
        for fd in (self._req, self._rep):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._req = self._rep = None
        shutil.rmtree(self.dir, ignore_errors=True)


# -- the worker a process's sweeps share --------------------------------------------------

_shared: Worker | None = None
lock = threading.Lock()  # held by a sweep for its whole length


def shared(torch: bool, preload: Iterable[str] = ()) -> Worker:
    """The process's shared worker, started (or replaced) as needed: with torch imported
    when ``torch``, and when started, the modules in ``preload``. Call with ``lock`` held."""
    global _shared
    w = _shared
    if w is not None and (not w.alive or w.key != _environment_key() or (torch and not w.torch)):
        discard_shared()
        w = None
    if w is None:
        w = _shared = Worker(torch, preload)
    return w


def discard_shared() -> None:
    """Ends the shared worker (if any); the next sweep starts a new one."""
    global _shared
    w, _shared = _shared, None
    if w is not None:
        w.close()


def kill_shared() -> None:
    """Kills the shared worker at once (Ctrl-C) and removes its files."""
    global _shared
    w, _shared = _shared, None
    if w is not None:
        w.kill()


atexit.register(discard_shared)
