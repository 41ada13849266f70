"""A/B verdicts: in one process (opbench.compare_ab vs torch.utils.benchmark), and between
two git revisions of a pytest suite (opbench ab vs compare on one run each vs pytest-benchmark).

Part 1, in one process. Two comparisons of torch statements:
- identical: ``torch.add(x, 1, out=y)`` ten times against the same statement; the
  right answer is "same".
- known difference: the same op ten times against eleven times, i.e. about 10% more
  work (a little less: the loop overhead is shared); the right answer is "slower".
opbench runs A and B interleaved with one block size and reports the ratio B/A with a
95% confidence interval and a verdict. torch.utils.benchmark has no A/B mode: the peer
row times A and then B with ``blocked_autorange`` and prints the ratio of medians, which
has no interval and no verdict, so noise and drift between the two runs go unnoticed.

Part 2, two revisions. Each repetition makes a git repository holding the gate
benchmark's suite (a loop of 3000 additions, ``benchmarks/gate.py``), commits it as
the base, and edits the working tree to the same function unchanged, 5% slower, 10%
slower or 2x slower. For each, whether each tool fails (exit status 1):
- ``opbench ab --base HEAD`` (its defaults: one wave of three rounds, the three base and
  three head processes at once, taking turns to time), and with ``--with-runs`` also
  ``--rounds 5 --interleave runs`` (one run after the other, ABBA);
- ``compare`` on one run each: ``--opbench-save`` at the base, then
  ``--opbench-compare --opbench-fail-above 5%``;
- pytest-benchmark: ``--benchmark-autosave`` then
  ``--benchmark-compare --benchmark-compare-fail=median:5%``;
and each tool's wall time against one plain pytest session of the suite, measured in
the same repetition. Instruction mode (``ab --mode instructions --threshold 0.5%``) on
an unchanged function and a 1% change: caught, and whether the report names the
function that changed. Tables are reprinted after every repetition, so a run cut
short still reports what it measured (the count is printed with them).

Part 3, why turns and why the 10th percentile. The same 10% change over
``--spread-rounds`` rounds of ``opbench ab`` taking turns and of ``--interleave runs``
(all rounds kept: no early stop): the range of the paired run ratios head / base (the
truth is about 1.10) and the coefficient of variation of each side's run values, with
each run summarised by its median and by its 10th percentile. Narrower is what lets few
rounds decide.

Usage: python benchmarks/ab.py [--quick] [--reps N] [--instruction-reps M] [--part 1|2|3|all]
       [--with-runs]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.utils.benchmark as tb
from gate import SUITE, N

import opbench
from opbench.gate.ab import compare_ab
from opbench.integrations.pytest_plugin.options import load_args

LOOP = "for _ in range({k}): torch.add(x, 1, out=y)"
# The suite reads its loop length from a file the working tree edits (the "change").
SUITE_AT_REVISION = SUITE.replace('N = int(os.environ["GATE_N"])',
                                  'N = int(open(os.path.join(os.path.dirname(__file__), '
                                  '"n.txt")).read())')
_GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.com"]


def in_process(quick: bool) -> None:
    """Part 1: compare_ab against torch's A-then-B."""
    min_time, max_time = (0.1, 0.6) if quick else (0.5, 10.0)
    warnings.simplefilter("ignore", opbench.BenchmarkWarning)
    torch.set_num_threads(1)
    data = {"x": torch.ones(4096), "y": torch.empty(4096)}
    cases = [("identical", LOOP.format(k=10), LOOP.format(k=10), "same"),
             ("+10% work", LOOP.format(k=10), LOOP.format(k=11), "slower")]
    print(f"{'case':<11} {'tool':<22} {'ratio B/A':>9}  {'95% CI':<17} {'verdict':<13} "
          f"{'expected':<8} seconds")
    for name, stmt_a, stmt_b, expected in cases:
        start = time.perf_counter()
        r = compare_ab(opbench.Timer(stmt_a, globals=data, description="A"),
                       opbench.Timer(stmt_b, globals=data, description="B"),
                       min_run_time=min_time, max_run_time=max_time)
        ours = time.perf_counter() - start
        print(f"{name:<11} {'opbench.compare_ab':<22} {r.ratio:>9.4f}  "
              f"{r.ci_low:.4f} to {r.ci_high:.4f}  {r.verdict:<13} {expected:<8} {ours:.2f}"
              f"   ({r.n_pairs} pairs x {r.number_per_run} runs)")
        start = time.perf_counter()
        a = tb.Timer(stmt_a, globals=data).blocked_autorange(min_run_time=min_time / 2)
        b = tb.Timer(stmt_b, globals=data).blocked_autorange(min_run_time=min_time / 2)
        peer = time.perf_counter() - start
        print(f"{'':<11} {'torch (A then B)':<22} {b.median / a.median:>9.4f}  {'(none)':<17} "
              f"{'(none)':<13} {expected:<8} {peer:.2f}")


def _pytest(*args: str) -> list[str]:
    return [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *load_args(),
            *args]


