"""Old import paths: the modules that moved into subpackages still import by their old names.

opbench was a flat package; its modules now live in subpackages that are the
floors of its architecture (``opbench._floors``). Code written against the
flat layout keeps working, and gets the very module object of the new path,
so patching a name through either path patches both:

    >>> import opbench
    >>> import opbench.results, opbench.store.results
    >>> opbench.results is opbench.store.results
    True

Importing this module installs the finder (``opbench/__init__.py`` does). Inside the
package, modules import the new paths only (``tests/test_layers.py`` checks).
This module imports nothing from opbench.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any

# old module path -> new module path; a submodule of an old package path moves
# with it (``opbench.cpp.build`` -> ``opbench.engines.cpp.build``).
MOVED = {
    "opbench.ab": "opbench.gate.ab",
    "opbench.baselines": "opbench.store.baselines",
    "opbench.cli": "opbench.integrations.cli",
    "opbench.compare": "opbench.analysis.compare",
    "opbench.compile": "opbench.analysis.compile",
    "opbench.cpp": "opbench.engines.cpp",
    "opbench.cuda": "opbench.engines.cuda",
    "opbench.decide": "opbench.stats.decide",
    "opbench.executors": "opbench.sweep.executors",
    "opbench.export": "opbench.analysis.export",
    "opbench.first_call": "opbench.core.first_call",
    "opbench.fuzzer": "opbench.fuzz.fuzzer",
    "opbench.instructions": "opbench.core.instructions",
    "opbench.measurement": "opbench.core.measurement",
    "opbench.placement": "opbench.sweep.placement",
    "opbench.plot": "opbench.analysis.plot",
    "opbench.profile": "opbench.core.profile",
    "opbench.pytest_plugin": "opbench.integrations.pytest_plugin",
    "opbench.results": "opbench.store.results",
    "opbench.sparse_fuzzer": "opbench.fuzz.sparse_fuzzer",
    "opbench.stopping": "opbench.core.stopping",
    "opbench.sweep_file": "opbench.store.sweep_file",
    "opbench.table": "opbench.analysis.table",
    "opbench._numerics": "opbench.stats.numerics",
    # Short public paths of modules born in their floors (throughput and roofline).
    "opbench.columns": "opbench.analysis.columns",
    "opbench.peaks": "opbench.core.peaks",
    "opbench.roofline": "opbench.analysis.roofline",
    "opbench.throughput": "opbench.core.throughput",
    "opbench.work": "opbench.core.work",
}


def new_name(name: str) -> str | None:
    """The module's path today, for an old path (or one inside an old package); else None.

    >>> new_name("opbench.cpp.build"), new_name("opbench.timer")
    ('opbench.engines.cpp.build', None)
    """
    old = name
    while old and old not in MOVED:
        old = old.rpartition(".")[0]
    return MOVED[old] + name[len(old):] if old else None


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module already at its new path (no second copy)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(spec.loader_state)
        # The import system sets the alias's spec on the module it gets; the
        # module keeps its own (reload, pickling by module name, -m use it).
        spec.loader_state = (module, module.__spec__)
        return module

    def exec_module(self, module: ModuleType) -> None:
        real, real_spec = module.__spec__.loader_state  # type: ignore[union-attr]
        real.__spec__ = real_spec


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        new = new_name(fullname) if fullname.startswith("opbench.") else None
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _ALIAS, loader_state=new)


_ALIAS = _Alias()


if not any(type(f).__name__ == "_Finder" and type(f).__module__ == __name__ for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
