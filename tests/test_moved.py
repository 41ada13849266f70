"""opbench._moved: old flat import paths give the very module objects of the new ones."""
from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import opbench  # noqa: F401  (installs the finder)
from opbench import _moved


def test_new_name_follows_a_moved_package_to_its_submodules() -> None:
    assert _moved.new_name("opbench.results") == "opbench.store.results"
    assert _moved.new_name("opbench.cpp.build") == "opbench.engines.cpp.build"
    assert _moved.new_name("opbench.cpp.engine") == "opbench.engines.cpp.engine"
    assert _moved.new_name("opbench.timer") is None
    assert _moved.new_name("opbench.resultsx") is None  # a prefix of a name is not a package


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_every_old_path_is_the_new_module_object(old: str) -> None:
    assert importlib.import_module(old) is importlib.import_module(_moved.MOVED[old])


def test_the_module_keeps_its_own_spec() -> None:
    module = importlib.import_module("opbench.sweep_file")
    assert module.__name__ == module.__spec__.name == "opbench.store.sweep_file"


def test_an_old_path_works_in_a_fresh_process_before_the_new_one() -> None:
    # The first import of the module is through the old path: still one module.
    code = ("import opbench.decide as old, sys; import opbench.stats.decide as new; "
            "print(old is new, 'opbench.decide' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.split() == ["True", "True"]


def test_a_missing_name_under_an_old_path_still_fails_as_missing() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("opbench.cpp.no_such_module")
