"""Sessions this pytest command hands to other processes, before it runs any test itself
(``take_over``, the plugin's ``pytest_cmdline_main``); this process exits with their
status.

* ``--opbench-base REV``: the pytest face of ``opbench ab`` (``opbench.revisions.session``).
  This same pytest command, less the A/B options, runs on REV and on the working tree in
  interleaved rounds; this process prints the report (and writes ``--opbench-report``).
* ``--opbench-mode=instructions``: the whole session runs again under callgrind.
* ``--opbench-mode=memory``: the whole session runs again in a process started with
  opbench's allocation counter preloaded (``opbench.memory.counter``). There, each
  benchmark's memory per call is counted where the test built it
  (``opbench.memory.counting``): closures over fixtures need no pickling. The re-run does
  no timing: time-mode figures are untouched.

The two re-runs differ only in their data (``_RERUNS``): the variable that marks the re-run
session, why the mode cannot run here, and the command and environment it runs with.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

# Options of the session that `--opbench-base` runs itself, not passed to its runs.
_AB_OPTIONS = ("--opbench-base", "--opbench-rounds", "--opbench-wave", "--opbench-report", "--opbench-format",
               "--opbench-fail-above", "--opbench-inconclusive", "--opbench-mode")
# Set in the environment of a session re-run under callgrind (instruction mode).
_UNDER_CALLGRIND = "OPBENCH_PYTEST_UNDER_CALLGRIND"
# Set in the environment of the re-run session (memory mode).
_PRELOADED = "OPBENCH_PYTEST_MEMORY"
# torch's OpenMP workers sleep as soon as a parallel region ends instead of spinning
# (a spinning worker's instructions would be counted with the statement's, differently
# every repeat, and under valgrind it slows the whole session); a variable the user
# set wins.
_QUIET_POOLS = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}


def take_over(config: pytest.Config) -> int | None:
    """With --opbench-base, runs the A/B session and returns its status; in instruction or
    memory mode, re-runs the session as that mode needs and returns the re-run's status;
    None when this process runs the tests itself."""
    base = config.getoption("opbench_base")
    if base is not None:
        return _ab_main(config, base)
    return _rerun(config, config.getoption("opbench_mode"))


def _this_command() -> list[str]:
    """The command line that started this pytest (interpreter first)."""
    return list(getattr(sys, "orig_argv", None) or [sys.executable, "-m", "pytest", *sys.argv[1:]])


def _suspend_capture(config: pytest.Config) -> None:
    """Gives the terminal to the processes this one starts."""
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)


@dataclass(frozen=True)
class _Rerun:
    """How a mode re-runs the session."""

    marker: str  # set in the re-run's environment: that session runs the tests itself
    unavailable: Callable[[], str | None]  # why the mode cannot run here, or None
    # The command (given this pytest's, interpreter first) and environment of the re-run,
    # for as long as it runs.
    launch: Callable[[list[str]], contextlib.AbstractContextManager[tuple[list[str], dict[str, str]]]]


def _rerun(config: pytest.Config, mode: str) -> int | None:
    """In instruction or memory mode, runs this same pytest command as the mode needs and
    returns its status (unless this already is that run); None otherwise."""
    how = _RERUNS.get(mode)
    if how is None or os.environ.get(how.marker) or config.getoption("opbench_disable"):
        return None
    if config.getoption("numprocesses", None):
        raise pytest.UsageError(f"--opbench-mode={mode} counts in one process: drop -n "
                                "(counts do not depend on load, so nothing is lost)")
    reason = how.unavailable()
    if reason is not None:
        raise pytest.UsageError(f"--opbench-mode={mode}: {reason}")
    _suspend_capture(config)
    with how.launch(_this_command()) as (command, env):
        env[how.marker] = "1"
        return subprocess.call(command, env=env)


def _callgrind_unavailable() -> str | None:
    from opbench.callgrind.collect import callgrind_unavailable_reason

    return callgrind_unavailable_reason()


@contextlib.contextmanager
def _under_callgrind(argv: list[str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    from opbench.callgrind.in_process import OUT_PREFIX_ENV
    from opbench.revisions.layout import LAYOUT_ENV

    with tempfile.TemporaryDirectory(prefix="opbench_pytest_callgrind_") as work:
        prefix = os.path.join(work, "callgrind.out")
        # PYTHONHASHSEED fixed and no layout pad: dict and set layouts, hence counts,
        # repeat exactly (a random pad is for timed runs, to sample placements).
        env = dict(_QUIET_POOLS, **os.environ)
        env.pop(LAYOUT_ENV, None)
        env.update({OUT_PREFIX_ENV: prefix, "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")})
        yield (["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                f"--callgrind-out-file={prefix}", f"--log-file={prefix}.log",
                sys.executable, *argv[1:]], env)


def _counter_unavailable() -> str | None:
    from opbench.memory import counter

    return counter.unavailable_reason()


@contextlib.contextmanager
def _with_counter(argv: list[str]) -> Iterator[tuple[list[str], dict[str, str]]]:
    from opbench.memory import counter

    yield [sys.executable, *argv[1:]], counter.preload_env()


_RERUNS = {"instructions": _Rerun(_UNDER_CALLGRIND, _callgrind_unavailable, _under_callgrind),
           "memory": _Rerun(_PRELOADED, _counter_unavailable, _with_counter)}


def check_counter() -> None:
    """In memory mode's re-run session: the counter must have been loaded first (a loader
    that ignored LD_PRELOAD would give figures without the native heap); the processes the
    tests start get the user's own LD_PRELOAD back."""
    from opbench.memory import counter

    counter.restore_environment()
    if os.environ.get(_PRELOADED) and not counter.preloaded():
        raise pytest.UsageError("--opbench-mode=memory: the session was re-run with the "
                                "allocation counter in LD_PRELOAD, but the dynamic loader "
                                "ignored it (a set-user-ID or statically linked Python)")


