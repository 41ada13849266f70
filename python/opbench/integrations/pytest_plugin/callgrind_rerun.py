"""Instruction mode (``--opbench-mode=instructions``): the whole session runs again under
callgrind, and this process exits with that run's status."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

# Set in the environment of a session re-run under callgrind (instruction mode).
_UNDER_CALLGRIND = "OPBENCH_PYTEST_UNDER_CALLGRIND"
# torch's OpenMP workers sleep as soon as a parallel region ends instead of spinning
# (a spinning worker's instructions would be counted with the statement's, differently
# every repeat, and under valgrind it slows the whole session); a variable the user
# set wins.
_QUIET_POOLS = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0"}


def rerun_under_callgrind(config: pytest.Config) -> int | None:
    """In instruction mode, runs this same pytest command under callgrind and returns its
    status (unless this already is that run); None otherwise. Called by the plugin's
    ``pytest_cmdline_main`` (``ab``)."""
    if config.getoption("opbench_mode") != "instructions" or os.environ.get(_UNDER_CALLGRIND):
        return None
    if config.getoption("opbench_disable"):
        return None
    if config.getoption("numprocesses", None):
        raise pytest.UsageError("--opbench-mode=instructions counts in one process: drop -n "
                                "(counts do not depend on load, so nothing is lost)")
    from opbench.callgrind.collect import callgrind_unavailable_reason
    from opbench.callgrind.in_process import OUT_PREFIX_ENV

    reason = callgrind_unavailable_reason()
    if reason is not None:
        raise pytest.UsageError(f"--opbench-mode=instructions: {reason}")
    capture = config.pluginmanager.getplugin("capturemanager")
    if capture is not None:
        capture.suspend_global_capture(in_=True)
    with tempfile.TemporaryDirectory(prefix="opbench_pytest_callgrind_") as work:
        prefix = os.path.join(work, "callgrind.out")
        # PYTHONHASHSEED fixed: dict and set layouts, hence counts, repeat exactly.
        env = dict(_QUIET_POOLS, **os.environ)
        env.update({_UNDER_CALLGRIND: "1", OUT_PREFIX_ENV: prefix,
                    "PYTHONHASHSEED": os.environ.get("PYTHONHASHSEED", "0")})
        argv = getattr(sys, "orig_argv", None) or [sys.executable, "-m", "pytest", *sys.argv[1:]]
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                   f"--callgrind-out-file={prefix}", f"--log-file={prefix}.log",
                   sys.executable, *argv[1:]]
        status = subprocess.call(command, env=env)
    return status
