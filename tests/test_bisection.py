"""Bisect (opbench.gate.bisection): the commit of a known step, found in about log2(N)
steps (the `opbench find` command's tests are in test_cli_find.py)."""
from __future__ import annotations

import sys

import pytest

import history_repo
from opbench.gate import bisection


def test_the_api_returns_every_probe(history_commits):
    path, commits = history_commits
    found = bisection.find("jump", commits[5], commits[20], [sys.executable, "bench.py"],
                           repo=path, runs=2)
    assert found.first_bad.commit == commits[history_repo.STEP_AT]
    assert found.last_good.commit == commits[history_repo.STEP_AT - 1]
    assert found.size == pytest.approx(0.15, abs=0.02)
    assert [p.verdict for p in found.probes[:2]] == ["good", "bad"]
    assert all(len(p.values) >= 2 for p in found.probes) and found.steps <= 4
