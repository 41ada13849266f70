"""Every module of the package has a test file of its own, named after it.

The rule (README, Development): the tests of ``python/opbench/a/b/c.py`` are in
``tests/test_<tail>.py``, where the tail is the module's path with ``/`` written
``_`` (``__init__`` and ``.py`` dropped, leading underscores too: ``_floors.py``
is ``floors``), cut from the left as far as it still names no other module, or names others with
longer paths only (the whole path always names its module):
``core/measurement.py`` is ``test_measurement.py`` (or ``test_core_measurement.py``),
``analysis/compare.py`` is ``test_compare.py`` and ``integrations/cli/compare.py``
``test_cli_compare.py``; ``engines/cpp/engine.py`` and ``engines/cuda/engine.py``
tie, so neither is ``test_engine.py``. The package itself
(``__init__.py``: what ``import opbench`` offers) is ``test_public_surface.py``.
A folder's ``__init__.py`` that holds only its docstring has nothing to test and needs none;
nor does a module that only re-exports names under another path (its docstring, imports and
``__all__``: torch's module paths, ``opbench/utils/`` and ``opbench/op_fuzzers/``), whose
names are tested where they are defined (and checked against torch's in ``test_utils.py``).
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "opbench"
TESTS = Path(__file__).resolve().parent


def _path_parts(path: Path, package: Path) -> tuple[str, ...]:
    parts = list(path.relative_to(package).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return tuple(p.strip("_") for p in parts) or ("public_surface",)


def _tails(parts: tuple[str, ...]) -> list[str]:
    return ["_".join(parts[i:]) for i in range(len(parts))]


def _holds_code(path: Path) -> bool:
    """False for a folder's ``__init__.py`` that is its docstring alone, and for a module
    that only re-exports (docstring, imports, ``__all__``): nothing of its own to test."""
    def own(node: ast.stmt) -> bool:
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            return False  # the docstring
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return False
        return not (isinstance(node, ast.Assign)
                    and [ast.unparse(t) for t in node.targets] == ["__all__"])

    return any(own(node) for node in ast.parse(path.read_text()).body)


def expected_names(package: Path = PACKAGE) -> dict[str, list[str]]:
    """{module file (relative to the package): the test file names its tests may have}."""
    modules = {str(p.relative_to(package)): _path_parts(p, package)
               for p in sorted(package.rglob("*.py")) if _holds_code(p)}
    owners: dict[str, set[str]] = {}
    for module, parts in modules.items():
        for tail in _tails(parts):
            owners.setdefault(tail, set()).add(module)
    def keeps(module: str, tail: str) -> bool:
        # A tail several modules end in belongs to the one with the shortest path
        # (``stats/__init__.py`` keeps ``stats``; ``callgrind/stats.py`` is
        # ``callgrind_stats``), to none on a tie; the whole path always names its module.
        shortest = min(len(modules[m]) for m in owners[tail])
        return [m for m in owners[tail] if len(modules[m]) == shortest] == [module]

    return {module: [f"test_{tail}.py" for i, tail in enumerate(_tails(parts))
                     if i == 0 or keeps(module, tail)]
            for module, parts in modules.items()}


def missing(package: Path = PACKAGE, tests: Path = TESTS) -> dict[str, list[str]]:
    """{module: the names it may have} for each module no test file in ``tests`` is named for."""
    present = {p.name for p in tests.glob("test_*.py")}
    return {module: names for module, names in expected_names(package).items()
            if not present.intersection(names)}


def test_every_module_has_a_test_file() -> None:
    untested = missing()
    assert not untested, "modules without a test file (name it one of these): " + "; ".join(
        f"{module}: {' or '.join(names)}" for module, names in sorted(untested.items()))


def test_names_follow_the_rule(tmp_path: Path) -> None:
    # A small tree with the same kinds of clash as the real one.
    for name in ("__init__.py", "_floors.py", "core/__init__.py", "core/measurement.py",
                 "analysis/compare.py", "integrations/cli/compare.py", "stats/__init__.py",
                 "callgrind/stats.py", "engines/cpp/engine.py", "engines/cuda/engine.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("x = 1\n")
    (tmp_path / "analysis/__init__.py").write_text('"""Tables and comparisons."""\n')
    # A module that only re-exports neither needs a test file nor takes a name.
    (tmp_path / "utils").mkdir()
    (tmp_path / "utils/compare.py").write_text(
        '"""torch\'s path."""\nfrom opbench.analysis.compare import Compare\n__all__ = ["Compare"]\n')
    names = expected_names(tmp_path)
    assert "analysis/__init__.py" not in names and "utils/compare.py" not in names
    assert names["__init__.py"] == ["test_public_surface.py"]
    assert names["_floors.py"] == ["test_floors.py"]
    assert names["core/measurement.py"] == ["test_core_measurement.py", "test_measurement.py"]
    assert names["analysis/compare.py"] == ["test_analysis_compare.py", "test_compare.py"]
    assert names["integrations/cli/compare.py"] == ["test_integrations_cli_compare.py",
                                                    "test_cli_compare.py"]
    assert names["engines/cpp/engine.py"] == ["test_engines_cpp_engine.py", "test_cpp_engine.py"]
    # stats/__init__ is `stats`, so callgrind/stats.py must say which stats it is.
    assert names["stats/__init__.py"] == ["test_stats.py"]
    assert names["callgrind/stats.py"] == ["test_callgrind_stats.py"]


def test_a_new_module_without_tests_is_reported(tmp_path: Path) -> None:
    package, tests = tmp_path / "opbench", tmp_path / "tests"
    (package / "store").mkdir(parents=True)
    tests.mkdir()
    for name in ("__init__.py", "store/__init__.py", "store/results.py", "store/history.py"):
        (package / name).write_text("x = 1\n")
    for name in ("test_public_surface.py", "test_store.py", "test_results.py", "test_helpers.py"):
        (tests / name).write_text("")
    assert missing(package, tests) == {"store/history.py": ["test_store_history.py", "test_history.py"]}
    (tests / "test_store_history.py").write_text("")
    assert missing(package, tests) == {}
