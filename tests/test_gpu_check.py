"""tools/gpu-check: the one-command hardware check, run end to end against the fake driver.

The GPU machine runs ``tools/gpu-check`` once, under a time limit; here ``--fake``
stands the fake driver of tests/fake_cuda in for the GPU, so the script itself
(its steps, timeouts, rows written as they are measured, log and table) is what
CI tests. ``tools/gpu_check.py``'s table is tested on rows cut short by a kill.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fake_cuda import library

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import gpu_check  # noqa: E402 (tools/ is no package)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    library()  # compiled once here (skips without a compiler), not inside a step's timeout
    out = tmp_path_factory.mktemp("gpu-check-out")
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable}
    proc = subprocess.run([str(ROOT / "tools" / "gpu-check"), "--fake", "--quick"], env=env,
                          capture_output=True, text=True, timeout=400, check=False)
    return out, proc


def rows_of(out: Path) -> list[dict]:
    return [json.loads(line) for path in sorted(out.glob("*.jsonl"))
            for line in path.read_text().splitlines()]


@pytest.mark.slow  # runs the whole script (compiles the fake driver)
def test_the_check_runs_end_to_end_on_the_fake_driver(run):
    out, proc = run
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in out.glob("*.jsonl")) == ["behaviour.jsonl", "fault.jsonl", "kernels.jsonl"]
    log = (out / "gpu-check.log").read_text()
    for step in ("machine", "import opbench", "kernels", "behaviour", "fault", "table"):
        assert f"==== {step} (limit" in log
    assert "gpu tests" not in log  # the fake-driver tests are CI's, never the GPU's
    assert "every step passed" in proc.stdout


@pytest.mark.slow
def test_every_row_the_issue_lists_is_there(run):
    out, _ = run
    rows = rows_of(out)
    methods = {(r["case"], r["method"]) for r in rows}
    for method in ("opbench events", "opbench graph", "opbench per_iteration", "opbench per_iteration cold",
                   "profiler kernel mean", "torch.cuda.Event blocks", "triton do_bench (cold)",
                   "triton do_bench_cudagraph", "torch.utils.benchmark"):
        assert ("add_ 1K fp32", method) in methods
    cases = {r["case"] for r in rows}
    assert {"never-launched kernel", "graph-mode wall time", "clocks under a long GEMM",
            "64 kernels per call", "a statement that synchronizes", "opbench before import torch",
            "kernel fault in a subprocess"} <= cases
    assert not [r for r in rows if "error" in r or r.get("ok") is False]
    graph = next(r for r in rows if r["case"] == "add_ 1K fp32" and r["method"] == "opbench graph")
    assert graph["ratio"] == pytest.approx(1.0, abs=1e-3) and graph["graph_calls"] == 1000
    fault = next(r for r in rows if r["case"] == "kernel fault in a subprocess")
    assert fault["reported"].endswith("700 True")  # the sticky error, named
    skipped = [r for r in rows if "skipped" in r]
    assert skipped and all("GPU" in r["skipped"] for r in skipped)  # the peers need a real GPU


@pytest.mark.slow
def test_the_table_is_printed_from_the_files(run):
    out, proc = run
    tail = proc.stdout[proc.stdout.index("==== table"):]
    assert f"{len(rows_of(out))} rows, 0 failed or errored" in tail
    assert "opbench graph" in tail and "PASS" in tail


def test_the_table_survives_a_row_cut_short_by_a_kill(tmp_path, capsys):
    rows = gpu_check.Rows(tmp_path, "kernels")
    rows.add("add_ 1K fp32", "opbench events", 2e-6, ratio=1.01, ok=True)
    rows.add("mm bf16 256", "opbench graph", 5e-6, ratio=1.3, ok=False)
    with rows.attempt("copy_ 1 GiB fp32", "opbench events"):
        raise RuntimeError("CUDA out of memory")
    with open(tmp_path / "kernels.jsonl", "a") as f:
        f.write('{"group": "kernels", "case": "cut')  # the line a kill interrupted
    assert gpu_check.table(tmp_path) == 1
    text = capsys.readouterr().out
    assert "3 rows, 2 failed or errored" in text
    assert "RuntimeError: CUDA out of memory" in text and "FAIL" in text and "PASS" in text


def test_a_run_out_of_time_skips_what_does_not_fit_and_still_prints_the_table(tmp_path):
    # Each step gets what is left of the budget, less the table's 15 s: with 19 s
    # no step but the table fits whatever the machine's speed (a budget that
    # leaves a step a few seconds would make this test depend on load), so the
    # steps are skipped and the table is printed all the same.
    library()
    env = {**os.environ, "OUT": str(tmp_path), "PYTHON": sys.executable, "GPU_CHECK_BUDGET_S": "19"}
    proc = subprocess.run([str(ROOT / "tools" / "gpu-check"), "--fake"], env=env, capture_output=True,
                          text=True, timeout=200, check=False)
    assert proc.returncode == 1
    log = (tmp_path / "gpu-check.log").read_text()
    assert "STEP SKIPPED: machine (no time left of the 19 s)" in log
    assert "STEP SKIPPED: kernels (" in log
    table = proc.stdout.split("==== table")[-1]
    assert "==== table (limit" in log and ("rows, " in table or "no rows in" in table)


def test_rows_written_before_a_kill_are_kept(tmp_path):
    # The rows are on disk as they are measured: SIGKILL right after the first
    # one (what `timeout` does at the limit) loses none of them.
    library()
    proc = subprocess.Popen([sys.executable, str(ROOT / "tools" / "gpu_check.py"), "rows", "kernels",
                             str(tmp_path), "--fake"], stdout=subprocess.DEVNULL)
    rows = tmp_path / "kernels.jsonl"
    deadline = time.monotonic() + 120
    while not (rows.exists() and rows.read_text().count("\n") >= 3) and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    kept = rows.read_text().splitlines()
    assert len(kept) >= 3 and all(json.loads(line)["group"] == "kernels" for line in kept)
    assert gpu_check.table(tmp_path) in (0, 1)
