"""opbench.gate: results matched by key, one decision each, a policy, a report and an exit
status; one story (one ratio, words that match the exit status), decisions on runs when files
hold several, and per-benchmark thresholds."""
from __future__ import annotations

import json

import pytest

from opbench.core.formatting import format_value
from opbench.core.instructions import InstructionCounts
from opbench.core.measurement import Measurement, TaskSpec
from opbench.core.memory import MemoryCounts
from opbench.errors import NothingToCompareError
from opbench.gate import compare, environment_differences


def _m(t: float, name: str = "f", spread: float = 0.001, n: int = 40,
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
    from opbench.store.results import Results

    old = Results([_m(1e-6)], environment={"python": "3.11.7", "git_commit": "abc123"})
    new = Results([_m(1e-6)], environment={"python": "3.12.1"})
    report = compare(old, new)
    md = report.markdown()
    assert "- baseline: commit abc123; Python 3.11.7" in md and "- new: Python 3.12.1" in md
    assert json.loads(report.json())["environments"]["new"] == {"python": "3.12.1"}


def _times(stmt: str, centre: float, n: int = 40, **spec: str) -> Measurement:
    return Measurement(1, [centre * (1 + i / 200) for i in range(n)], TaskSpec(stmt, "pass", **spec))


def _counts(stmt: str, count: int) -> InstructionCounts:
    return InstructionCounts(100, (count, count), TaskSpec(stmt, "pass"))


def test_a_clear_slowdown_fails_the_gate_and_a_clear_speedup_passes() -> None:
    report = compare([_times("a()", 1e-6), _times("b()", 1e-6)],
                     [_times("a()", 2e-6), _times("b()", 0.5e-6)])
    assert [(r.key, r.status) for r in report.rows] == [("a()", "regression"), ("b()", "improvement")]
    assert report.exit_status == 1
    assert report.failures == ["a(): 2.000x slower (regression, threshold 5.0%)"]


def test_too_few_samples_is_a_possible_regression_the_policy_decides() -> None:
    old, new = [_times("a()", 1e-6, n=1)], [_times("a()", 2e-6, n=1)]
    assert compare(old, new).rows[0].status == "possible regression"
    assert compare(old, new).exit_status == 1  # inconclusive="fail" by default
    assert compare(old, new, inconclusive="warn").exit_status == 0
    assert compare(old, new, inconclusive="pass").failures == []


def test_missing_and_new_benchmarks_are_listed_and_missing_may_fail() -> None:
    old, new = [_times("a()", 1e-6), _times("gone()", 1e-6)], [_times("a()", 1e-6), _times("c()", 1e-6)]
    report = compare(old, new)
    assert (report.only_in_baseline, report.only_in_new) == (("gone()",), ("c()",))
    assert report.exit_status == 0
    assert compare(old, new, fail_on_missing=True).failures == ["gone(): missing from the new results"]


def test_counts_are_compared_with_counts_and_a_mix_is_set_aside() -> None:
    report = compare([_counts("a()", 50_000), _counts("b()", 50_000)],
                     [_counts("a()", 60_000), _times("b()", 1e-6)])
    assert [(r.key, r.kind, r.new) for r in report.rows] == [("a()", "instructions", 600.0)]
    assert report.rows[0].status == "regression"
    assert report.mismatched == ("b()",)


def test_a_count_row_shows_the_figures_its_ratio_divides() -> None:
    # Repeats that differ: each side's figure is its fewest, as InstructionCounts.per_run.
    old = InstructionCounts(100, (50_300, 50_000, 50_100), TaskSpec("a()", "pass"))
    new = InstructionCounts(100, (60_000, 60_600, 60_200), TaskSpec("a()", "pass"))
    (row,) = compare([old], [new]).rows
    assert (row.baseline, row.new) == (old.per_run, new.per_run) == (500.0, 600.0)
    assert row.decision.ratio == pytest.approx(row.new / row.baseline) == 1.2


def test_nothing_in_common_is_an_error_not_a_pass() -> None:
    with pytest.raises(NothingToCompareError, match="no benchmark is in both"):
        compare([_times("a()", 1e-6)], [_times("b()", 1e-6)])


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"inconclusive": "maybe"}, "inconclusive must be one of fail, warn, pass"),
    ({"threshold": -1}, "threshold")])
