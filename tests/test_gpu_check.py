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
                   "profiler kernel mean", "profiler kernel span", "torch.cuda.Event blocks",
                   "triton do_bench (cold)", "triton do_bench_cudagraph", "torch.utils.benchmark"):
        assert ("add_ 1K fp32", method) in methods
    cases = {r["case"] for r in rows}
    assert {"never-launched kernel", "graph-mode wall time", "clocks under a long GEMM",
            "64 kernels per call", "random-number op on torch's stream", "a timer freed inside a held block",
            "per-iteration against events (add_ 1K)", "a statement that synchronizes",
            "opbench before import torch", "kernel fault in a subprocess"} <= cases
    assert not [r for r in rows if "error" in r or r.get("ok") is False]
    fault = next(r for r in rows if r["case"] == "kernel fault in a subprocess")
    assert fault["reported"].endswith("700 True")  # opbench's error, the sticky error named
    skipped = [r for r in rows if "skipped" in r]
    assert skipped and all("GPU" in r["skipped"] for r in skipped)  # the peers that need a real GPU


@pytest.mark.slow
def test_like_is_judged_against_like(run):
    # On the fake, as on hardware, dependent kernels run a launch gap apart: the
    # profiler's per-kernel mean leaves the gaps out, its span (calls queued back to
    # back) keeps them, as held blocks do. Events are judged against the span, graph
    # mode against do_bench_cudagraph's median (graph replays against graph replays).
    out, _ = run
    summary = {r["method"]: r for r in rows_of(out) if r["case"] == "add_ 1K fp32" and "round" not in r}
    events, graph = summary["opbench events"], summary["opbench graph"]
    assert events["vs"] == "profiler kernel span" and events["ok"] is True
    assert graph["vs"] == "triton do_bench_cudagraph" and graph["ok"] is True and graph["graph_calls"] == 1000
    assert summary["profiler kernel span"]["per_call_s"] > summary["profiler kernel mean"]["per_call_s"]
    assert summary["profiler kernel span"]["emulated"] == "on the fake driver"
    assert events["rounds"] == 2 and "span_ratio" in graph


@pytest.mark.slow
def test_the_peers_and_opbench_are_interleaved_round_by_round(run):
    out, _ = run
    rounds = [r for r in rows_of(out) if r["case"] == "add_ 1K fp32" and "round" in r]
    order = [[r["method"] for r in rounds if r["round"] == i] for i in (0, 1)]
    assert order[0] and order[1] == order[0][::-1]  # every method each round, the order reversed
    assert "profiler kernel span" in order[0] and "opbench events" in order[0]


@pytest.mark.slow
def test_the_table_is_printed_from_the_files(run):
    out, proc = run
    tail = proc.stdout[proc.stdout.index("==== table"):]
    shown = [r for r in rows_of(out) if "round" not in r]  # the rounds are summarised
    assert f"{len(shown)} rows, 0 failed or errored" in tail
    assert "opbench graph" in tail and "PASS" in tail


def test_rounds_alternate_the_order_and_drop_a_method_that_fails(tmp_path):
    calls = []

    def method(name, fail=False):
        def measure():
            calls.append(name)
            if fail:
                raise RuntimeError("no GPU")
            return 1e-6
        return measure

    rows = gpu_check.Rows(tmp_path, "kernels")
    figures, failed = gpu_check.rounds({"a": method("a"), "b": method("b", fail=True), "c": method("c")}, 3,
                                       rows, "k")
    assert calls == ["a", "b", "c", "c", "a", "a", "c"]
    assert figures == {"a": [1e-6] * 3, "b": [], "c": [1e-6] * 3}
    assert failed == {"b": "RuntimeError: no GPU"}


