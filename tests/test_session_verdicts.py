"""opbench.gate.session_verdicts (ABReport): one story in text, Markdown and JSON, with both
commits and environments."""
from __future__ import annotations

import json

from opbench.callgrind.function_diff import FunctionChange
from opbench.core.measurement import Measurement, TaskSpec
from opbench.gate import compare
from opbench.gate.session_verdicts import ABReport, FailedRun, Side


def _m(name: str, t: float) -> Measurement:
    return Measurement(1, [t * (1 + i / 1000) for i in range(40)], TaskSpec("f()", "pass", name=name))


def _report(**kwargs: object) -> ABReport:
    gate = compare([_m("slow", 1e-6), _m("fast", 1e-6), _m("flat", 1e-6)],
                   [_m("slow", 2e-6), _m("fast", 0.5e-6), _m("flat", 1e-6)])
    env = {"python": "3.11.7", "torch": "2.13.0", "hostname": "ci-1", "cpu_count": 2}
    fields: dict[str, object] = dict(
        gate=gate, base=Side("base", "main", "a" * 40, env, 3),
        head=Side("head", "working tree", "b" * 40 + "+dirty", dict(env, torch="2.14.0"), 3),
        command=("pytest", "-q"), mode="time", rounds=3, max_rounds=5, interleave="turns",
        failed=(FailedRun("head", 2, "exited with status 1; last output: boom"),),
        seconds=12.5)
    fields.update(kwargs)
    return ABReport(**fields)  # type: ignore[arg-type]


def test_markdown_is_a_pr_comment_regressions_first_the_rest_folded() -> None:
    md = _report().markdown()
    lines = md.splitlines()
    assert lines[0] == "### opbench: 1 regression — 1 of 3 benchmark(s) slower"
    assert f"**base main ({'a' * 12})** vs **head working tree ({'b' * 12})**" in md
    regressions = md.index("| slow |")
    folded = md.index("<details><summary>2 other benchmark(s)</summary>")
    assert regressions < folded < md.index("| fast |") and md.index("| flat |") > folded
    assert "1 failed run(s), not counted" in md and "round 2, head: exited with status 1" in md
    assert "warning: the sides ran in different environments: torch: 2.13.0 vs 2.14.0" in md
    assert "FAILED: 1 regression in 3 benchmark(s)." in md


def test_text_and_json_carry_both_commits_environment_and_exit_status() -> None:
    report = _report()
    text = report.text()
    assert text.startswith("opbench ab: base main (aaaaaaaaaaaa) vs head working tree "
                           "(bbbbbbbbbbbb), time mode\n3 of up to 5 round(s)")
    assert f"base: commit {'a' * 40}; Python 3.11.7; torch 2.13.0" in text
    doc = json.loads(report.json())
    assert doc["base"]["commit"] == "a" * 40 and doc["head"]["environment"]["torch"] == "2.14.0"
    assert doc["exit_status"] == report.exit_status == 1
    assert doc["gate"]["rows"][0]["key"] == "slow" and doc["gate"]["rows"][0]["status"] == "regression"
    assert doc["failed_runs"] == [{"side": "head", "round": 2,
                                   "problem": "exited with status 1; last output: boom"}]


def test_no_regression_and_interrupted_and_function_tables() -> None:
    change = FunctionChange("Python/ceval.c:_PyEval_EvalFrameDefault [/usr/lib/libpython3.11.so]",
                            "Python interpreter", (100.0, 110.0), (300.0, 330.0))
    report = _report(gate=compare([_m("flat", 1e-6)], [_m("flat", 1e-6)]), interrupted=True,
                     functions=(("flat", (change,)),), mode="instructions")
    assert report.markdown().startswith("### opbench: no regression (1 benchmark(s) compared)")
    text = report.text()
    assert "INTERRUPTED (Ctrl-C): the rounds that finished are reported" in text
    assert "Python/ceval.c:_PyEval_EvalFrameDefault [libpython3.11.so]" in text
    assert "+10.0" in text
    assert "Native functions whose instructions per call changed most: flat" in report.markdown()
    assert json.loads(report.json())["functions"]["flat"][0]["exclusive"] == [100.0, 110.0]
    assert _report(gate=None).exit_status == 1


def test_python_functions_come_first_named_by_qualname_file_and_line() -> None:
    from opbench.callgrind.function_diff import PYTHON

    native = FunctionChange("Objects/descrobject.c:property_descr_get [/usr/lib/libpython3.11.so]",
                            "Python interpreter", (10.0, 30.0), (10.0, 30.0))
    python = (FunctionChange("pkg/version.py:Version._key", PYTHON, (50.0, 95.0), (60.0, 130.0), 88),
              FunctionChange("pkg/version.py:Version.__lt__", PYTHON, (40.0, 41.0), (100.0, 171.0),
                             120))
    report = _report(functions=(("sort", (native,)),), python_functions=(("sort", python),),
                     mode="instructions")
    text = report.text()
    first = text.index("Python functions whose own instructions per call changed most: sort")
    assert first < text.index("Native functions whose instructions per call changed most: sort")
    rows = text[first:].splitlines()
    assert rows[2].split()[:2] == ["Version._key", "(pkg/version.py:88)"] and "+45.0" in rows[2]
    assert rows[3].split()[:2] == ["Version.__lt__", "(pkg/version.py:120)"]
    md = report.markdown()
    assert "| Version.\\_key (pkg/version.py:88) | 50.0 | 95.0 | +45.0 | 60.0 | 130.0 |" in md
    doc = json.loads(report.json())["python_functions"]["sort"]
    assert doc[0]["line"] == 88 and doc[0]["group"] == PYTHON


def test_redacted_names_no_host_and_no_folder() -> None:
    """Issue 34: ``opbench ab --redact`` leaves host names and absolute paths out."""
    change = FunctionChange("/home/ann/src/ceval.c:f [/usr/lib/libpython3.11.so]",
                            "Python interpreter", (100.0, 110.0), (300.0, 330.0))
    report = _report(failed=(FailedRun("head", 2, 'File "/home/ann/proj/bench.py", line 3 '
                                                  "on ci-1"),),
                     functions=(("/home/ann/proj/bench.py::f", (change,)),),
                     notes=("saved to /home/ann/keep",))
    import hostile

    redacted = hostile.redacted(report, "ci-1", "/home/ann")
    assert redacted.failed[0].problem == 'File "…/bench.py", line 3 on <host>'