def _timed(command: list[str], folder: str) -> tuple[int, float, str]:
    env = dict(os.environ)
    env.pop("PYTEST_ADDOPTS", None)
    start = time.perf_counter()
    proc = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True,
                          timeout=1800)
    seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc.returncode, seconds, proc.stdout


def _repository(folder: str) -> None:
    with open(os.path.join(folder, "test_gate.py"), "w") as f:
        f.write(SUITE_AT_REVISION)
    with open(os.path.join(folder, "n.txt"), "w") as f:
        f.write(str(N))
    subprocess.run(["git", "init", "-q"], cwd=folder, check=True)
    subprocess.run([*_GIT, "add", "."], cwd=folder, check=True)
    subprocess.run([*_GIT, "commit", "-qm", "base"], cwd=folder, check=True)


def _set_n(folder: str, n: int) -> None:
    with open(os.path.join(folder, "n.txt"), "w") as f:
        f.write(str(n))


_OPBENCH = ("-k", "test_opbench")
_PB = ("-k", "test_pytest_benchmark", "--benchmark-storage=pb", "--benchmark-disable-gc")


def _time_repetition(factors: dict[str, float], rounds: int,
                     tools: list[str]) -> dict[str, dict[str, tuple[bool, float]]]:
    """One repetition: per tool and change, (failed, seconds / one plain session)."""
    out: dict[str, dict[str, tuple[bool, float]]] = {t: {} for t in tools}
    with tempfile.TemporaryDirectory(prefix="opbench_ab_bench_") as folder:
        _repository(folder)
        session = _timed(_pytest(*_OPBENCH), folder)[1]  # one plain session: the unit
        for name, factor in factors.items():
            for tool in tools:
                _set_n(folder, N)
                if tool.startswith("opbench ab"):
                    _set_n(folder, round(N * factor))
                    options = (["--rounds", str(rounds), "--interleave", "runs"] if "runs" in tool
                               else ["--rounds", str(min(rounds, 3))])
                    code, seconds, _ = _timed(
                        [sys.executable, "-m", "opbench", "ab", "--base", "HEAD", *options, "--",
                         *_pytest(*_OPBENCH)], folder)
                elif tool.startswith("compare"):
                    _, first, _ = _timed(_pytest(*_OPBENCH, "--opbench-save", "base.json"),
                                         folder)
                    _set_n(folder, round(N * factor))
                    code, second, _ = _timed(_pytest(*_OPBENCH, "--opbench-compare", "base.json",
                                                     "--opbench-fail-above", "5%"), folder)
                    seconds = first + second
                else:
                    shutil.rmtree(os.path.join(folder, "pb"), ignore_errors=True)
                    _, first, _ = _timed(_pytest(*_PB, "--benchmark-autosave"), folder)
                    _set_n(folder, round(N * factor))
                    code, second, _ = _timed(_pytest(*_PB, "--benchmark-compare",
                                                     "--benchmark-compare-fail=median:5%"), folder)
                    seconds = first + second
                out[tool][name] = (code == 1, seconds / session)
        _set_n(folder, N)
    return out


