"""Every docstring example in the package runs (and prints what it says), so none rots.

Examples that need what CI lacks (a GPU) are marked ``# doctest: +SKIP`` in
place; everything else runs here, torch and valgrind included.
"""
from __future__ import annotations

import doctest
import importlib
import pathlib
import warnings

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "python" / "opbench"


def _modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] != "__main__":
            names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


# Examples that run valgrind or a compiler are in the slow tier (README, Development).
_SLOW = {"opbench.callgrind.collect", "opbench.callgrind.worker", "opbench.engines.cpp.engine",
         "opbench.engines.cpp.extension"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in _SLOW else n
                                  for n in _modules()])
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # examples on a shared machine may warn (governor)
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, report=True)
    assert result.failed == 0, f"{result.failed} docstring example(s) of {name} failed"