def _without(argv: list[str], options: tuple[str, ...]) -> list[str]:
    """``argv`` less each of ``options`` and its value (``--opt VALUE`` or ``--opt=VALUE``)."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in options:
            skip = "=" not in arg
            continue
        out.append(arg)
    return out


def _ab_threshold(config: pytest.Config) -> float:
    """``--opbench-base``'s options checked; the threshold (default 5%)."""
    from opbench.integrations.cli import UsageError, parse_fraction

    opt = config.getoption
    for clash in ("opbench_compare", "opbench_save", "opbench_autosave"):
        if opt(clash):
            raise pytest.UsageError(f"--opbench-base runs its own rounds: drop "
                                    f"--{clash.replace('_', '-')}")
    if opt("opbench_disable") or opt("numprocesses", None):
        raise pytest.UsageError("--opbench-base times each side in one process a round: drop "
                                "--opbench-disable and -n")
    for name in ("rounds", "wave"):
        if opt(f"opbench_{name}") < 1:
            raise pytest.UsageError(f"--opbench-{name} must be a positive integer")
    try:
        return (parse_fraction(opt("opbench_fail_above"), "--opbench-fail-above")
                if opt("opbench_fail_above") else 0.05)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None


def _ab_main(config: pytest.Config, base: str) -> int:
    from opbench._files import atomic_write_text
    from opbench.revisions import RevisionError
    from opbench.revisions.command import sigterm_as_interrupt
    from opbench.revisions.session import run_ab

    opt = config.getoption
    threshold = _ab_threshold(config)
    argv = _this_command()
    _suspend_capture(config)
    try:
        with sigterm_as_interrupt():
            report = run_ab(_without(argv, _AB_OPTIONS), base, rounds=opt("opbench_rounds"),
                            mode=opt("opbench_mode"), threshold=threshold,
                            inconclusive=opt("opbench_inconclusive"),
                            wave=opt("opbench_wave"))
    except RevisionError as e:
        raise pytest.UsageError(f"--opbench-base: {e}") from None
    sys.stdout.write(report.text())
    if opt("opbench_report"):
        written = report.redacted() if opt("opbench_redact") else report
        atomic_write_text(opt("opbench_report"), written.render(opt("opbench_format")))
        sys.stdout.write(f"opbench: wrote the report to {opt('opbench_report')}\n")
    sys.stdout.flush()
    if report.interrupted:
        return int(pytest.ExitCode.INTERRUPTED)
    return int(pytest.ExitCode.TESTS_FAILED) if report.exit_status else int(pytest.ExitCode.OK)
