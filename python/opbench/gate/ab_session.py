"""An ``opbench ab`` session: is the working tree slower than a base revision? Rounds of
base and head runs of one command, decided on runs, stopped as soon as every benchmark
is decided.

``run_ab(command, base)`` checks the base revision out (``opbench.gate.revision``),
then runs ``command`` once per side per round, each run saving a results file:

* **Interleaving.** With ``interleave="turns"`` (the default for pytest
  commands whose plugin on both sides knows ``opbench.gate.turns``), the base
  and head processes of a *wave* of ``wave`` rounds (default 3) start at once
  and take turns to time, in slices of about 20 ms: drift of the machine
  lands on every run alike, and their start-ups overlap. With ``"runs"``
  (scripts, older revisions), the two runs of a round go one after the other,
  the order alternating by round (AB, BA, AB...: ABBA), so a linear drift
  cancels over two rounds. Either way each round is a fresh pair of
  processes, so the between-process variance (code placement, heap layout)
  is in the data, and each run is one replicate.
* **The decision** (time mode): per benchmark, each run gives one value (the
  10th percentile of the run's per-run times by default, or its median:
  ``statistic``); ``opbench.stats.decide.runs`` forms the interval of the
  ratio with the wave as a block (what a wave shares cancels, every run is a
  replicate; rounds one after the other are paired), Student's t: the
  between-run variance is in it, at the level Holm's step-down gives it
  among the suite's benchmarks, with the error budget spent over the looks
  (``decide.run_look_confidence``): the chance of any false verdict in the
  whole session is at most ``1 - confidence``. Looks come after each wave
  (one after the other: from round 2); when every benchmark is decided
  (slower, faster or same) the session stops early.
* **Instruction mode** (``mode="instructions"``): counts do not depend on
  load, so one run a side decides (the two run at once), the verdicts are the
  gate's on counts, and the report lists, for each benchmark that changed, the
  Python functions whose own counts changed most (``qualname (file:line)``,
  ``opbench.callgrind.python_functions``) beside the native functions
  (``opbench.callgrind.function_diff``).
* **Memory mode** (``mode="memory"``): memory per call is exact too (pytest runs
  get ``--opbench-mode=memory``): one run a side decides, on the gate's memory rows
  (``key [allocations]``, ``[bytes]``, ``[peak]``, ``[leak]``).
* **Failures and Ctrl-C.** A run that fails (non-zero exit, no results file)
  is reported and its round not counted. Ctrl-C stops the running commands,
  and the report covers the rounds that finished (``interrupted`` is set).

Example::

    report = run_ab(["pytest", "benchmarks/", "-q"], "main")
    print(report.text())
    sys.exit(report.exit_status)
"""
from __future__ import annotations

import functools
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opbench import _choices, gate
from opbench.callgrind.function_diff import diff as function_diff
from opbench.callgrind.function_diff import python_diff
from opbench.core import identity
from opbench.core.instructions import InstructionCounts
from opbench.errors import NothingToCompareError, ResultsFileError
from opbench.gate import revision, turns
from opbench.gate.ab_report import ABReport, FailedRun, Side
from opbench.gate.revision import Checkout, Run
from opbench.stats import decide, run_figure
from opbench.store.results import Results, load

__all__ = ["INTERLEAVES", "MODES", "RUN_STATISTICS", "WAVE", "decide_rounds", "run_ab"]

MODES = _choices.MODES
# What one run contributes per benchmark: a quantile of its per-run times.
RUN_STATISTICS = _choices.RUN_STATISTICS
INTERLEAVES = _choices.INTERLEAVES
_BASE, _HEAD = 0, 1
# Blocks a pytest run takes per benchmark at least (unless the command says): the 10th
# percentile of 20 blocks is their 2nd smallest, of 50 their 5th.
_MIN_SAMPLES = 50
# What a pytest run of a round times per benchmark unless the command says: at least
# _MIN_SAMPLES blocks of turns.BLOCK (0.1 s). Runs are the replicates: more, shorter runs
# narrow the interval more than fewer, longer ones (the between-process term dominates).
_RUN_LENGTH = (("--opbench-min-samples", _MIN_SAMPLES), ("--opbench-min-time", 0.1))
# Rounds whose process pairs start at once and take turns (opbench.gate.turns).
WAVE = _choices.WAVE
_NAMES = ("base", "head")


