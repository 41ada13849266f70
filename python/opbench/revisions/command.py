"""Commands run for the revisions package: each in a process group of its own, its
output captured, stopped as a whole on Ctrl-C or a timeout, and the results file it
saved collected in a ``Run``.

Each run gets a fresh results-file path in ``$OPBENCH_RESULTS_FILE``
(``RESULTS_ENV``). The pytest plugin saves the session there; a script saves there
itself (``opbench.store.results.save(ms, os.environ["OPBENCH_RESULTS_FILE"])``). A
pytest command (``pytest ...`` or ``python -m pytest ...``, ``is_pytest``) also gets
``--opbench-save=PATH`` appended by ``Checkout.run``, so revisions older than the
variable save too. A run that fails is a ``Run`` with ``ok == False``, never an
exception. Ctrl-C stops the command's whole process group (SIGINT, then SIGKILL after
a grace period) and re-raises ``KeyboardInterrupt``; ``stop_all`` stops every command
running in any thread.

Example:
    >>> import sys
    >>> returncode, output = run_group([sys.executable, "-c", "print('hi')"], Path("."),
    ...                                dict(os.environ), timeout=60, echo=False)
    >>> returncode, output.strip()
    (0, 'hi')
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

__all__ = ["RESULTS_ENV", "Run", "is_pytest", "last_lines", "run_group", "sigterm_as_interrupt",
           "stop_all"]

RESULTS_ENV = "OPBENCH_RESULTS_FILE"
# Seconds a stopped command has to exit after SIGINT (then SIGKILL).
_GRACE = 5.0
# Characters of output a Run keeps (the end: where errors are).
_OUTPUT_TAIL = 20_000


@dataclasses.dataclass(frozen=True)
class Run:
    """One command run at one revision.

    Attributes:
        revision: the revision as given ("HEAD~1", "main", "working tree").
        commit: the full commit id it resolved to (the working tree: HEAD's, with
            ``+dirty`` when it has uncommitted changes).
        command: the command as run.
        returncode: its exit status (negative: killed by that signal).
        results: the results file the run saved, or None when it saved none.
        output: the end of its stdout and stderr, interleaved.
        seconds: wall time of the run.
    """

    revision: str
    commit: str
    command: tuple[str, ...]
    returncode: int
    results: Path | None
    output: str
    seconds: float

    @property
    def ok(self) -> bool:
        """It exited with status 0 and saved a results file."""
        return self.returncode == 0 and self.results is not None

    @property
    def problem(self) -> str:
        """Why it is not ok ("" when it is), for a report."""
        if self.returncode != 0:
            how = (f"killed by signal {-self.returncode}" if self.returncode < 0
                   else f"exited with status {self.returncode}")
            return f"{how}; last output: {last_lines(self.output)}"
        if self.results is None:
            return (f"saved no results file (a script must save to ${RESULTS_ENV}; a pytest "
                    "run needs at least one benchmark)")
        return ""


def last_lines(text: str, n: int = 3) -> str:
    """The last ``n`` non-blank lines of ``text`` joined by `` | `` (a failure's gist)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return " | ".join(lines[-n:]) if lines else "(none)"


def is_pytest(command: Sequence[str]) -> bool:
    """Whether ``command`` runs pytest (``pytest ...``, ``python -m pytest ...``)."""
    if not command:
        return False
    names = ("pytest", "py.test")
    return (Path(command[0]).name in names or list(command[1:3]) == ["-m", "pytest"]
            or (len(command) > 1 and (command[1] == "-mpytest"
                                      or Path(command[1]).name in names)))


# Commands running now (in any thread), so Ctrl-C in the main thread can stop them all.
_RUNNING: set[subprocess.Popen[bytes]] = set()
_RUNNING_LOCK = threading.Lock()


def stop_all() -> None:
    """Stops every command this process is running (Ctrl-C while runs go on in threads)."""
    with _RUNNING_LOCK:
        running = list(_RUNNING)
    for proc in running:
        _stop(proc)


def run_group(command: list[str], cwd: Path, env: dict[str, str], timeout: float | None,
              echo: bool, pass_fds: tuple[int, ...] = (),
              after_spawn: Callable[[], None] | None = None) -> tuple[int, str]:
    """Runs ``command`` in a process group of its own; returns (exit status, output tail).
    Ctrl-C or the timeout stops the whole group."""
    with tempfile.TemporaryFile(mode="w+b") as log:
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE if echo else log,
                                    stderr=subprocess.STDOUT, start_new_session=True,
                                    pass_fds=pass_fds)
        except OSError as e:  # no such program, not executable: a failed run, as a shell says
            return 127, f"cannot run {command[0]!r}: {e.strerror or e}\n"
        finally:
            if after_spawn is not None:
                after_spawn()
        with _RUNNING_LOCK:
            _RUNNING.add(proc)
        try:
            if echo:
                assert proc.stdout is not None
                for chunk in iter(lambda: proc.stdout.readline(), b""):  # type: ignore[union-attr]
                    log.write(chunk)
                    sys.stdout.write(chunk.decode(errors="replace"))
                    sys.stdout.flush()
            returncode = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _stop(proc)
            returncode = proc.returncode if proc.returncode is not None else -signal.SIGKILL
            log.write(f"\n(opbench: stopped after the {timeout:g} s timeout)\n".encode())
        except BaseException:  # Ctrl-C, or anything else: never leave the command running
            _stop(proc)
            raise
        finally:
            with _RUNNING_LOCK:
                _RUNNING.discard(proc)
            if proc.stdout is not None:
                proc.stdout.close()
        log.seek(0, os.SEEK_END)
        size = log.tell()
        log.seek(max(0, size - _OUTPUT_TAIL))
        return returncode, log.read().decode(errors="replace")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to the process group (pytest saves what finished), SIGKILL after the grace."""
    for sig, wait in ((signal.SIGINT, _GRACE), (signal.SIGKILL, _GRACE)):
        if proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=wait)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM handled as Ctrl-C (KeyboardInterrupt) while the block runs: a CI runner's
    cancel then removes worktrees and keeps finished runs, as Ctrl-C does. A no-op off the
    main thread."""
    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt
    try:
        old = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
