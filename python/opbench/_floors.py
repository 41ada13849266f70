"""The floors of opbench's architecture, declared once.

Each floor names the packages and modules on it, bottom up. A module imports
only from its own floor or below (at module level or inside a function alike)
and the imports have no cycle, between modules or between the packages listed
here. ``tests/test_layers.py`` checks the package against this declaration,
and that the README's table and each listed package's docstring say what it
says (``readme_table()``, ``may_import()``): change a floor here, and the test
tells you what else to update.

Example:
    >>> from opbench._floors import floor_of
    >>> floor_of("opbench.core.measurement").name, floor_of("opbench.timer").name
    ('core', 'timer')

This module imports nothing: it is data, read by tests and tools.
"""
from __future__ import annotations

import pathlib
from typing import NamedTuple


class Floor(NamedTuple):
    name: str
    what: str
    members: tuple[str, ...]  # modules and packages (a package brings its submodules)


FLOORS: tuple[Floor, ...] = (
    Floor("native", "clock, loops, callgrind client requests, the CUDA driver, the allocation "
                    "counter's switches (C++, `csrc/bindings/`)",
          ("opbench._C",)),
    Floor("base", "errors and warnings, argument checks, the gate's named choices, atomic files, "
                  "private folders, threads, text, Markdown, redaction, the machine, progress "
                  "bars, the old import paths, this table",
          ("opbench._version", "opbench.errors", "opbench._checks", "opbench._choices",
           "opbench._files", "opbench._ownership", "opbench._threads", "opbench._text",
           "opbench._markdown", "opbench._redact", "opbench.environment",
           "opbench.progress", "opbench._moved", "opbench._floors")),
    Floor("stats", "statistics of timings, decisions (is B faster?), change points, torch's "
                   "float32 arithmetic",
          ("opbench.stats",)),
    Floor("engines", "how a statement runs `n` times: Python, C++ (with its compiler, precompiled "
                     "headers and cache), CUDA device time",
          ("opbench.engines",)),
    Floor("core", "`Measurement`, instruction and memory counts, stopping rules, first calls, profiles; "
                  "work, throughput and peaks; the fuzzers",
          ("opbench.core", "opbench.fuzz")),
    Floor("callgrind", "instruction counts under valgrind", ("opbench.callgrind",)),
    Floor("memory", "allocations, bytes, peaks and leaks per call, counted by a preloaded "
                    "allocation counter", ("opbench.memory",)),
    Floor("timer", "`Timer` (torch's algorithms), which drives everything below", ("opbench.timer",)),
    Floor("store", "results files, sweep files, baselines, the history of runs over commits",
          ("opbench.store",)),
    Floor("analysis", "tables (and their throughput columns), comparisons, exports, plots (and "
                      "the roofline), the HTML report, torch.compile studies; the gate, A/B, "
                      "runs at a git revision, bisect",
          ("opbench.analysis", "opbench.gate")),
    Floor("sweep", "`run_all`: sweeps, placement on cores, executors (local, Dask, Ray)",
          ("opbench.sweep",)),
    Floor("front", "the command line, the pytest plugin, `import opbench`, torch's module paths",
          ("opbench.integrations", "opbench.utils", "opbench.op_fuzzers", "opbench.__main__",
           "opbench")),
)


def owner(module: str) -> str | None:
    """The member of FLOORS that holds ``module`` (its longest listed prefix), or None."""
    best = None
    for floor in FLOORS:
        for name in floor.members:
            covers = module == name or (name != "opbench" and module.startswith(name + "."))
            if covers and (best is None or len(name) > len(best)):
                best = name
    return best


def floor_of(module: str) -> Floor:
    """The floor ``module`` is on; a ValueError names a module no floor holds."""
    name = owner(module)
    for floor in FLOORS:
        if name in floor.members:
            return floor
    raise ValueError(f"{module} is on no floor: add it to FLOORS in opbench/_floors.py")


def level(floor: Floor) -> int:
    return FLOORS.index(floor)


def _where(name: str) -> str:
    if name == "opbench._C":
        return "`csrc/bindings/*.cpp`, `csrc/detail/`"
    if name == "opbench":
        return "`__init__.py`"
    path = name.removeprefix("opbench.").replace(".", "/")
    if name not in PACKAGES:
        return f"`{path}.py`"
    # A package's public modules and subpackages, read from the tree, so the
    # table names every file a newcomer looks for.
    folder = pathlib.Path(__file__).parent / path
    inside = sorted(f"{p.stem}/" if p.is_dir() else p.stem for p in folder.iterdir()
                    if not p.name.startswith(("_", "."))
                    and (p.suffix == ".py" or (p / "__init__.py").exists()))
    return f"`{path}/` ({', '.join(inside)})" if inside else f"`{path}/`"


# The members that are packages (folders); the others are modules.
PACKAGES = ("opbench.stats", "opbench.engines", "opbench.core", "opbench.fuzz", "opbench.callgrind",
            "opbench.memory",
            "opbench.store", "opbench.analysis", "opbench.gate", "opbench.sweep", "opbench.integrations",
            "opbench.utils", "opbench.op_fuzzers")


def may_import(package: str) -> str:
    """The sentence each listed package's docstring carries about its floor."""
    floor = floor_of(package)
    below = [f.name for f in FLOORS[:level(floor)]]
    return f"Floor: {floor.name} (may import from {', '.join(below)} and its own floor)."


def readme_table() -> str:
    """The README's table of floors (Development), top floor first."""
    rows = ["| floor | what | where (under `python/opbench/`) |", "|---|---|---|"]
    for floor in reversed(FLOORS):
        rows.append(f"| {floor.name} | {floor.what} | {', '.join(_where(n) for n in floor.members)} |")
    return "\n".join(rows)
