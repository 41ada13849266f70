"""The report: a static HTML site of every machine's history (``opbench report -o DIR``).

``write(out_dir)`` writes ``index.html`` (each benchmark with its latest value,
a sparkline and its latest change beyond the noise, per machine side by side)
and one page per benchmark under ``bench/`` (its history per machine, side by
side: a point per run with the median's interval, commits along the axis, the
fitted levels, steps drawn at the first commit after them, drifts shaded,
changes within the noise drawn faint and titled so; commits labelled by their tag
when they have one;
instruction counts and times on charts of their own). Hovering over a chart
shows the nearest run's commit, branch, subject, value and environment.

Nothing is fetched: the data is JSON inside each page (with ``<``, ``>`` and ``&``
written as ``\\u003c``, ``\\u003e``, ``\\u0026``, so no name or commit subject can
end the script or open a comment), drawn by ``opbench-chart-1.2.0.js``
(hand-written SVG drawing, written beside the pages), so the site opens from the
file system, offline, and can be published as it is; ``redact=True`` leaves out
host names and absolute paths first.

Example:
    >>> import tempfile
    >>> from opbench import Measurement, TaskSpec
    >>> from opbench.store import baselines
    >>> root, out = tempfile.mkdtemp(), tempfile.mkdtemp()
    >>> _ = baselines.autosave([Measurement(1, [1e-6], TaskSpec("f()", "pass", name="f"))],
    ...                        root=root)
    >>> sorted(p.name for p in write(out, root=root).iterdir())
    ['bench', 'index.html', 'opbench-chart-1.2.0.js']
"""
from __future__ import annotations

import hashlib
import html
import json
import os
import re
import statistics
from importlib import resources
from pathlib import Path
from typing import Any

from opbench import _redact
from opbench._files import atomic_write_text
from opbench._ownership import shared_writers
from opbench.core.formatting import format_value
from opbench.core.measurement import select_unit
from opbench.errors import UnsafeFolderWarning, warn
from opbench.store import baselines
from opbench.store import history as _history

__all__ = ["CHART_SCRIPT", "write"]

CHART_SCRIPT = "opbench-chart-1.2.0.js"
# JSON's own escapes for what HTML reads as markup inside a script element.
_SCRIPT_SAFE = str.maketrans({"<": "\\u003c", ">": "\\u003e", "&": "\\u0026"})
# The environment facts a tooltip shows, in this order.
_ENV_KEYS = ("hostname", "python", "torch", "cpu_model")

