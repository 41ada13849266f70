"""opbench._floors: the declaration the layering test and the README read."""
from __future__ import annotations

import pytest

from opbench import _floors


def test_floor_of_takes_the_longest_listed_prefix() -> None:
    assert _floors.owner("opbench.engines.cpp.build") == "opbench.engines"
    assert _floors.floor_of("opbench.fuzz.op_fuzzers.unary").name == "core"
    assert _floors.floor_of("opbench.gate.ab").name == "analysis"
    # The top package is a member; a module under it is not covered by that alone.
    assert _floors.floor_of("opbench").name == "front"
    assert _floors.owner("opbench.nonexistent") is None


def test_a_module_on_no_floor_is_named_with_the_fix() -> None:
    with pytest.raises(ValueError, match=r"opbench\.newthing is on no floor: add it to FLOORS"):
        _floors.floor_of("opbench.newthing")


def test_levels_run_bottom_up_and_each_member_is_listed_once() -> None:
    names = [f.name for f in _floors.FLOORS]
    assert names[0] == "native" and names[-1] == "front"
    assert [_floors.level(f) for f in _floors.FLOORS] == list(range(len(names)))
    members = [m for f in _floors.FLOORS for m in f.members]
    assert len(members) == len(set(members))
    assert set(_floors.PACKAGES) <= set(members)


def test_may_import_names_every_floor_below() -> None:
    assert _floors.may_import("opbench.stats") == \
        "Floor: stats (may import from native, base and its own floor)."
    sentence = _floors.may_import("opbench.sweep")
    assert sentence.startswith("Floor: sweep (may import from native, base, stats,")
    assert "analysis and its own floor" in sentence and "front" not in sentence


def test_readme_table_lists_the_top_floor_first_and_each_packages_files() -> None:
    rows = _floors.readme_table().splitlines()
    assert rows[0].startswith("| floor | what |")
    assert [r.split("|")[1].strip() for r in rows[2:]] == [f.name for f in reversed(_floors.FLOORS)]
    store = next(r for r in rows if r.startswith("| store |"))
    # read from the tree
    assert "`store/` (baselines, history, pytest_benchmark_file, results, sweep_file)" in store
    assert "`csrc/bindings/*.cpp`" in rows[-1]
