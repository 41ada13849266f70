"""opbench.gate: one story (one ratio, words that match the exit status), decisions on runs
when files hold several, and per-benchmark thresholds."""
from __future__ import annotations

import json

from opbench.core.measurement import Measurement, TaskSpec
from opbench.gate import compare


def _m(t: float, name: str = "f", spread: float = 0.001, n: int = 20,
       info: dict | None = None) -> Measurement:
    return Measurement(1, [t * (1 + spread * (i % 7 - 3)) for i in range(n)],
                       TaskSpec("f()", "pass", name=name), info=dict(info or {}))


def test_one_ratio_in_the_column_the_failure_line_and_json() -> None:
    report = compare([_m(1e-6, spread=0.05)], [_m(1.9e-6, spread=0.05)])
    (row,) = report.rows
    ratio = f"{row.decision.ratio:.3f}"
    assert f"  {ratio}  " in report.text()
    assert f"f: {ratio}x slower (regression" in report.text()
    assert json.loads(report.json())["rows"][0]["ratio"] == row.decision.ratio


def test_words_match_the_exit_status() -> None:
    slow = compare([_m(1e-6)], [_m(2e-6)], enforced=False)
    assert slow.exit_status == 0 and slow.failures
    assert "FAILED" not in slow.text() and "NOT FAILING: 1 regression found" in slow.text()
    assert "(not failing)" in slow.markdown().splitlines()[0]
    # A possible regression alone is not called "regressions found".
    possible = compare([_m(1e-6, n=3)], [_m(2e-6, n=3)])
    assert possible.rows[0].status == "possible regression"
    assert possible.markdown().startswith("### opbench: 1 possible regression — 1 of 1")


def test_one_run_a_side_says_its_interval_is_within_run_only() -> None:
    text = compare([_m(1e-6)], [_m(1e-6)]).text()
    assert "Each side has one run: their intervals come from the blocks of one process" in text


def test_several_runs_a_side_are_decided_on_the_runs() -> None:
    # Every run is tight inside (blocks within 0.1%) but runs differ by +-6%: the blocks'
    # interval would call a 4% difference "same"... or "slower"; the runs' cannot tell.
    base = [_m(1e-6 * f) for f in (0.94, 1.0, 1.06)]
    new = [_m(1.04e-6 * f) for f in (1.06, 0.94, 1.0)]
    (row,) = compare(base, new).rows
    assert row.runs == (3, 3) and row.decision.verdict == "inconclusive"
    assert row.decision.ci is not None and row.decision.ci[0] < 1 < row.decision.ci[1]
    pooled = compare([_m(1e-6)], [_m(1.04e-6)]).rows[0]
    assert pooled.runs == (1, 1) and pooled.decision.ci[1] - pooled.decision.ci[0] < 0.01


def test_a_benchmarks_own_threshold_wins() -> None:
    report = compare([_m(1e-6), _m(1e-6, name="g")],
                     [_m(1.2e-6, info={"threshold": 0.3}), _m(1.2e-6, name="g")])
    rows = {r.key: r for r in report.rows}
    assert rows["f"].status == "same" and rows["f"].decision.threshold == 0.3
    assert rows["g"].status == "regression"
    assert "(some benchmarks set their own)" in report.text()


def test_re_measurements_are_shown() -> None:
    again = {"remeasured": {"measurements": 3, "how": "pooled"}}
    text = compare([_m(1e-6)], [_m(1e-6, info=again)]).text()
    assert "Measured again because they looked slower (all measurements pooled): " \
           "f: 3 measurements pooled" in text


def test_reports_carry_both_environments() -> None:
    from opbench.results import Results

    old = Results([_m(1e-6)], environment={"python": "3.11.7", "git_commit": "abc123"})
    new = Results([_m(1e-6)], environment={"python": "3.12.1"})
    report = compare(old, new)
    md = report.markdown()
    assert "- baseline: commit abc123; Python 3.11.7" in md and "- new: Python 3.12.1" in md
    assert json.loads(report.json())["environments"]["new"] == {"python": "3.12.1"}
