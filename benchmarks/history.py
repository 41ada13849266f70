"""Change-point detection on synthetic histories: opbench.stats.changepoints vs asv's step_detect.

Histories of 40 commits (one median per commit) at several levels of run-to-run
noise (Gaussian, relative; "spiky" adds a one-run burst of +30% to 3% of runs):

- step:  +10% from a random commit in [10, 30); found when a change up beyond the
         noise is reported at that commit (asv: a segment boundary there, upward).
- drift: +1% per commit for 15 commits from a random commit in [10, 20); found
         when a change up is reported that starts within three commits of the
         drift's start (a ramp's first commits differ by less than the noise). asv
         can only read a drift as steps: when it reports nothing but steps, any
         upward one inside the drift counts for it, a generous reading.
- flat:  no change; a history with any change reported is a false alarm.

Printed per noise level: share of steps and drifts found, and flat histories with
a false change per 100. asv is the published package (``pip install asv==0.6.6``;
its ``step_detect.detect_steps``, the piecewise-constant L1 fit behind ``asv
publish``'s regressions), run on the same histories in the same process.

asv is not in the test extra: among its dependencies, platformdirs 4.14 registers
a pytest plugin that moves the instruction counts of opbench's own plugin tests
(tests/test_pytest_plugin.py fails with it installed). Install it in a separate
environment to compare; without it this script prints opbench's column alone and
says so.

Usage: python benchmarks/history.py [--quick]
"""
from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from opbench.stats.changepoints import detect

try:  # the peer: pip install asv==0.6.6 (not in the test extra: see the module doc)
    from asv import step_detect
except ImportError as e:  # asv, or one of its many dependencies, missing
    step_detect = None
    ASV_MISSING = str(e)

N = 40
STEP = 0.10
DRIFT, DRIFT_LEN = 0.01, 15
START_SLACK = 3
Changes = list[tuple[int, int, float]]  # (first commit of the change, last commit, size)


def opbench_changes(y: list[float]) -> Changes:
    return [(c.end if c.kind == "step" else c.start, c.end, c.size)
            for c in detect(y).changes if c.exceeds_noise]


def asv_changes(y: list[float]) -> Changes:
    segments = step_detect.detect_steps(y)
    return [(right[0], right[0], right[2] / left[2] - 1)
            for left, right in zip(segments, segments[1:])]


def history(kind: str, noise: float, spiky: bool, rng: random.Random) -> tuple[list[float], int]:
    at = rng.randrange(10, 30) if kind == "step" else rng.randrange(10, 20)
    levels = []
    for i in range(N):
        level = 1.0
        if kind == "step" and i >= at:
            level = 1 + STEP
        elif kind == "drift" and i >= at:
            level = (1 + DRIFT) ** min(i - at + 1, DRIFT_LEN)
        burst = 1.3 if spiky and rng.random() < 0.03 else 1.0
        levels.append(level * burst * (1 + rng.gauss(0, noise)))
    return levels, at


def score(kind: str, at: int, changes: Changes) -> bool:
    """Whether the history's change was found (for a flat one: whether any was reported,
    which is false)."""
    if kind == "flat":
        return bool(changes)
    if kind == "step":
        return any(c[0] == at and c[2] > 0 for c in changes)
    # A ramp's first commit is uncertain by a few under noise (its first steps are
    # smaller than the noise): a start within START_SLACK commits counts, and for asv any
    # upward step inside the drift.
    return any(at - START_SLACK <= c[0] <= at + START_SLACK and c[2] > 0 for c in changes) or (
        any(c[1] == c[0] and at <= c[0] < at + DRIFT_LEN and c[2] > 0 for c in changes)
        and all(c[1] == c[0] for c in changes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few seconds in all")
    args = parser.parse_args()
    runs = 10 if args.quick else 200
    methods: dict[str, Callable[[list[float]], Changes]] = {"opbench": opbench_changes}
    if step_detect is not None:
        methods["asv"] = asv_changes
    else:
        print(f"asv is not installed ({ASV_MISSING}): opbench's column only; "
              "pip install asv==0.6.6 (in another environment) to compare\n")
    print(f"{runs} histories of {N} commits per cell; step +{STEP:.0%}, drift "
          f"+{DRIFT:.0%}/commit over {DRIFT_LEN} commits\n")
    width = 9 * len(methods) - 1
    print(f"{'noise':>12} | {'steps found':>{width}} | {'drifts found':>{width}} | "
          f"{'false / 100 flat':>{width}}")
    print(f"{'':>12} | " + " | ".join([" ".join(f"{m:>8}" for m in methods)] * 3))
    seconds = dict.fromkeys(methods, 0.0)
    for noise, spiky in ((0.005, False), (0.01, False), (0.02, False), (0.04, False),
                         (0.01, True)):
        found = {(m, k): 0 for m in methods for k in ("step", "drift", "flat")}
        rng = random.Random(int(noise * 1e4) + spiky)
        for kind in ("step", "drift", "flat"):
            for _ in range(runs):
                y, at = history(kind, noise, spiky, rng)
                for name, method in methods.items():  # the same history for both
                    start = time.perf_counter()
                    changes = method(y)
                    seconds[name] += time.perf_counter() - start
                    found[(name, kind)] += score(kind, at, changes)
        label = f"{noise:.1%}" + (" spiky" if spiky else "")
        print(f"{label:>12} | " + " | ".join(
            " ".join(f"{found[(m, k)] / runs:>8.0%}" for m in methods) for k in ("step", "drift"))
            + " | " + " ".join(f"{100 * found[(m, 'flat')] / runs:>8.1f}" for m in methods))
    per = {m: f"{m} {1e3 * seconds[m] / (15 * runs):.2f} ms" for m in methods}
    ratio = f" (ratio {seconds['opbench'] / seconds['asv']:.2f})" if "asv" in seconds else ""
    print(f"\ntime per history: {', '.join(per.values())}{ratio}")


if __name__ == "__main__":
    main()
