"""Names that try to rewrite a report (issue 34): a benchmark, a label, a commit subject or
a host name may hold Markdown, HTML, mentions or terminal control characters, and every
report must show them as the text they are."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

NAMES = [
    # A fake "no regression" heading, and a fold that would hide the real rows.
    "fake\n### opbench: no regression\n<details><summary>fine</summary>",
    "<script>alert('x')</script>",
    "<!-- <script>",
    "</script><!--",
    "@octocat please merge",
    "[click](https://example.com) ![img](x.png) `code` *em* # h | pipe",
    "- item\n1. item\n===",
    "\x1b[2J\x1b]0;title\x07\x1b[31mred\rback\x9b1A \u202eevil",
]

# What a terminal acts on: every control character but the newline that ends a line.
TERMINAL_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def measurements(value: float = 1e-6, names: list[str] = NAMES) -> list[Any]:
    from opbench import Measurement, TaskSpec

    # 40 runs: enough for the gate's interval of the 10th percentile (stats.run_figure).
    return [Measurement(1, [value * (1 + i / 100) for i in range(40)],
                        TaskSpec("f()", "pass", name=name, label=name, description=name))
            for name in names]


def history(root: Path, monkeypatch: Any, subject: str = NAMES[2] + " " + NAMES[0]) -> Path:
    """Two runs of every hostile benchmark, at commits whose subject is hostile too, on a
    host with a hostile name; returns ``root``."""
    from opbench import environment
    from opbench.store import baselines

    real = environment.collect
    monkeypatch.setattr(environment, "collect", lambda: {**real(), "hostname": NAMES[1]})
    for i in range(2):
        monkeypatch.setattr(baselines, "git_state", lambda i=i: {
            "commit": f"{i:040d}", "branch": NAMES[4], "dirty": False,
            "commit_time": f"2026-01-0{i + 1}T00:00:00Z", "position": i, "subject": subject})
        baselines.autosave(measurements(1e-6 * (1 + i)), root=root)
    return root


def redacted(report: Any, *secrets: str) -> Any:
    """``report.redacted()``, checked: every one of ``secrets`` (a host name, a folder)
    is in each format of ``report`` and in none of the redacted one's."""
    for text in (report.markdown(), report.text(), report.json()):
        assert all(secret in text for secret in secrets), text
    out = report.redacted()
    for text in (out.markdown(), out.text(), out.json()):
        assert not any(secret in text for secret in secrets), text
    assert out.exit_status == report.exit_status
    return out