def test_bad_settings_are_rejected(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compare([_times("a()", 1e-6)], [_times("a()", 1e-6)], **kwargs)


def test_replicates_of_a_key_pool() -> None:
    report = compare([_times("a()", 1e-6, n=3), _times("a()", 1e-6, n=4)], [_times("a()", 1e-6)])
    assert report.rows[0].samples == (7, 40)


def test_every_format_renders_the_same_decision() -> None:
    report = compare([_times("a()", 1e-6, label="L")], [_times("a()", 2e-6, label="L")])
    data = json.loads(report.render("json"))
    assert data["passed"] is False and data["rows"][0]["status"] == "regression"
    assert "regression" in report.render("text") and "|" in report.render("markdown")
    with pytest.raises(ValueError):
        report.render("html")


def test_environment_differences_name_what_bears_on_timings() -> None:
    old = {"torch": "2.13.0", "hostname": "a", "cpu_count": 2, "python": None}
    new = {"torch": "2.14.1", "hostname": "a", "cpu_count": 4, "python": "3.11"}
    # Python is missing on one side: skipped, not reported as a difference.
    assert environment_differences(old, new) == ["CPU count: 2 vs 4", "torch: 2.13.0 vs 2.14.1"]


def test_format_value() -> None:
    assert format_value(1.23e-5, "time") == "12.3 us"
    assert format_value(41_234.4, "instructions") == "41,234 instr"


def test_redacted_reports_name_no_host_and_no_folder() -> None:
    """Issue 34: --redact leaves out host names (in the environments and wherever a note
    repeats one) and absolute paths, for a public PR comment."""
    from opbench.store.results import Results

    key = "/home/ann/proj/bench.py::test_sort"
    old = Results([_m(1e-6, name=key)], environment={"hostname": "build-host-7", "python": "3.11"})
    new = Results([_m(2e-6, name=key)], environment={"hostname": "build-host-8", "python": "3.11"})
    import hostile

    redacted = hostile.redacted(compare(old, new), "build-host-7", "build-host-8", "/home/ann")
    assert redacted.rows[0].key == "…/bench.py::test_sort"
    assert "machine: <host> vs <host>" in redacted.environment_notes[0]
    assert redacted.exit_status == 1


def _memory(allocations: int, nbytes: int = 4096, leak: int = 0) -> MemoryCounts:
    host = {"allocations": (allocations * 100,) * 3, "bytes": (nbytes * 100,) * 3,
            "peak": (nbytes,) * 3, "growth": (leak * 100,) * 3}
    return MemoryCounts(100, {"host": host}, TaskSpec("f()", "pass", name="f"))


def test_memory_counts_give_a_row_per_figure_and_one_more_allocation_fails():
    report = compare([_memory(100)], [_memory(101, leak=64)], threshold=0.05)
    rows = {r.key: r for r in report.rows}
    assert set(rows) == {"f [allocations]", "f [bytes]", "f [peak]", "f [leak]"}
    assert rows["f [allocations]"].status == "regression"  # 1% more, past a 5% threshold
    assert rows["f [leak]"].status == "regression" and rows["f [bytes]"].status == "same"
    assert "f [allocations]: 1.010x more (regression" in report.text()
    assert "101 allocs" in report.text() and "64 B" in report.text() and "exact" in report.text()
    assert report.exit_status == 1
    json.loads(report.json())  # finite ratios: a zero baseline counts as one
    assert compare([_memory(5)], [_memory(5)], threshold=0.05).exit_status == 0


def test_rounds_of_memory_counts_are_decided_by_the_gates_rules():
    # opbench ab's rounds and the gate decide one allocation a call more alike: a regression
    # (1% more: the relative rule of instruction counts would call it the same).
    from opbench.gate.rounds import decide_rounds
    from opbench.store.results import Results

    rounds = [(Results(memory=[_memory(100)]), Results(memory=[_memory(101, leak=64)]))] * 2
    rows = {r.key: r for r in decide_rounds(rounds, threshold=0.05, confidence=0.95,
                                            inconclusive="fail", look=1, looks=1).rows}
    gate = {r.key: r for r in compare([_memory(100)], [_memory(101, leak=64)],
                                      threshold=0.05).rows}
    assert set(rows) == set(gate)
    for key, row in rows.items():
        assert (row.status, row.baseline, row.new) == (gate[key].status, gate[key].baseline,
                                                       gate[key].new)
    assert rows["f [allocations]"].status == "regression" and rows["f [leak]"].status == "regression"


def test_the_columns_are_the_figures_the_ratio_divides() -> None:
    # One run a side: each side's 10th percentile of per-run times, New / Baseline = Ratio.
    one = compare([_m(1e-6, spread=0.05)], [_m(1.5e-6, spread=0.05)]).rows[0]
    assert one.new / one.baseline == pytest.approx(one.decision.ratio)
    assert one.baseline == pytest.approx(sorted(_m(1e-6, spread=0.05).times)[0] * 1.0, rel=0.05)
    # Several runs a side: the geometric means of the runs' figures.
    base = [_m(1e-6 * f) for f in (0.97, 1.0, 1.03)]
    new = [_m(1.2e-6 * f) for f in (1.02, 0.99, 1.0)]
    many = compare(base, new).rows[0]
    assert many.runs == (3, 3)
    assert many.new / many.baseline == pytest.approx(many.decision.ratio)
    text = compare(base, new).text()
    assert f"{many.decision.ratio:.3f}" in text


def test_a_same_of_the_equivalence_test_shows_its_level() -> None:
    import math

    # Blocks spread so that the 95% interval straddles +5% while the 90% one lies within.
    spread = [1e-6 * math.exp(0.15 * ((i * 7919) % 40 - 20) / 20) for i in range(40)]
    report = compare([Measurement(1, spread, TaskSpec("f()", "pass", name="f"))],
                     [Measurement(1, [t * 1.01 for t in spread], TaskSpec("f()", "pass",
                                                                          name="f"))])
    (row,) = report.rows
    assert row.status == "same" and row.decision.confidence == 0.9
    assert row.decision.ci[1] < 1.05 and "(90%)" in report.text()
