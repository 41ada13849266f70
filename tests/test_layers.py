"""The package's import graph reads as floors, with no cycles: a newcomer can change
one floor knowing that nothing below it depends on it.

Floors, bottom up (README, "Development"):
  0 native    opbench._C
  1 base      errors, checks, files, numerics, threads, text, environment, stats, progress
  2 engines   how a statement runs: engines/*, cpp (toolchain), cuda (device timers)
  3 core      Timer, Measurement, what a Timer drives directly (first call, converge,
              profile, callgrind collection) and the fuzzers
  4 analysis  tables, exports, plots, results files, decisions, A/B, compile studies
  5 front     the command line, the pytest plugin, the package's own __init__

A module may import only from its own floor or below, at module level or inside a
function alike (an import inside a function is still a dependency), and the imports
within the package must have no cycle. Imports under `if TYPE_CHECKING:` are for
type checkers only and are ignored.
"""
from __future__ import annotations

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "python" / "opbench"

FLOORS = {
    0: ["opbench._C"],
    1: ["opbench._version", "opbench.errors", "opbench._checks", "opbench._files",
        "opbench._numerics", "opbench._threads", "opbench._text", "opbench.environment",
        "opbench.stats", "opbench.progress", "opbench.placement", "opbench.sweep_file"],
    2: ["opbench.engines", "opbench.cpp", "opbench.cuda", "opbench.callgrind.globals"],
    3: ["opbench.measurement", "opbench.instructions", "opbench.timer", "opbench.first_call",
        "opbench.stopping",
        "opbench.profile", "opbench.fuzzer", "opbench.sparse_fuzzer", "opbench.op_fuzzers",
        "opbench.callgrind", "opbench.executors"],
    4: ["opbench.table", "opbench.compare", "opbench.export", "opbench.plot", "opbench.gate",
        "opbench.baselines",
        "opbench.results", "opbench.decide", "opbench.ab", "opbench.compile", "opbench.sweep",
        "opbench.revision", "opbench.turns", "opbench.ab_session", "opbench.ab_report"],
    5: ["opbench.cli", "opbench.pytest_plugin", "opbench.__main__", "opbench"],
}


def _modules() -> dict[str, pathlib.Path]:
    found = {"opbench._C": PACKAGE / "_C.pyi"}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


MODULES = _modules()


def floor_of(module: str) -> int:
    """The floor of the longest prefix listed (``opbench.engines.cpp`` is on
    ``opbench.engines``'s floor, unless listed itself)."""
    best, floor = "", None
    for level, names in FLOORS.items():
        for name in names:
            covers = module == name or (name != "opbench" and module.startswith(name + "."))
            if covers and len(name) > len(best):
                best, floor = name, level
    if floor is None:
        raise AssertionError(f"{module} has no floor: add it to FLOORS in tests/test_layers.py "
                             "and to the README's Development section")
    return floor


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
            if name == "opbench" or name.startswith("opbench."):
                target = _resolve(name)
                if target is not None and target != module:
                    found.add(target)
    return found


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


def test_the_floors_list_only_real_modules():
    listed = [name for names in FLOORS.values() for name in names]
    assert not [n for n in listed if n not in MODULES], "FLOORS names a module that does not exist"


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
