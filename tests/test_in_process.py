"""opbench.callgrind.in_process: counts taken inside a process valgrind runs (the pytest
plugin's instruction mode; run under valgrind in tests/test_pytest_plugin.py)."""
from __future__ import annotations

import pytest

from opbench.callgrind import in_process
from opbench.core.measurement import TaskSpec
from opbench.errors import CallgrindUnavailableError


def test_outside_valgrind_nothing_runs_and_the_error_says_how() -> None:
    assert in_process.running() is False
    calls: list[int] = []
    with pytest.raises(CallgrindUnavailableError, match="--opbench-mode=instructions starts it"):
        in_process.count(lambda: calls.append(1), number=10, repeats=1,
                         task_spec=TaskSpec("f()", "pass"), out_prefix="/nonexistent/callgrind.out")
    assert calls == []  # refused before the first call
