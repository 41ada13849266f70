"""opbench.gate: results matched by key, one decision each, a policy, a report and an exit status."""
from __future__ import annotations

import json

import pytest

from opbench import Measurement, TaskSpec
from opbench.core.instructions import InstructionCounts
from opbench.errors import NothingToCompareError
from opbench.gate import compare, environment_differences, format_value


def _times(stmt: str, centre: float, n: int = 12, **spec: str) -> Measurement:
    return Measurement(1, [centre * (1 + i / 200) for i in range(n)], TaskSpec(stmt, "pass", **spec))


def _counts(stmt: str, count: int) -> InstructionCounts:
    return InstructionCounts(100, (count, count), TaskSpec(stmt, "pass"))


def test_a_clear_slowdown_fails_the_gate_and_a_clear_speedup_passes() -> None:
    report = compare([_times("a()", 1e-6), _times("b()", 1e-6)],
                     [_times("a()", 2e-6), _times("b()", 0.5e-6)])
    assert [(r.key, r.status) for r in report.rows] == [("a()", "regression"), ("b()", "improvement")]
    assert report.exit_status == 1
    assert report.failures == ["a(): 2.000x slower (regression)"]


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
    assert report.rows[0].samples == (7, 12)


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
