"""Timer profiles: the statement's functions under cProfile, without the harness's frames."""
from __future__ import annotations

import pstats

import pytest

import opbench
from opbench.core.profile import ProfileRow, profile


def leaf():
    return sum(range(50))


def middle():
    return [leaf() for _ in range(3)]


def top_level():
    middle()
    return leaf()


def _names(report):
    return [r.function for r in report.rows]


def test_callable_statement_counts_per_run():
    report = profile(opbench.Timer(top_level), number=200)
    names = _names(report)
    assert names[0].endswith("(top_level)")  # the root: largest cumulative time
    by_name = {r.function.rsplit("(", 1)[-1].rstrip(")"): r for r in report.rows}
    assert by_name["top_level"].ncalls == 1
    assert by_name["middle"].ncalls == 1
    assert by_name["leaf"].ncalls == 4  # 3 from middle, 1 from top_level
    assert by_name["leaf"].cumtime <= by_name["top_level"].cumtime
    assert report.total == pytest.approx(by_name["top_level"].cumtime, rel=1e-6)
    assert isinstance(report.rows[0], ProfileRow)


def test_harness_frames_are_removed():
    report = profile(opbench.Timer(top_level), number=50)
    text = " ".join(_names(report))
    for harness in ("_drive", "disable", "_lsprof", "inner", "_loop.py", "opbench/core/profile.py"):
        assert harness not in text, harness


def test_string_statement_and_setup():
    report = profile(opbench.Timer("sorted(xs)", setup="xs = list(range(100, 0, -1))"), number=100)
    assert _names(report) == ["<stmt>", "<built-in method builtins.sorted>"]
    assert [r.ncalls for r in report.rows] == [1, 1]


def test_string_statement_with_globals_and_torch():
    torch = pytest.importorskip("torch")
    module = torch.nn.Linear(4, 4)
    report = profile(opbench.Timer("m(x)", globals={"m": module, "x": torch.randn(2, 4)}),
                     number=20)
    names = " ".join(_names(report))
    assert "linear.py" in names and "(forward)" in names


def test_table_sorted_by_cumulative_and_own():
    report = profile(opbench.Timer(top_level), number=100, top=2)
    text = str(report)
    lines = text.splitlines()
    assert lines[0].startswith("Profile of 100 runs:") and "(top 2 of" in lines[0]
    assert lines[1].split()[0] == "ncalls/run" and lines[1].endswith("function")
    assert "own (" in lines[1] and "cum (" in lines[1]
    assert len(lines) == 4 and lines[2].endswith("(top_level)")
    own = report.sorted_by("own")
    assert [r.tottime for r in own] == sorted((r.tottime for r in report.rows), reverse=True)
    assert len(report.table(top=10).splitlines()) == 2 + len(report.rows)


def test_dump_is_a_pstats_file(tmp_path):
    report = profile(opbench.Timer(top_level), number=10)
    report.dump(tmp_path / "out.prof")
    stats = pstats.Stats(str(tmp_path / "out.prof"))
    funcs = {name for (_, _, name) in stats.stats}
    assert {"top_level", "middle", "leaf"} <= funcs
    assert "_drive" not in funcs
    for (_, _, _, _, callers) in stats.stats.values():
        assert all(name != "_drive" for (_, _, name) in callers)


def test_thread_setting_is_applied():
    torch = pytest.importorskip("torch")
    seen = []
    wanted = 2 if torch.get_num_threads() == 1 else 1  # differs from the current setting
    profile(opbench.Timer(lambda: seen.append(torch.get_num_threads()), num_threads=wanted),
            number=5)
    assert set(seen) == {wanted}


def test_bad_input():
    with pytest.raises(ValueError, match="number must be a positive int"):
        profile(opbench.Timer(top_level), number=0)
    with pytest.raises(ValueError, match="sort key"):
        profile(opbench.Timer(top_level), number=5).sorted_by("alphabetical")
