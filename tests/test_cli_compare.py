"""`python -m opbench compare`: ratio table, verdicts and a CI-gating exit status."""
from __future__ import annotations

import math
import random
import re
import subprocess
import sys

import pytest

from opbench.cli import main
from opbench.cli.compare import parse_threshold, ratio_ci
from opbench.cli import UsageError
from opbench.measurement import Measurement, TaskSpec
from opbench.results import save

ENV = {"hostname": "h"}


def times(seed, scale=1.0, n=40):
    rng = random.Random(seed)
    return [1e-5 * scale * (1 + rng.gauss(0, 0.01)) for _ in range(n)]


def m(stmt, ts, **spec):
    return Measurement(1, ts, TaskSpec(stmt, "pass", **spec))


def write(tmp_path, name, measurements):
    return str(save(measurements, tmp_path / name, environment=ENV))


def run_cli(capsys, *argv):
    code = main(["compare", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_regression_beyond_threshold_fails(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1)), m("b()", times(2), label="B")])
    new = write(tmp_path, "new.json", [m("a()", times(3)), m("b()", times(4, 1.2), label="B")])
    code, out, _ = run_cli(capsys, base, new, "--threshold", "5%")
    assert code == 1
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert lines["a()"].endswith("same")
    assert lines["B"].endswith("slower") and " 1.2" in lines["B"]
    assert "REGRESSION" in out


def test_improvement_and_small_changes_pass(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1)), m("b()", times(2))])
    new = write(tmp_path, "new.json", [m("a()", times(3, 0.8)), m("b()", times(4, 1.03))])
    code, out, _ = run_cli(capsys, base, new, "--threshold", "0.05")
    assert code == 0
    assert "faster" in out and "No significant regression" in out
    code, out, _ = run_cli(capsys, base, new, "--threshold", "1%")
    assert code == 1  # 3% slower is a regression at a 1% threshold


def test_unmatched_tasks_are_listed(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1)), m("old()", times(2))])
    new = write(tmp_path, "new.json", [m("a()", times(3)), m("a()", times(5), num_threads=2)])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 0
    assert "Only in baseline (not compared):\n  old()" in out
    assert "Only in new (not compared):\n  a() 2 threads" in out


def test_single_times_are_inconclusive_not_a_verdict(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", [1e-5])])
    new = write(tmp_path, "new.json", [m("a()", [2e-5])])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 0 and "too few times" in out and "inconclusive" in out


def test_replicates_are_pooled(tmp_path, capsys):
    base = write(tmp_path, "base.json", [m("a()", times(1, n=20)), m("a()", times(2, n=20))])
    new = write(tmp_path, "new.json", [m("a()", times(3, 1.5))])
    code, out, _ = run_cli(capsys, base, new)
    assert code == 1 and out.count("a()") == 1


@pytest.mark.parametrize("content, match", [
    (None, "cannot load .*missing.json"),
    ("{\"format\": \"opbench-res", "truncated or corrupt JSON at line 1"),
    ('{"format": "opbench-results", "version": 9, "environment": {}, "measurements": []}',
     "newer opbench"),
])
def test_bad_files_are_usage_errors(tmp_path, capsys, content, match):
    base = write(tmp_path, "base.json", [m("a()", times(1))])
    other = tmp_path / "missing.json"
    if content is not None:
        other.write_text(content)
    code, out, err = run_cli(capsys, base, str(other))
    assert code == 2 and out == ""
    assert re.search(match, err), err


def test_threshold_parsing(tmp_path, capsys):
    assert parse_threshold("5%") == pytest.approx(0.05)
    assert parse_threshold(" 0.02 ") == 0.02
    for bad in ("five", "0", "150%", "-1%"):
        with pytest.raises(UsageError, match="threshold"):
            parse_threshold(bad)
    base = write(tmp_path, "base.json", [m("a()", times(1))])
    code, _, err = run_cli(capsys, base, base, "--threshold", "lots")
    assert code == 2 and "--threshold" in err


def test_ratio_ci_of_an_exact_factor():
    base = times(1)
    ratio, lo, hi = ratio_ci(base, [t * 1.1 for t in base], 0.95)
    assert ratio == pytest.approx(1.1) and lo <= 1.1 <= hi and hi / lo < 1.02
    assert ratio_ci([1.0, 2.0], [1.0, 2.0], 0.95) is None
    big = ratio_ci(times(1, n=2000), times(2, n=2000), 0.95)  # thinned, still sane
    assert big[1] <= 1 <= big[2] and math.isclose(big[0], 1, rel_tol=0.01)


def test_module_entry_point(tmp_path):
    base = write(tmp_path, "base.json", [m("a()", times(1))])
    new = write(tmp_path, "new.json", [m("a()", times(2, 2.0))])
    proc = subprocess.run([sys.executable, "-m", "opbench", "compare", base, new],
                          capture_output=True, text=True)
    assert proc.returncode == 1 and "slower" in proc.stdout
