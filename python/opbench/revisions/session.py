"""The ``opbench ab`` session: is the working tree slower than a base revision? Rounds of
base and head runs of one command, decided on runs, stopped as soon as every benchmark
is decided.

``run_ab(command, base)`` checks the base revision out (``opbench.revisions.checkout``),
then runs ``command`` once per side per round, each run saving a results file:

* **Interleaving.** With ``interleave="turns"`` (the default for pytest
  commands whose plugin on both sides knows ``opbench.revisions.turns``), the base
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
  ``statistic``), decided on runs by ``opbench.gate.rounds.decide_rounds``
  (Student's t with the wave as a block, Holm's step-down over the suite's
  benchmarks, the error budget spent over the looks): the chance of any false
  verdict in the whole session is at most ``1 - confidence``. Looks come after
  each wave (one after the other: from round 2); when every benchmark is
  decided (slower, faster or same) the session stops early.
* **Instruction mode** (``mode="instructions"``): counts do not depend on
  load, so one run a side decides (the two run at once), the verdicts are the
  gate's on counts, and the report lists, for each benchmark that changed, the
  Python functions whose own counts changed most (``qualname (file:line)``,
  ``opbench.callgrind.python_functions``) beside the native functions
  (``opbench.callgrind.function_diff``,
  ``opbench.gate.session_verdicts.function_changes``).
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

import dataclasses
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from opbench import _choices
from opbench.errors import NothingToCompareError, ResultsFileError
from opbench.gate import POLICIES, Report, compare
from opbench.gate.rounds import decide_rounds
from opbench.gate.session_verdicts import ABReport, Changes, FailedRun, Side, function_changes
from opbench.revisions import turns
from opbench.revisions.checkout import Checkout, checkout, working_tree
from opbench.revisions.command import Run, is_pytest
from opbench.revisions.waves import (
    Pair,
    WaveInterrupted,
    concurrently,
    one_after_the_other,
    speaks_turns,
    timing_cpu,
)
from opbench.stats import decide
from opbench.store.results import Results, load

__all__ = ["INTERLEAVES", "MODES", "RUN_STATISTICS", "WAVE", "run_ab"]

MODES = _choices.MODES
# What one run contributes per benchmark: a quantile of its per-run times.
RUN_STATISTICS = _choices.RUN_STATISTICS
INTERLEAVES = _choices.INTERLEAVES
# Blocks a pytest run takes per benchmark at least (unless the command says): the 10th
# percentile of 20 blocks is their 2nd smallest, of 50 their 5th.
_MIN_SAMPLES = 50
# What a pytest run of a round times per benchmark unless the command says: at least
# _MIN_SAMPLES blocks of turns.BLOCK (0.1 s). Runs are the replicates: more, shorter runs
# narrow the interval more than fewer, longer ones (the between-process term dominates).
_RUN_LENGTH = (("--opbench-min-samples", _MIN_SAMPLES), ("--opbench-min-time", 0.1))
# Rounds whose process pairs start at once and take turns (opbench.revisions.turns).
WAVE = _choices.WAVE
_NAMES = ("base", "head")


def _load(run: Run) -> tuple[Results | None, str]:
    """The results a run saved, or None and why it gave none (a failed round)."""
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
        prepare: a command run once in the base's checkout (``opbench.revisions.checkout``).
        timeout: seconds each run may take (a run over it fails).
        keep: a folder to keep every run's results file in (default: none kept).
        statistic: what each run contributes per benchmark: ``"p10"`` (default), the
            10th percentile of its per-run times, or ``"median"``. On a shared machine a
            run's times are bimodal (the code alone, or sharing a core), and the median
            falls wherever the mix of the moment puts it; the fast tail is the code's
            own cost (``docs/figures/ab_turns.md``). ``"median"`` also weighs slow paths
            the code takes now and then.
        log: where progress lines go (default stderr; None for silence).

    Raises:
        opbench.revisions.RevisionError: the base cannot be checked out.
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
    if inconclusive not in POLICIES:
        raise ValueError(f"inconclusive must be one of {', '.join(POLICIES)}")
    decide.check_threshold(threshold)
    command = [str(c) for c in command]
    if not command:
        raise ValueError("no command: give the benchmark command after `--`")
    say = log or (lambda line: None)
    start = time.monotonic()
    head = working_tree(repo)
    folder = _keep_folder(keep)  # before the checkout: a bad folder leaves nothing behind
    try:
        say(f"opbench ab: checking out {base} ...")
        base_side = checkout(base, repo, prepare=prepare, timeout=timeout)
    except BaseException:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise
    try:
        session = _Session(command, (base_side, head), rounds=rounds, mode=mode,
                           threshold=threshold, confidence=confidence,
                           inconclusive=inconclusive, timeout=timeout, folder=folder, say=say,
                           statistic=statistic)
        session.plan(interleave, wave)
        return session.run(start)
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


@dataclasses.dataclass
class _Session:
    """One ``opbench ab`` session's settings (``plan`` completes them) and what its waves
    found so far."""

    command: list[str]
    sides: tuple[Checkout, Checkout]
    rounds: int
    mode: str
    threshold: float
    confidence: float
    inconclusive: str
    timeout: float | None
    folder: Path
    say: Callable[[str], None]
    statistic: str
    how: str = "runs"
    wave: int = 1
    is_pytest: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)
    complete: list[tuple[Results, Results]] = dataclasses.field(default_factory=list)
    blocks: list[int] = dataclasses.field(default_factory=list)  # each complete round's wave
    failed: list[FailedRun] = dataclasses.field(default_factory=list)
    report: Report | None = None
    stopped: bool = False
    interrupted: bool = False

    def plan(self, interleave: str, wave: int) -> None:
        """How the rounds run (``how``: turns, runs or concurrent), how many, in waves of
        how many, and the command each run gets."""
        self.is_pytest = is_pytest(self.command)
        if self.mode in _choices.COUNTED_MODES:
            if self.is_pytest:
                self.command = [*self.command, f"--opbench-mode={self.mode}"]
            if self.rounds > 1:
                what = "instruction" if self.mode == "instructions" else "memory"
                self.notes.append(f"{what} counts do not depend on load: one round decides")
            self.rounds, self.how = 1, "concurrent"
        elif interleave == "runs" or (interleave == "auto" and not self.is_pytest):
            self.how = "runs"
        elif all(speaks_turns(self.sides)):
            self.how = "turns"
        else:
            if interleave == "turns":
                self.notes.append("a side's opbench predates turn-taking "
                                  "(opbench.revisions.turns): "
                                  "its runs went one after the other")
            self.how = "runs"
        if self.mode == "time" and self.is_pytest:
            self.command = [*self.command, *(
                f"{option}={value}" for option, value in _RUN_LENGTH
                if not any(a.split("=", 1)[0] == option for a in self.command))]
        self.wave = wave if self.how == "turns" else 1

    def run(self, start: float) -> ABReport:
        """Every wave (until every benchmark is decided, or Ctrl-C), then the report."""
        waves = [list(range(r, min(r + self.wave, self.rounds)))
                 for r in range(0, self.rounds, self.wave)]
        # Runs one after the other look from round 2 (one pair gives no between-run
        # variance); waves of pairs taking turns look after each wave.
        skipped = 1 if self.wave == 1 else 0  # waves before the first look
        looks = max(len(waves) - skipped, 1)
        try:
            for w, members in enumerate(waves):
                self._run_wave(w, members)
                if self._look(w, skipped, looks) and w + 1 < len(waves):
                    self.stopped = True
                    break
        except KeyboardInterrupt:
            self.interrupted = True
            self.say("opbench ab: interrupted: reporting the rounds that finished")
        functions, python_functions = self._decide(looks)
        env = [self.complete[-1][i].environment if self.complete else {} for i in (0, 1)]
        sides, counted = self.sides, len(self.complete)
        return ABReport(
            gate=self.report,
            base=Side("base", sides[0].revision, sides[0].commit, env[0], counted),
            head=Side("head", sides[1].revision, sides[1].commit, env[1], counted),
            command=tuple(self.command), mode=self.mode, rounds=counted,
            max_rounds=self.rounds, stopped_early=self.stopped, interrupted=self.interrupted,
            interleave=self.how, wave=self.wave, failed=tuple(self.failed),
            functions=tuple(functions), python_functions=tuple(python_functions),
            seconds=time.monotonic() - start, notes=tuple(self.notes))

    def _pair(self, r: int) -> Pair:
        """Round ``r``'s commands and results files."""
        files = [self.folder / f"round{r + 1}_{_NAMES[i]}.json" for i in (0, 1)]
        # Sessions at once must not share a --basetemp (each clears it).
        commands = [[*self.command, f"--basetemp={self.folder / f'round{r + 1}_{_NAMES[i]}_tmp'}"]
                    if self.is_pytest else self.command for i in (0, 1)]
        return commands, files

    def _run_wave(self, w: int, members: list[int]) -> None:
        """Runs wave ``w`` (rounds ``members``) and counts its complete rounds; Ctrl-C
        counts what finished, then goes on up."""
        pairs = [self._pair(r) for r in members]
        first = w % 2  # AB, BA, AB...: ABBA over two waves
        cut_short: WaveInterrupted | None = None
        if self.how == "runs":
            results = [one_after_the_other(self.sides, *pairs[0], self.timeout, first)]
        else:
            coordinator = turns.Coordinator(first=first, workers=2 * len(pairs),
                                            cpu=timing_cpu()) if self.how == "turns" else None
            try:
                results = concurrently(pairs, self.sides, self.timeout, coordinator)
            except WaveInterrupted as e:
                results, cut_short = e.runs, e
        for r, runs in zip(members, results):
            self._count(r, w, runs, told=cut_short is None)
        if cut_short is not None:
            raise cut_short

    def _count(self, r: int, w: int, runs: list[Run], told: bool) -> None:
        """Counts round ``r`` of wave ``w`` when both its runs gave results; ``told``: its
        failures are reported and its progress said (not when Ctrl-C stopped it)."""
        loaded = [_load(run) for run in runs]
        for i, (got, problem) in enumerate(loaded):
            if got is None and told:
                self.failed.append(FailedRun(_NAMES[i], r + 1, problem))
        base, head = loaded[0][0], loaded[1][0]
        if base is not None and head is not None:
            self.complete.append((base, head))
            self.blocks.append(w)
        if told:
            counted = base is not None and head is not None
            self.say(f"opbench ab: round {r + 1}/{self.rounds}: base {runs[0].seconds:.1f} s, "
                     f"head {runs[1].seconds:.1f} s" + ("" if counted else
                                                       " (a run failed: round not counted)"))

    def _decided(self, look: int, looks: int) -> Report:
        return decide_rounds(self.complete, threshold=self.threshold,
                             confidence=self.confidence, inconclusive=self.inconclusive,
                             look=look, looks=looks, statistic=self.statistic,
                             blocks=self.blocks)

    def _look(self, w: int, skipped: int, looks: int) -> bool:
        """The look after wave ``w`` (time mode, from two complete rounds): whether every
        benchmark is decided."""
        if self.mode != "time" or len(self.complete) < 2 or w < skipped:
            return False
        self.report = self._decided(w + 1 - skipped, looks)
        undecided = [row.key for row in self.report.rows
                     if row.decision.verdict == "inconclusive"]
        self.say(f"opbench ab: {len(self.report.rows) - len(undecided)} of "
                 f"{len(self.report.rows)} benchmark(s) decided")
        return not undecided

    def _decide(self, looks: int) -> tuple[Changes, Changes]:
        """The final report where the looks made none (counts: the gate on the last round;
        time: one round, no interval with the between-run variance yet), and the
        functions whose counts changed (instruction mode)."""
        functions: Changes = []
        python_functions: Changes = []
        counted = self.mode in _choices.COUNTED_MODES
        if not self.complete or (self.report is not None and not counted):
            return functions, python_functions
        if not counted:
            self.report = self._decided(looks, looks)
            return functions, python_functions
        base_results, head_results = self.complete[-1]
        try:
            self.report = compare(base_results, head_results, threshold=self.threshold,
                                  confidence=self.confidence, inconclusive=self.inconclusive)
        except NothingToCompareError as e:
            self.notes.append(str(e))
            return functions, python_functions
        if self.mode == "instructions":
            functions, python_functions = function_changes(base_results, head_results,
                                                           self.report)
        return functions, python_functions
