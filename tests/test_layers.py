"""The package's import graph reads as floors, with no cycles: a newcomer can change
one floor knowing that nothing below it depends on it.

The floors are declared once, in opbench/_floors.py (bottom up: native, base, stats,
engines, core, callgrind, timer, store, analysis, sweep, front); the development
guide's table (docs/development.md) and each floor package's docstring are checked
against it here.

A module may import only from its own floor or below, at module level or inside a
function alike (an import inside a function is still a dependency), and the imports
within the package must have no cycle, neither between modules nor between the
packages the floors list. Imports under `if TYPE_CHECKING:` are for type checkers
only and are ignored. Inside the package, modules import by their new paths, never
by the old flat ones that opbench._moved keeps for users.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

from opbench import _floors, _moved

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "python" / "opbench"


def _modules() -> dict[str, pathlib.Path]:
    found = {"opbench._C": PACKAGE / "_C.pyi"}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def floor_of(module: str) -> int:
    """The level of the floor holding ``module``'s longest listed prefix
    (``opbench.engines.cpp.build`` is on ``opbench.engines``'s floor)."""
    try:
        return _floors.level(_floors.floor_of(module))
    except ValueError as e:
        raise AssertionError(str(e)) from None


def _resolve(name: str) -> str | None:
    """The package module an imported name lives in (``opbench.x.y`` -> ``opbench.x``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return skipped


def imports_of(module: str) -> set[str]:
    path = MODULES[module]
    if path.suffix == ".pyi":
        return set()
    tree = ast.parse(path.read_text())
    skipped = _type_checking_nodes(tree)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # `from pkg import submodule` depends on the submodule, `from mod import
            # name` on mod: resolving `base.name` gives whichever it is.
            names = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            if _moved.new_name(name) is not None and name not in MODULES:
                OLD_PATHS.append(f"{module}:{node.lineno}: {name} (now {_moved.new_name(name)})")
            if name == "opbench" or name.startswith("opbench."):
                target = _resolve(name)
                if target is not None and target != module:
                    found.add(target)
    return found


OLD_PATHS: list[str] = []
GRAPH = {m: imports_of(m) for m in MODULES}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_or_across(module):
    mine = floor_of(module)
    upward = sorted(t for t in GRAPH[module] if floor_of(t) > mine)
    assert not upward, f"{module} (floor {mine}) imports from higher floors: " + ", ".join(
        f"{t} (floor {floor_of(t)})" for t in upward)


def test_no_import_cycles():
    # A package importing its own submodules while they import the package is
    # the one cycle Python resolves by design; every other cycle is a defect.
    def edges(m):
        return {t for t in GRAPH[m] if not (t.startswith(m + ".") or m.startswith(t + "."))}

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(edges(m)):
            if state.get(t) == 1:
                cycle = [*stack[stack.index(t):], t]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            visit(m)


def test_no_cycle_between_the_floors_packages():
    """Module cycles aside, two packages must not lean on each other either
    (``core`` importing ``callgrind`` while ``callgrind`` imports ``core``)."""
    units = {m: _floors.owner(m) for m in MODULES}
    edges: dict[str, set[str]] = {}
    for m, targets in GRAPH.items():
        for t in targets:
            a, b = units[m], units[t]
            # The package's own __init__ imports everything: it is the top, not a peer.
            if a != b and "opbench" not in (a, b):
                edges.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        for n in edges.get(start, ()):
            if n == goal or (n not in seen and (seen.add(n) or reaches(n, goal, seen))):
                return True
        return False

    cycles = sorted(f"{a} <-> {b}" for a in edges for b in edges[a] if reaches(b, a, set()))
    assert not cycles, "packages importing each other: " + ", ".join(cycles)


def test_the_package_imports_new_paths_only():
    assert not OLD_PATHS, "old flat import paths inside the package:\n" + "\n".join(OLD_PATHS)


def test_the_floors_list_only_real_modules():
    listed = [name for floor in _floors.FLOORS for name in floor.members]
    assert not [n for n in listed if n not in MODULES], "FLOORS names a module that does not exist"
    assert sorted(_floors.PACKAGES) == sorted(n for n in listed if MODULES[n].name == "__init__.py"
                                               and n != "opbench")


def test_the_readme_table_is_the_declared_floors():
    """The development guide (docs/development.md) shows _floors.readme_table()
    verbatim; after changing the floors or adding a module to a floor package, paste
    its output there."""
    guide = (ROOT / "docs" / "development.md").read_text()
    table = _floors.readme_table()
    assert table in guide, ("docs/development.md's floor table differs from opbench/_floors.py; "
                            "replace it with the output of: python -c 'from opbench import _floors; "
                            "print(_floors.readme_table())'")


@pytest.mark.parametrize("package", _floors.PACKAGES)
def test_each_floor_package_says_what_it_may_import(package):
    doc = ast.get_docstring(ast.parse(MODULES[package].read_text())) or ""
    assert " ".join(_floors.may_import(package).split()) in " ".join(doc.split()), (
        f"{package}'s docstring lacks: {_floors.may_import(package)}")


def test_old_paths_are_the_new_modules():
    """Every old flat path in opbench._moved imports, as the module at its new path."""
    import importlib

    for old, new in _moved.MOVED.items():
        assert new in MODULES, f"{old} moved to {new}, which does not exist"
        assert importlib.import_module(old) is importlib.import_module(new)


def test_nothing_outside_timer_py_reaches_into_a_timer():
    """Timer's private attributes are timer.py's; everything else uses its protocol
    (task_spec, engine, kwargs, block_size, run, measurement)."""
    found = []
    for module, path in MODULES.items():
        if path.suffix != ".py" or module == "opbench.timer":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and "timer" in ast.unparse(node.value).lower()):
                found.append(f"{module}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
