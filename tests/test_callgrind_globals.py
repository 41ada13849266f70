"""opbench.callgrind.globals: CopyIfCallgrind marks a global the child gets a copy of."""
from __future__ import annotations

from opbench.callgrind.globals import CopyIfCallgrind


def test_unwrap_all_replaces_only_the_wrapped_values() -> None:
    table = [1, 2]
    wrapped = CopyIfCallgrind(table, setup="import collections")
    out = CopyIfCallgrind.unwrap_all({"t": wrapped, "n": 3})
    assert out == {"t": [1, 2], "n": 3} and out["t"] is table  # wall-clock runs use the value itself
    assert wrapped.setup == "import collections" and CopyIfCallgrind(1).setup is None
