"""Runs test code in a process started with opbench's allocation counter preloaded (as
``Timer.memory`` and ``--opbench-mode=memory`` start theirs), for the tests of
``opbench.memory``: counting the native heap needs the counter loaded before anything
else, which this test process was not.

``run(code)`` executes ``code`` there (``tests/`` on the path) and returns what it
stored in ``result``, which must be JSON-able; an exception there fails the caller
with the child's traceback.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from opbench.memory import counter

TESTS = Path(__file__).resolve().parent

_WRAPPER = """
import json, sys
result = None
{code}
sys.stdout.write("\\n@@RESULT@@" + json.dumps(result))
"""


def needs_counter() -> None:
    """Skips the calling test where no counter can be built (not glibc Linux)."""
    reason = counter.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


def run(code: str, *, preload: bool = True, timeout: float = 120) -> Any:
    needs_counter()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *filter(None, sys.path)])
    if preload:
        env = counter.preload_env(env)
    proc = subprocess.run([sys.executable, "-c", _WRAPPER.format(code=textwrap.dedent(code))],
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0 or "@@RESULT@@" not in proc.stdout:
        pytest.fail(f"the preloaded child failed (status {proc.returncode}):\n{proc.stdout}\n"
                    f"{proc.stderr}")
    return json.loads(proc.stdout.rsplit("@@RESULT@@", 1)[1])
