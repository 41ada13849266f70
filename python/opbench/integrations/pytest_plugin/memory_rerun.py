"""Memory mode (``--opbench-mode=memory``): the whole session runs again in a process
started with opbench's allocation counter preloaded (``opbench.memory.counter``), and
this process exits with that run's status. There, each benchmark's memory per call is
counted where the test built it (``opbench.memory.counting``): closures over fixtures
need no pickling. The re-run does no timing: time-mode figures are untouched."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Set in the environment of the re-run session (memory mode).
_PRELOADED = "OPBENCH_PYTEST_MEMORY"


def rerun_with_counter(config: pytest.Config) -> int | None:
    """In memory mode, runs this same pytest command with the allocation counter preloaded
    and returns its status (unless this already is that run); None otherwise. Called by
    the plugin's ``pytest_cmdline_main`` (``ab``)."""
    if config.getoption("opbench_mode") != "memory" or os.environ.get(_PRELOADED):
        return None
    if config.getoption("opbench_disable"):
        return None
    if config.getoption("numprocesses", None):
        raise pytest.UsageError("--opbench-mode=memory counts in one process: drop -n "
                                "(counts do not depend on load, so nothing is lost)")
    from opbench.errors import MemoryUnavailableError
    from opbench.memory import counter

    try:
        env = counter.preload_env()
    except MemoryUnavailableError as e:
        raise pytest.UsageError(f"--opbench-mode=memory: {e}") from None
    env[_PRELOADED] = "1"
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    argv = getattr(sys, "orig_argv", None) or [sys.executable, "-m", "pytest", *sys.argv[1:]]
    return subprocess.call([sys.executable, *argv[1:]], env=env)


def check_counter() -> None:
    """In the re-run session: the counter must have been loaded first (a loader that
    ignored LD_PRELOAD would give figures without the native heap); the processes the
    tests start get the user's own LD_PRELOAD back."""
    from opbench.memory import counter

    counter.restore_environment()
    if os.environ.get(_PRELOADED) and not counter.preloaded():
        raise pytest.UsageError("--opbench-mode=memory: the session was re-run with the "
                                "allocation counter in LD_PRELOAD, but the dynamic loader "
                                "ignored it (a set-user-ID or statically linked Python)")