class _Device:
    """A device whose graph mode raises: no row may use another mode's figure in its place."""

    quick = True
    emulated = ()

    def kernels(self):
        yield "triton add", self.no_triton  # a kernel that cannot be made: a row, not the end of the step
        yield "k", lambda: (lambda: None)

    @staticmethod
    def no_triton():
        raise ImportError("No module named 'triton'")

    def peers(self, fn):
        return {"profiler kernel span": lambda: 2e-6, "triton do_bench_cudagraph": lambda: 1e-6,
                **{n: "needs a GPU" for n in gpu_check.PEERS if n not in ("profiler kernel span",
                                                                          "triton do_bench_cudagraph")}}


def test_a_mode_that_raises_is_an_error_row_not_a_stale_ratio(tmp_path, monkeypatch):
    def opbench(fn, mode, cache, min_run_time):
        if mode == "graph":
            raise RuntimeError("capture failed")
        return 2.1e-6, 0.01, {}

    monkeypatch.setattr(gpu_check, "_opbench", opbench)
    gpu_check.kernels_group(_Device(), gpu_check.Rows(tmp_path, "kernels"))  # no NameError
    summary = {r["method"]: r for r in rows_of(tmp_path) if "round" not in r and r["case"] == "k"}
    assert [r["skipped"] for r in rows_of(tmp_path) if r["case"] == "triton add"] == [
        "No module named 'triton'"]
    assert summary["opbench graph"]["error"] == "RuntimeError: capture failed"
    assert "ratio" not in summary["opbench graph"] and not any("/" in m for m in summary)
    assert summary["opbench events"]["ratio"] == pytest.approx(1.05) and summary["opbench events"]["ok"]
    assert summary["profiler kernel mean"]["skipped"] == "needs a GPU"


def test_the_table_shows_rounds_only_where_the_summary_is_missing(tmp_path, capsys):
    rows = gpu_check.Rows(tmp_path, "kernels")
    rows.add("a", "opbench events", 1e-6, round=0)
    rows.add("a", "opbench events", 1e-6, rounds=1)
    rows.add("b", "opbench events", 3e-6, round=0)  # killed before its summary
    assert gpu_check.table(tmp_path) == 0
    text = capsys.readouterr().out
    assert "2 rows, 0 failed" in text and '"round": 0' in text


def test_gpu_tests_are_selected_by_their_prefix_only():
    # `-k gpu_` also selected fake-driver tests ("..._the_gpu_is_busy"); the script
    # selects `-k test_gpu_` from the files it names.
    script = (ROOT / "tools" / "gpu-check").read_text()
    line = next(x for x in script.splitlines() if "-k test_gpu_" in x and not x.lstrip().startswith("#"))
    files = [w for w in (line + script.split(line)[0].splitlines()[-1]).split() if w.startswith("tests/")]
    assert files

    # Both selections in one process: the files' imports (torch) are paid once.
    code = ("import sys, pytest\n"
            "for expression in ('test_gpu_', 'gpu_'):\n"
            "    print('-k', expression, flush=True)\n"
            "    pytest.main(['--collect-only', '-q', '-p', 'no:cacheprovider', *sys.argv[1:],\n"
            "                 '-k', expression])\n")
    proc = subprocess.run([sys.executable, "-c", code, *files], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    parts = proc.stdout.split("-k gpu_\n")
    assert len(parts) == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    selected = [[n.split("::")[-1] for n in part.splitlines() if "::" in n] for part in parts]
    assert all(selected), proc.stdout[-2000:] + proc.stderr[-2000:]
    assert all(n.startswith("test_gpu_") for n in selected[0])
    assert not all(n.startswith("test_gpu_") for n in selected[1])


def test_a_failure_before_the_build_is_never_forgotten():
    # The in-tree fallback build reset status=0, wiping out a failed machine step.
    script = (ROOT / "tools" / "gpu-check").read_text()
    assignments = [x.strip() for x in script.splitlines() if x.strip().startswith("status=")]
    assert assignments[0] == "status=0"  # the start
    assert all(a in ("status=1", "status=$status_before") or a.startswith("status=$status_before ")
               for a in assignments[1:]), assignments


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
