"""Nothing outside opbench/timer/ reaches into a Timer: everything that runs one goes through
its sampling protocol (task_spec, engine, kwargs, block_size, run, measurement), so the timer
package can change its private state without breaking the sweep, the fixture or the gate."""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "python" / "opbench"


def test_nothing_outside_the_timer_package_reaches_into_a_timer() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if PACKAGE / "timer" in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                    and not node.attr.startswith("__")
                    and "timer" in ast.unparse(node.value).lower()):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "\n".join(found)