_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; } td, th { padding: 4px 10px; border-bottom: 1px solid #ddd; }
th { text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.machines { display: flex; flex-wrap: wrap; gap: 24px; }
.machine { flex: 1 1 360px; min-width: 0; max-width: 900px; }
.chart { position: relative; } .chart-svg { background: #fff; display: block; }
.grid { stroke: #eee; } .axes text { font-size: 11px; fill: #555; }
.fit { fill: none; stroke: #e08020; stroke-width: 2; }
.interval { stroke: #7aa6d6; stroke-width: 2; } .point { fill: #1f5fa8; }
.point.left-out { fill: #fff; stroke: #888; stroke-width: 1.5; }
.step { stroke: #c00; stroke-width: 2; stroke-dasharray: 5 3; }
.minor-step { stroke: #bbb; stroke-width: 1; stroke-dasharray: 2 3; }
.drift { fill: #c00; opacity: 0.08; }
.tooltip { position: absolute; background: #fffbe6; border: 1px solid #cc9; padding: 4px 8px;
           font-size: 12px; pointer-events: none; white-space: nowrap; }
.up { color: #b00; } .down { color: #070; } .problems { color: #b00; }
"""


def _slug(key: str) -> str:
    """A file name for a benchmark key: readable, and unique by a short hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("_")[:60] or "benchmark"
    return f"{readable}-{hashlib.sha1(key.encode()).hexdigest()[:8]}"


def _env_line(env: dict[str, Any], redact: bool = False) -> str:
    env = _redact.environment(env) if redact else env
    return ", ".join(f"{k}={env[k]}" for k in _ENV_KEYS if env.get(k) is not None)


def _series_json(series: _history.Series, detection: Any, title: str,
                 redact: bool = False) -> dict[str, Any]:
    groups = series.by_commit()
    if series.kind == _history.INSTRUCTIONS:
        unit, scale = "instructions", 1.0
    elif series.kind in _history.MEMORY_KINDS:  # per call: allocations, or bytes
        unit, scale = f"{series.kind} per call", 1.0
    else:
        unit, scale = select_unit(statistics.median([p.value for p in series.points]))
    commits, points = [], []
    for i, (commit, pts) in enumerate(groups):
        git = pts[0].run.git
        commits.append({"commit": commit, "branch": git.get("branch"), "dirty": git.get("dirty"),
                        "subject": git.get("subject"), "tag": _history.tag(pts),
                        "label": _history.label(pts)[:12],
                        "time": git.get("commit_time") or pts[0].run.saved_at})
        kept = {id(p) for p in _history.counted(pts)}
        # A run left out of its commit's level is drawn apart, with why: its core ran
        # slower than the machine's full speed (opbench.store.history).
        points += [{"x": i, "run": p.run.number, "value": p.value, "low": p.low, "high": p.high,
                    "commit": commit, "env": _env_line(p.run.environment, redact),
                    "left_out": id(p) not in kept, "slowdown": p.slowdown}
                   for p in pts]
    noted = [c for c in detection.changes if c.exceeds_noise]
    return {
        "title": title, "unit": unit if series.kind != _history.TIME else f"{unit} per run",
        "scale": scale, "commits": commits, "points": points, "fit": detection.fit,
        "segments": detection.segments,
        # What holds a change, as the text says it: "z=9.6 with 9 paired rounds".
        "steps": [{"start": c.start, "end": c.end, "size": c.size,
                   "evidence": _history.evidence(c)} for c in noted if c.kind == "step"],
        "drifts": [{"start": c.start, "end": c.end, "size": c.size} for c in noted
                   if c.kind == "drift"],
        # Changes within the noise: drawn faint and labelled so, never as a change.
        "minor": [{"kind": c.kind, "start": c.start, "end": c.end, "size": c.size,
                   "evidence": _history.evidence(c)}
                  for c in detection.changes if not c.exceeds_noise],
    }


def _page(title: str, body: str, data: dict[str, Any] | None, script: str) -> str:
    embedded = ""
    if data is not None:
        # Inside <script>, "</script", "<!--" and "<script" change how the rest of the page
        # is read (a commit subject holding "<!--" once blanked it): no <, > or & at all.
        text = json.dumps(data, allow_nan=False).translate(_SCRIPT_SAFE)
        embedded = (f'<script type="application/json" id="opbench-data">{text}</script>\n'
                    f'<script src="{script}"></script>\n')
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style>\n{embedded}</head>\n"
            f"<body>\n{body}\n</body></html>\n")


def _sparkline(values: list[float]) -> str:
    if len(values) < 2:
        return ""
    lo, hi = min(values), max(values)
    span = (hi - lo) or 1.0
    pts = " ".join(f"{i * 100 / (len(values) - 1):.1f},{18 - (v - lo) * 16 / span:.1f}"
                   for i, v in enumerate(values))
    return (f'<svg class="sparkline" width="100" height="20" viewBox="0 0 100 20">'
            f'<polyline points="{pts}" fill="none" stroke="#1f5fa8" stroke-width="1.5"/></svg>')


def _change_text(series: _history.Series, change: Any) -> str:
    css = "up" if change.size > 0 else "down"
    return (f'<span class="{css}">{html.escape(_history.describe_change(change))} at '
            f'{html.escape(_history.commit_range(series, change))}</span>')


def _problems(histories: list[_history.History], folder: Path, redact: bool) -> list[str]:
    """What could not be loaded, each file named by its path inside the history's folder
    (without host names or any other path when ``redact``)."""
    hosts = _redact.hosts_of(*(run.environment for h in histories for run in h.runs))
    lines = [p.replace(f"{folder}{os.sep}", "") for h in histories for p in h.problems]
    return [_redact.text(line, hosts) for line in lines] if redact else lines


def write(out_dir: str | os.PathLike[str], root: str | os.PathLike[str] | None = None,
          machines: list[str] | None = None, *, redact: bool = False,
          **detect_options: Any) -> Path:
    """Writes the site for ``machines`` (default: every machine under ``root``) into
    ``out_dir`` (created if missing); returns ``out_dir``.

    Damaged runs are named by their path inside ``root``. ``redact=True`` leaves out
    what names the machines and their folders: host names (in the tooltips'
    environments) and absolute paths (``opbench._redact``), for a site published
    where the machines are not. A folder other users can write gets an
    ``UnsafeFolderWarning``: they could change the site after it is written.

    Raises:
        ValueError: no history found under ``root``.
    """
    out = Path(out_dir)
    names = machines or _history.machines(root)
    histories = [_history.load(root, m) for m in names]
    if not any(h.runs for h in histories):
        raise ValueError(f"no saved runs under {root or 'the baselines folder'}: autosave some "
                         "first (--autosave, --opbench-autosave)")
    (out / "bench").mkdir(parents=True, exist_ok=True)
    for folder in (out, out / "bench"):
        shared = shared_writers(folder)
        if shared is not None:
            warn(UnsafeFolderWarning, f"{folder}: {shared}: other users could change the "
                 "report after it is written; write it into a folder of your own")
            break
    script = resources.files("opbench.analysis").joinpath("report_assets", "chart.js").read_text("utf-8")
    atomic_write_text(out / CHART_SCRIPT, script)
    found = {h.machine: dict(((s.key, s.kind), (s, d)) for s, d in
                             _history.changes(h, **detect_options)) for h in histories}
    keys = sorted({key for h in histories for key, _ in h.benchmarks()})
    rows = []
    for key in keys:
        slug = _slug(key)
        data: dict[str, Any] = {"series": {}}
        columns: list[str] = []
        cells: list[tuple[str, str, str, str]] = []
        for h in histories:
            charts = []
            for kind in (_history.TIME, _history.INSTRUCTIONS, *_history.MEMORY_KINDS):
                if (key, kind) not in found[h.machine]:
                    continue
                series, detection = found[h.machine][(key, kind)]
                sid = f"{h.machine}|{kind}"
                data["series"][sid] = _series_json(series, detection, f"{key} ({kind})",
                                                   redact)
                charts.append(f'<h3>{kind}</h3><div class="chart" data-series="{html.escape(sid)}">'
                              f'</div>')
                if kind == _history.TIME or not cells or cells[-1][0] != h.machine:
                    latest = [c for c in detection.changes if c.exceeds_noise][-1:]
                    cells.append((h.machine, format_value(series.points[-1].value, kind),
                                  _sparkline([p.value for p in series.points]),
                                  _change_text(series, latest[0]) if latest else ""))
            if charts:
                columns.append(f'<div class="machine"><h2>{html.escape(h.machine)}</h2>'
                               f'{"".join(charts)}</div>')
        body = (f'<p><a href="../index.html">all benchmarks</a></p><h1>{html.escape(key)}</h1>'
                f'<div class="machines">{"".join(columns)}</div>')
        atomic_write_text(out / "bench" / f"{slug}.html",
                          _page(key, body, data, f"../{CHART_SCRIPT}"))
        by_machine = {c[0]: c for c in cells}
        rows.append(f'<tr><td><a href="bench/{slug}.html">{html.escape(key)}</a></td>' + "".join(
            f'<td class="num">{by_machine[m][1]}</td><td>{by_machine[m][2]}</td>'
            f'<td>{by_machine[m][3]}</td>' if m in by_machine else "<td></td><td></td><td></td>"
            for m in names) + "</tr>")
    head = "".join(f'<th colspan="3">{html.escape(m)}</th>' for m in names)
    sub = "<th>latest</th><th>trend</th><th>latest change</th>" * len(names)
    problems = _problems(histories, baselines.root_dir(root), redact)
    notes = ('<div class="problems"><p>Skipped (damaged):</p><ul>'
             + "".join(f"<li>{html.escape(p)}</li>" for p in problems) + "</ul></div>"
             if problems else "")
    body = (f"<h1>opbench history</h1>{notes}<table><tr><th rowspan=\"2\">benchmark</th>{head}"
            f"</tr><tr>{sub}</tr>{''.join(rows)}</table>")
    atomic_write_text(out / "index.html", _page("opbench history", body, None, CHART_SCRIPT))
    return out
