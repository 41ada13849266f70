"""Bisect (opbench.revisions.bisection): the commit of a known step, found in about log2(N)
steps (the `opbench find` command's tests are in test_cli_find.py)."""
from __future__ import annotations

import sys

import pytest

import history_repo
from opbench.revisions import bisection


def test_the_api_returns_every_probe(history_commits):
    path, commits = history_commits
    found = bisection.find("jump", commits[5], commits[20], [sys.executable, "bench.py"],
                           repo=path, runs=2)
    assert found.first_bad.commit == commits[history_repo.STEP_AT]
    assert found.last_good.commit == commits[history_repo.STEP_AT - 1]
    assert found.size == pytest.approx(0.15, abs=0.02)
    assert [p.verdict for p in found.probes[:2]] == ["good", "bad"]
    assert all(len(p.values) >= 2 for p in found.probes) and found.steps <= 4


def test_only_the_first_runs_at_good_and_bad_run_everything(history_commits, tmp_path):
    """Issue 38: find re-ran the whole suite at every step; later runs ask for the one
    benchmark (``$OPBENCH_SELECT``), and what else changed is named from the first runs."""
    path, commits = history_commits
    log = tmp_path / "log"
    command = [sys.executable, "-c",
               f"import os, runpy; open({str(log)!r}, 'a').write(os.environ.get('OPBENCH_SELECT',"
               " '-') + '\\n'); runpy.run_path('bench.py', run_name='__main__')"]
    lines: list[str] = []
    found = bisection.find("jump", commits[9], commits[16], command, repo=path, runs=1,
                           progress=lines.append)
    asked = log.read_text().splitlines()
    assert asked[0] == "-" and asked.count("-") == 2  # GOOD's and BAD's first runs
    assert set(asked) - {"-"} == {'["jump"]'} and len(asked) == len(
        [v for p in found.probes for v in p.values])
    assert any("run 'jump' alone" in line for line in lines)


def test_what_else_changed_between_good_and_bad_is_named():
    from opbench.core.measurement import Measurement, TaskSpec
    from opbench.store.results import Results

    def run(**figures: float) -> Results:
        return Results([Measurement(1, [t * (1 + i / 1000) for i in range(60)],
                                    TaskSpec("f()", "pass", name=k)) for k, t in figures.items()])

    good, bad = run(jump=1e-6, other=1e-6, flat=5e-6), run(jump=2e-6, other=0.7e-6, flat=5e-6)
    ((key, size),) = bisection._changed(good, bad, "jump")
    assert key == "other" and size == pytest.approx(-0.3, abs=0.01)
