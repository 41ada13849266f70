"""Runs saved straight into a history store, for the history, report and CLI tests: one
run per call, at a fake commit, with what its speed probe read and its paired-round mark."""
from __future__ import annotations

from opbench.core.measurement import Measurement, TaskSpec
from opbench.environment import collect
from opbench.store import baselines, history


def save(root, commit: int, figures: dict[str, float], slowdowns: float | None = None,
         speed_ns: int | None = None, settles: tuple[int, int, int] | None = None) -> None:
    """One run at commit ``commit`` (a fake git state), each benchmark at its figure; with
    ``slowdowns``, every block's core speed probe read that much slower than its process's
    best, which was ``speed_ns``; with ``settles`` (commit before, commit after, round), a
    paired round's run."""
    git = {"commit": f"{commit + 1:040x}", "branch": None, "dirty": False,
           "position": commit + 1, "commit_time": f"2026-01-01T00:{commit:02d}:00Z",
           "subject": f"c{commit}", "tags": []}
    ms = []
    for name, t in figures.items():
        info = {}
        if slowdowns is not None:
            info["disturbance"] = {"waits": [0.0] * 40, "slowdowns": [slowdowns] * 40,
                                   "speed_ns": speed_ns, "threads": 1, "cpus": 2}
        ms.append(Measurement(1, [t * (1 + 0.001 * (k % 5)) for k in range(40)],
                              TaskSpec("f()", "pass", name=name), info=info))
    environment = None
    if settles is not None:
        before, after, number = settles
        environment = {**collect(), history.SETTLE_KEY: {
            "step": [f"{before + 1:040x}", f"{after + 1:040x}"], "round": number}}
    baselines.autosave(ms, root=root, git=git, environment=environment)