def _instruction_repetition(factors: dict[str, float]) -> dict[str, tuple[bool, bool]]:
    """(failed, named a CPython function as changed) per change, instruction mode."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="opbench_ab_bench_") as folder:
        _repository(folder)
        for name, factor in factors.items():
            _set_n(folder, round(N * factor))
            code, _, text = _timed(
                [sys.executable, "-m", "opbench", "ab", "--base", "HEAD", "--mode",
                 "instructions", "--threshold", "0.5%", "--format", "json", "--",
                 *_pytest(*_OPBENCH)], folder)
            functions = json.loads(text)["functions"].get("test_gate.py::test_opbench", [])
            named = any(f["group"] == "Python interpreter" and "EvalFrame" in f["function"]
                        for f in functions)
            out[name] = (code == 1, named)
    return out


def _cell(values: list[bool]) -> str:
    return f"{sum(values)}/{len(values)}" if values else "-"


def _print_tables(timed: list[dict[str, dict[str, tuple[bool, float]]]],
                  counted: list[dict[str, tuple[bool, bool]]], tools: list[str],
                  columns: list[str]) -> None:
    print(f"\nTwo revisions of a {N}-addition loop: {len(timed)} repetition(s) per cell; cells: "
          "failed sessions / sessions; time: median over the cells of wall time / one plain "
          "pytest session", flush=True)
    heads = ["false alarms", "5% caught", "10% caught", "2x caught", "time"]
    print(f"{'tool':<44} " + " ".join(f"{h:>12}" for h in heads))
    for tool in tools:
        cells = [_cell([rep[tool][c][0] for rep in timed if c in rep[tool]]) for c in columns]
        ratios = sorted(rep[tool][c][1] for rep in timed for c in rep[tool])
        median = ratios[len(ratios) // 2] if ratios else float("nan")
        print(f"{tool:<44} " + " ".join(f"{c:>12}" for c in cells) + f" {median:>11.1f}x")
    if counted:
        print(f"\nInstruction mode (ab --mode instructions --threshold 0.5%), {len(counted)} "
              "repetition(s): false alarms "
              f"{_cell([c['identical'][0] for c in counted])}, 1% caught "
              f"{_cell([c['+1%'][0] for c in counted])}, names the interpreter's eval loop "
              f"{_cell([c['+1%'][1] for c in counted])}", flush=True)


def revisions(quick: bool, reps: int, instruction_reps: int, with_runs: bool) -> None:
    """Part 2: ab vs compare vs pytest-benchmark on two revisions, repeated."""
    factors = {"identical": 1.0, "5%": 1.05, "10%": 1.10, "2x": 2.0}
    tools = ["opbench ab (3 rounds in one wave, taking turns)",
             "compare on one run each (--opbench-fail-above 5%)",
             "pytest-benchmark (median:5%)"]
    if with_runs:
        tools.insert(1, "opbench ab --rounds 5 --interleave runs")
    rounds = 5
    if quick:  # a smoke run: well under a minute
        factors, rounds, reps, instruction_reps = {"2x": 2.0}, 2, 1, 0
        tools = ["opbench ab --rounds 2 (one wave, taking turns)", tools[-2]]
    timed: list[dict[str, dict[str, tuple[bool, float]]]] = []
    counted: list[dict[str, tuple[bool, bool]]] = []
    has_valgrind = shutil.which("valgrind") is not None
    for rep in range(max(reps, instruction_reps)):
        if rep < reps:
            timed.append(_time_repetition(factors, rounds, tools))
        if rep < instruction_reps and has_valgrind:
            counted.append(_instruction_repetition({"identical": 1.0, "+1%": 1.01}))
        _print_tables(timed, counted, tools, ["identical", "5%", "10%", "2x"])


def _spread(rounds: int, how: str) -> dict[str, tuple[list[float], float, float]]:
    """Per run statistic (median, 10th percentile): the paired run ratios and each side's
    cv of the run values, from one ab session kept whole."""
    from statistics import pstdev

    from opbench.stats.numerics import quantile
    from opbench.store.results import load

    out = {}
    with tempfile.TemporaryDirectory(prefix="opbench_ab_spread_") as folder:
        _repository(folder)
        _set_n(folder, round(N * 1.1))
        keep = os.path.join(folder, "runs")
        _timed([sys.executable, "-m", "opbench", "ab", "--base", "HEAD", "--rounds", str(rounds),
                "--interleave", how, "--confidence", "0.999999", "--keep", keep, "--",
                *_pytest(*_OPBENCH)], folder)
        for name, q in (("median", 0.5), ("p10", 0.1)):
            sides: dict[str, list[float]] = {"base": [], "head": []}
            for r in range(1, rounds + 1):
                try:
                    values = {side: quantile(sorted(load(os.path.join(
                        keep, f"round{r}_{side}.json"))[0].times), q) for side in sides}
                except OSError:
                    continue
                for side, value in values.items():
                    sides[side].append(value)
            ratios = [h / b for b, h in zip(sides["base"], sides["head"])]
            cv = [pstdev(v) / (sum(v) / len(v)) if len(v) > 1 else float("nan")
                  for v in sides.values()]
            out[name] = (ratios, cv[0], cv[1])
    return out


def spread(quick: bool, rounds: int) -> None:
    """Part 3: paired run ratios of a 10% change, turns vs one run after the other."""
    rounds = 2 if quick else rounds
    print(f"\nA 10% slower loop, {rounds} rounds of each: paired run ratios head / base "
          "(truth ~1.10) and the cv of each side's run values, per run statistic", flush=True)
    for how in (("turns",) if quick else ("turns", "runs")):
        for statistic, (ratios, cv_base, cv_head) in _spread(rounds, how).items():
            shown = " ".join(f"{r:.2f}" for r in ratios)
            print(f"  {how:<6} {statistic:<7} ratios {min(ratios):.2f} to {max(ratios):.2f} "
                  f"({shown}); cv: base {cv_base:.1%}, head {cv_head:.1%}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (well under a minute)")
    parser.add_argument("--reps", type=int, default=20, help="repetitions of part 2 (default 20)")
    parser.add_argument("--instruction-reps", type=int, default=20,
                        help="repetitions of instruction mode (default 20, ~15 s each)")
    parser.add_argument("--spread-rounds", type=int, default=8,
                        help="rounds of part 3 (default 8, as the issue's measurement)")
    parser.add_argument("--part", choices=("1", "2", "3", "all"), default="all")
    parser.add_argument("--with-runs", action="store_true",
                        help="part 2 also times ab --interleave runs (5 rounds one after the "
                             "other: about 10 s more per change and repetition)")
    args = parser.parse_args()
    if args.part in ("1", "all"):
        in_process(args.quick)
    if args.part in ("3", "all"):
        spread(args.quick, args.spread_rounds)
    if args.part in ("2", "all"):
        revisions(args.quick, args.reps, args.instruction_reps, args.with_runs)


if __name__ == "__main__":
    main()