# Prints where the first ``opbench`` package on sys.path lies ("" when none is a folder
# there): a Python start-up without importing opbench, a tenth of an import's cost.
_FIND_OPBENCH = ("import os, sys\n"
                 "print(next((d for d in (os.path.join(p or os.getcwd(), 'opbench') for p in "
                 "sys.path) if os.path.isdir(d)), ''))")


def _speaks_turns(sides: Sequence[Checkout]) -> list[bool]:
    """Whether each side's opbench (what its command imports) takes turns, asked of both
    sides at once: its package folder holds ``gate/turns.py``; where no folder on the
    side's path holds opbench (an import hook), importing the module decides."""
    def run(side: Checkout, code: str) -> subprocess.CompletedProcess[str] | None:
        try:
            return subprocess.run([sys.executable, "-c", code], cwd=side.path,
                                  env=side.environment(), capture_output=True, text=True,
                                  timeout=120, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None

    def check(side: Checkout) -> bool:
        found = run(side, _FIND_OPBENCH)
        if found is not None and found.returncode == 0 and found.stdout.strip():
            return os.path.isfile(os.path.join(found.stdout.strip(), "gate", "turns.py"))
        imported = run(side, "import opbench.gate.turns")
        return imported is not None and imported.returncode == 0

    with ThreadPoolExecutor(len(sides)) as pool:
        return list(pool.map(check, sides))


class _WaveInterrupted(KeyboardInterrupt):
    """Ctrl-C during a wave: ``runs`` as ``_concurrently`` returns them, those stopped
    not ok (the pairs that had finished still count)."""

    def __init__(self, runs: list[list[Run]]) -> None:
        super().__init__()
        self.runs = runs


def _timing_cpu() -> int | None:
    """The CPU a wave's workers time on: this process's last allowed one (any fixed one
    would do: what matters is that every worker shares it)."""
    try:
        return max(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _concurrently(pairs: list[tuple[list[list[str]], list[Path]]], sides: tuple[Checkout, Checkout],
                  timeout: float | None, coordinator: turns.Coordinator | None) -> list[list[Run]]:
    """Every pair's base and head runs at once (taking turns when a coordinator is given:
    worker ``2i + side`` is pair ``i``'s side), as ``[[base, head], ...]``. Ctrl-C stops
    them all and raises ``_WaveInterrupted`` with what finished."""
    runs: list[Any] = [None] * (2 * len(pairs))

    def go(w: int) -> None:
        (commands, files), side = pairs[w // 2], w % 2
        try:
            extra: dict[str, str] | None = None
            fds: tuple[int, ...] = ()
            spawned: Callable[[], None] | None = None
            if coordinator is not None:
                extra, fds = coordinator.environment(w), coordinator.worker_fds(w)
                spawned = functools.partial(coordinator.spawned, w)
            runs[w] = sides[side].run(commands[side], results_file=files[side], env=extra,
                                      timeout=timeout, pass_fds=fds, after_spawn=spawned)
        except BaseException as e:  # reported as the run's failure
            runs[w] = e

    threads = [threading.Thread(target=go, args=(w,), daemon=True) for w in range(len(runs))]
    try:
        for t in threads:
            t.start()
        if coordinator is not None:
            coordinator.serve(lambda w: not threads[w].is_alive())
        for t in threads:
            while t.is_alive():
                t.join(0.1)
    except KeyboardInterrupt:  # Ctrl-C: stop every command, keep what finished
        revision._stop_running()
        for t in threads:
            t.join(30)
        if any(isinstance(r, BaseException) or r is None for r in runs):
            raise
        interrupted = True
    else:
        interrupted = False
        for r in runs:
            if isinstance(r, BaseException):
                raise r
    finally:
        if coordinator is not None:
            coordinator.close()
    by_pair = [runs[i:i + 2] for i in range(0, len(runs), 2)]
    if interrupted:
        raise _WaveInterrupted(by_pair)
    return by_pair


def _one_after_the_other(sides: tuple[Checkout, Checkout], commands: list[list[str]],
                         files: list[Path], timeout: float | None, first: int) -> list[Run]:
    runs: list[Any] = [None, None]
    for i in (first, 1 - first):
        runs[i] = sides[i].run(commands[i], results_file=files[i], timeout=timeout)
    return runs


def _load(run: Run) -> tuple[Results | None, str]:
    if not run.ok:
        return None, run.problem
    assert run.results is not None
    try:
        results = load(run.results)
    except (OSError, ResultsFileError) as e:
        return None, f"its results file cannot be loaded: {e}"
    if not results.all():
        return None, "its results file holds no result"
    return results, ""


def _thresholds(results: Results, default: float) -> dict[str, float]:
    return {identity.key(r): r.info.get("threshold", default) for r in results.all()
            if isinstance(r.info.get("threshold", default), float)}


def decide_rounds(rounds: list[tuple[Results, Results]], *, threshold: float, confidence: float,
                  inconclusive: str, look: int, looks: int, statistic: str = "p10",
                  blocks: Sequence[int] | None = None) -> gate.Report:
    """The gate's report on complete rounds (base, head): each benchmark decided on one
    value per run and side (``statistic``: its 10th percentile or median per-run time),
    paired by round, or in the blocks (waves) ``blocks`` labels the rounds with, at its
    Holm level for look ``look`` of ``looks``."""
    per_key: dict[str, tuple[str, list[float], list[float]]] = {}
    only_base: dict[str, None] = {}
    only_head: dict[str, None] = {}
    mismatched: dict[str, None] = {}
    own: dict[str, float] = {}
    labels = list(range(len(rounds))) if blocks is None else list(blocks)
    per_block: dict[str, list[int]] = {}
    busy_old: dict[str, str] = {}
    busy_new: dict[str, str] = {}
    hopeless: dict[str, list[int]] = {}  # key -> its rounds with a run no block of which ran clean
    for r, (base, head) in enumerate(rounds):
        busy_base: dict[str, str] = {}
        busy_head: dict[str, str] = {}
        old, new = gate.pool(base.all(), disturbed=busy_base), gate.pool(head.all(), disturbed=busy_head)
        for mine, theirs in ((busy_old, busy_base), (busy_new, busy_head)):
            for key, note in theirs.items():
                mine[key] = f"{mine[key]}; round {r + 1}: {note}" if key in mine else \
                    f"round {r + 1}: {note}"
        own.update(_thresholds(head, threshold))
        for key in new:
            if key not in old:
                only_head[key] = None
                continue
            (kind_old, x), (kind_new, y) = old[key], new[key]
            if kind_old != kind_new or "mixed" in (kind_old, kind_new):
                mismatched[key] = None
                continue
            entry = per_key.setdefault(key, (kind_new, [], []))
            per_block.setdefault(key, []).append(labels[r])
            entry[1].append(run_figure.value(x, statistic) if kind_new == "time"
                            else statistics.median(x))
            entry[2].append(run_figure.value(y, statistic) if kind_new == "time"
                            else statistics.median(y))
            if any(_HOPELESS in notes.get(key, "") for notes in (busy_base, busy_head)):
                hopeless.setdefault(key, []).append(len(entry[1]) - 1)
        for key in old:
            if key not in new:
                only_base[key] = None
    _drop_hopeless(per_key, per_block, hopeless, busy_old)
    alpha = 1 - decide.run_look_confidence(look, looks, confidence)
    timed = [k for k, (kind, x, _) in per_key.items() if kind == "time" and len(x) > 1]
    levels = dict(zip(timed, decide.holm(
        [decide.runs_p_value(per_key[k][1], per_key[k][2], blocks=per_block[k])
         for k in timed], alpha)))
    rows = []
    for key, (kind, x, y) in per_key.items():
        t = own.get(key, threshold)
        if kind == "time":
            # "Same" by the equivalence test at the look's level: Holm's correction guards
            # the verdicts that fail or praise a change, and would make "same" unreachable.
            d = decide.runs(x, y, t, 1 - levels.get(key, alpha), blocks=per_block[key],
                            equivalence_alpha=alpha)
            shown = statistics.geometric_mean(x), statistics.geometric_mean(y)
        else:
            d = decide.counts(x, y, t)
            shown = statistics.median(x), statistics.median(y)
        rows.append(gate.Row(key, kind, *shown, (len(x), len(y)), d, (len(x), len(y))))
    rows.sort(key=lambda r: -r.decision.ratio)
    what = "10th percentiles" if statistic == "p10" else "medians"
    grouped = ("paired by round" if len(set(labels)) == len(labels) else
               f"in {len(set(labels))} wave(s) of process pairs, each run a replicate")
    method = (f"verdicts on the runs' {what} of per-run time, {grouped} (Student's t "
              f"of the mean log ratio: the between-run variance is in the interval); Baseline "
              f"and New are the geometric means of those, so New / Baseline is the Ratio; "
              f"Holm's step-down over {len(timed)} benchmark(s) at look {look} of {looks}, so "
              f"the {confidence:.0%} holds for slower and faster verdicts over the whole "
              f"session and each interval is wider; \"same\" is each benchmark's equivalence "
              f"test at {1 - alpha:.1%} (its {1 - 2 * alpha:.0%} interval within the threshold)")
    return gate.Report(rows=tuple(rows), only_in_baseline=tuple(only_base),
                       only_in_new=tuple(k for k in only_head if k not in per_key),
                       mismatched=tuple(mismatched), environment_notes=(),
                       threshold=threshold, confidence=confidence, inconclusive=inconclusive,
                       fail_on_missing=False, method=method, replicates="runs",
                       disturbed=tuple(gate.disturbed_notes(busy_old, busy_new, per_key)))


# What gate.pool notes of a run none of whose blocks ran undisturbed.
_HOPELESS = "no block ran undisturbed"


def _drop_hopeless(per_key: dict[str, tuple[str, list[float], list[float]]],
                   per_block: dict[str, list[int]], hopeless: dict[str, list[int]],
                   notes: dict[str, str]) -> None:
    """Leaves out of each benchmark's decision the rounds in which a run was disturbed all
    along (no block of it ran undisturbed: its figure is the busy machine's, measured in
    another state than the other runs'), when at least two rounds remain; ``notes`` gets
    what was done, for the report.

    Runs on a shared machine are not all alike: a core whose hardware sibling another
    tenant keeps busy runs code 1.5-2x slower (7.5 us on one CPU against 12.3 us on the
    other, measured here), and a run that spent its benchmark there reads that much
    slower, every block alike. One such run among three decided in Student's t, on four
    degrees of freedom, moves the mean log ratio by a third of that and its variance
    with it; two on one side read as a change. Such a run is no replicate of the others."""
    for key, rounds in hopeless.items():
        kind, x, y = per_key[key]
        keep = [i for i in range(len(x)) if i not in rounds]
        if len(keep) < 2 or len(keep) == len(x):
            continue
        per_key[key] = (kind, [x[i] for i in keep], [y[i] for i in keep])
        per_block[key] = [per_block[key][i] for i in keep]
        dropped = f"{len(x) - len(keep)} of {len(x)} round(s) left out of the decision: a run of " \
                  "theirs was disturbed all along (its figure is the busy machine's)"
        notes[key] = f"{notes[key]}; {dropped}" if key in notes else dropped


_Changes = list[tuple[str, tuple[Any, ...]]]


def _function_changes(base: Results, head: Results, report: gate.Report) -> tuple[_Changes, _Changes]:
    """Per benchmark whose count changed (not "same"), the native functions and the Python
    functions whose counts changed most."""
    def by_key(results: Results) -> dict[str, InstructionCounts]:
        return {identity.key(c): c for c in results.instructions}

    old, new = by_key(base), by_key(head)
    native: _Changes = []
    python: _Changes = []
    for row in report.rows:
        if row.kind != "instructions" or row.decision.verdict == "same" \
                or row.decision.ratio == 1 or row.key not in old or row.key not in new:
            continue
        a, b = old[row.key], new[row.key]
        number, base_number = b.number_per_run, a.number_per_run
        for table, found, differ in (("functions", native, function_diff),
                                     ("python_functions", python, python_diff)):
            fa, fb = a.info.get(table), b.info.get(table)
            if isinstance(fa, dict) and isinstance(fb, dict):
                found.append((row.key, tuple(differ(fa, fb, number=number,
                                                    base_number=base_number))))
    return native, python


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_ab(
    command: Sequence[str],
    base: str,
    *,
    rounds: int = _choices.ROUNDS,
    mode: str = "time",
    threshold: float = 0.05,
    confidence: float = 0.95,
    inconclusive: str = "fail",
    interleave: str = "auto",
    repo: str | os.PathLike[str] = ".",
    prepare: Sequence[str] | None = None,
    timeout: float | None = None,
    keep: str | os.PathLike[str] | None = None,
    statistic: str = "p10",
    wave: int = WAVE,
    log: Callable[[str], None] | None = _stderr,
) -> ABReport:
    """Runs ``command`` on ``base`` and on the working tree, in rounds (module doc).

    Args:
        command: a pytest run of benchmark tests, or any command that saves opbench
            results to ``$OPBENCH_RESULTS_FILE``.
        base: the revision to compare with (``main``, ``HEAD~1``, a commit id).
        rounds: at most this many rounds (pairs of runs); fewer when every benchmark
            is decided earlier. Instruction mode takes one.
        wave: with turns, how many rounds' process pairs start at once and take turns
            (the last wave may be smaller); the session looks (may stop) after each
            wave. With runs one after the other, each round is its own wave.
        mode: ``"time"``, ``"instructions"`` or ``"memory"`` (pytest commands: adds
            ``--opbench-mode=instructions``).
        threshold, confidence, inconclusive: as for ``opbench.gate.compare``.
        interleave: ``"turns"``, ``"runs"`` or ``"auto"`` (turns when possible).
        repo: a folder in the repository (default: the current one).
        prepare: a command run once in the base's checkout (``opbench.gate.revision``).
        timeout: seconds each run may take (a run over it fails).
        keep: a folder to keep every run's results file in (default: none kept).
        statistic: what each run contributes per benchmark: ``"p10"`` (default), the
            10th percentile of its per-run times, or ``"median"``. On a shared machine a
            run's times are bimodal (the code alone, or sharing a core), and the median
            falls wherever the mix of the moment puts it; the fast tail is the code's
            own cost (measured: run medians 60 to 260 us, 10th percentiles 54 to 56 us,
            for one unchanged function). ``"median"`` also weighs slow paths the code
            takes now and then.
        log: where progress lines go (default stderr; None for silence).

    Raises:
        opbench.gate.revision.RevisionError: the base cannot be checked out.
        ValueError: bad arguments.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    if interleave not in INTERLEAVES:
        raise ValueError(f"interleave must be one of {', '.join(INTERLEAVES)}, got "
                         f"{interleave!r}")
    for name, value in (("rounds", rounds), ("wave", wave)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    if statistic not in RUN_STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(RUN_STATISTICS)}, got "
                         f"{statistic!r}")
    if inconclusive not in gate.POLICIES:
        raise ValueError(f"inconclusive must be one of {', '.join(gate.POLICIES)}")
    decide.check_threshold(threshold)
    command = [str(c) for c in command]
    if not command:
        raise ValueError("no command: give the benchmark command after `--`")
    say = log or (lambda line: None)
    start = time.monotonic()
    head = revision.working_tree(repo)
    folder = _keep_folder(keep)  # before the checkout: a bad folder leaves nothing behind
    try:
        say(f"opbench ab: checking out {base} ...")
        base_side = revision.checkout(base, repo, prepare=prepare, timeout=timeout)
    except BaseException:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        return _session(command, (base_side, head), rounds=rounds, mode=mode,
                        threshold=threshold, confidence=confidence, inconclusive=inconclusive,
                        interleave=interleave, timeout=timeout, folder=folder, say=say,
                        start=start, statistic=statistic, wave=wave)
    finally:
        base_side.close()
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def _keep_folder(keep: str | os.PathLike[str] | None) -> Path:
    """The folder the runs' results files go to: ``keep`` (made if missing), else a
    temporary one.

    Raises:
        ValueError: ``keep`` cannot be a folder (a file is there, or above it).
    """
    if keep is None:
        return Path(tempfile.mkdtemp(prefix="opbench-ab-"))
    folder = Path(keep)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(f"cannot keep the results files in {keep}: it cannot be a folder "
                         f"({e.strerror or e})") from None
    return folder


def _session(command: list[str], sides: tuple[Checkout, Checkout], *, rounds: int, mode: str,
             threshold: float, confidence: float, inconclusive: str, interleave: str,
             timeout: float | None, folder: Path, say: Callable[[str], None],
             start: float, statistic: str, wave: int) -> ABReport:
    is_pytest = revision._is_pytest(command)
    notes = []
    if mode in _choices.COUNTED_MODES:
        if is_pytest:
            command = [*command, f"--opbench-mode={mode}"]
        if rounds > 1:
            notes.append(f"{'instruction' if mode == 'instructions' else 'memory'} counts do "
                         "not depend on load: one round decides")
        rounds, how = 1, "concurrent"
    elif interleave == "runs" or (interleave == "auto" and not is_pytest):
        how = "runs"
    elif all(_speaks_turns(sides)):
        how = "turns"
    else:
        if interleave == "turns":
            notes.append("a side's opbench predates turn-taking (opbench.gate.turns): its runs went "
                         "one after the other")
        how = "runs"
    if mode == "time" and is_pytest:
        command = [*command, *(f"{option}={value}" for option, value in _RUN_LENGTH
                               if not any(a.split("=", 1)[0] == option for a in command))]
    wave = wave if how == "turns" else 1
    waves = [list(range(r, min(r + wave, rounds))) for r in range(0, rounds, wave)]
    complete: list[tuple[Results, Results]] = []
    blocks: list[int] = []
    failed: list[FailedRun] = []
    report: gate.Report | None = None
    stopped = interrupted = False
    # Runs one after the other look from round 2 (one pair gives no between-run
    # variance); waves of pairs taking turns look after each wave.
    skipped = 1 if wave == 1 else 0  # waves before the first look
    looks = max(len(waves) - skipped, 1)
    try:
        for w, members in enumerate(waves):
            pairs = []
            for r in members:
                files = [folder / f"round{r + 1}_{_NAMES[i]}.json" for i in (0, 1)]
                # Sessions at once must not share a --basetemp (each clears it).
                commands = [[*command, f"--basetemp={folder / f'round{r + 1}_{_NAMES[i]}_tmp'}"]
                            if is_pytest else command for i in (0, 1)]
                pairs.append((commands, files))
            first = w % 2  # AB, BA, AB...: ABBA over two waves
            cut_short: _WaveInterrupted | None = None
            if how == "runs":
                results = [_one_after_the_other(sides, *pairs[0], timeout, first)]
            else:
                try:
                    results = _concurrently(pairs, sides, timeout, turns.Coordinator(
                        first=first, workers=2 * len(pairs), cpu=_timing_cpu())
                        if how == "turns" else None)
                except _WaveInterrupted as e:
                    results, cut_short = e.runs, e
            for r, runs in zip(members, results):
                loaded = [_load(run) for run in runs]
                for i, (got, problem) in enumerate(loaded):
                    if got is None and cut_short is None:
                        failed.append(FailedRun(_NAMES[i], r + 1, problem))
                counted = loaded[0][0] is not None and loaded[1][0] is not None
                if counted:
                    complete.append((loaded[0][0], loaded[1][0]))  # type: ignore[arg-type]
                    blocks.append(w)
                if cut_short is None:
                    say(f"opbench ab: round {r + 1}/{rounds}: base {runs[0].seconds:.1f} s, "
                        f"head {runs[1].seconds:.1f} s" + ("" if counted else
                                                          " (a run failed: round not counted)"))
            if cut_short is not None:
                raise cut_short
            if mode == "time" and len(complete) >= 2 and w >= skipped:
                report = decide_rounds(complete, threshold=threshold, confidence=confidence,
                                       inconclusive=inconclusive, look=w + 1 - skipped,
                                       looks=looks, statistic=statistic, blocks=blocks)
                open_ = [row.key for row in report.rows if row.decision.verdict == "inconclusive"]
                say(f"opbench ab: {len(report.rows) - len(open_)} of {len(report.rows)} "
                    "benchmark(s) decided")
                if not open_ and w + 1 < len(waves):
                    stopped = True
                    break
    except KeyboardInterrupt:
        interrupted = True
        say("opbench ab: interrupted: reporting the rounds that finished")
    functions: _Changes = []
    python_functions: _Changes = []
    if complete and (report is None or mode in _choices.COUNTED_MODES):
        if mode in _choices.COUNTED_MODES:
            base_results, head_results = complete[-1]
            try:
                report = gate.compare(base_results, head_results, threshold=threshold,
                                      confidence=confidence, inconclusive=inconclusive)
                if mode == "instructions":
                    functions, python_functions = _function_changes(base_results, head_results,
                                                                report)
            except NothingToCompareError as e:
                notes.append(str(e))
        else:  # one round: no interval with the between-run variance yet
            report = decide_rounds(complete, threshold=threshold, confidence=confidence,
                                   inconclusive=inconclusive, look=looks, looks=looks,
                                   statistic=statistic, blocks=blocks)
    env = [complete[-1][i].environment if complete else {} for i in (0, 1)]
    return ABReport(
        gate=report,
        base=Side("base", sides[0].revision, sides[0].commit, env[0], len(complete)),
        head=Side("head", sides[1].revision, sides[1].commit, env[1], len(complete)),
        command=tuple(command), mode=mode, rounds=len(complete), max_rounds=rounds,
        stopped_early=stopped, interrupted=interrupted, interleave=how, wave=wave,
        failed=tuple(failed),
        functions=tuple(functions), python_functions=tuple(python_functions),
        seconds=time.monotonic() - start, notes=tuple(notes))
