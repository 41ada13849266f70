"""The report: a static site checked in headless Chromium (DOM after scripts, console, hover).

Run as a script (``python tests/test_report.py OUT.png``) it writes the README's
screenshot from the same history.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

import chromium
import history_repo
import hostile
from opbench._text import short_commit
from opbench.analysis import report

# .ci/run installs Chromium and sets this: there a missing browser fails, not skips.
REQUIRED = bool(os.environ.get("OPBENCH_REQUIRE_CHROMIUM"))
needs_chromium = pytest.mark.skipif(not chromium.available() and not REQUIRED,
                                    reason="headless Chromium not installed (apt-get install "
                                           "chromium; .ci/run does)")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, list[str]]:
    base = tmp_path_factory.mktemp("report")
    commits = history_repo.build(base / "repo", base / "store")
    return report.write(base / "site", root=base / "store"), commits


@pytest.fixture(scope="module")
def browser():
    with chromium.Browser() as b:
        yield b


def page_of(site: Path, key: str) -> Path:
    index = (site / "index.html").read_text()
    return site / re.search(rf'href="(bench/[^"]+)">{key}<', index).group(1)


def centre(browser: chromium.Browser, selector: str, index: int = 0) -> tuple[float, float]:
    return tuple(browser.evaluate(  # type: ignore[return-value]
        f"(() => {{ const r = document.querySelectorAll({selector!r})[{index}]"
        ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()"))


def test_the_site_is_self_contained(site):
    out, _ = site
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert len(names) == 6 and names[-2:] == ["index.html", report.CHART_SCRIPT]
    assert all(n.startswith("bench/") and n.endswith(".html") for n in names[:4])
    for page in out.rglob("*.html"):
        text = page.read_text()
        assert "http://" not in text and "https://" not in text  # nothing fetched
        assert 'src="http' not in text and "<link" not in text
    script = (out / report.CHART_SCRIPT).read_text()
    assert script.startswith("/* opbench-chart 1.2.0") and "fetch(" not in script


@needs_chromium
def test_console_errors_are_caught(browser, tmp_path):
    """The check the report passes can fail: a page that throws is reported."""
    page = tmp_path / "bad.html"
    page.write_text("<html><body><script>console.error('bad'); undefined_name();</script>"
                    "</body></html>")
    browser.open(page)
    errors = browser.errors()
    assert len(errors) == 2 and "bad" in errors[0] and "undefined_name" in errors[1]


@needs_chromium
def test_index_lists_each_benchmark_with_its_latest_change(site, browser):
    out, commits = site
    browser.open(out / "index.html")
    assert browser.errors() == []
    rows = browser.evaluate("[...document.querySelectorAll('table tr')].slice(2)"
                            ".map(r => r.innerText)")
    assert [r.split("\t")[0] for r in rows] == ["creep", "flat_a", "flat_b", "jump"]
    assert browser.evaluate("document.querySelectorAll('svg.sparkline').length") == 4
    jump = rows[3]
    assert "step +15." in jump and f"{short_commit(commits[11])}..{short_commit(commits[12])}" in jump
    assert "drift" in rows[0] and rows[1].split("\t")[-1].strip() == ""


@needs_chromium
@pytest.mark.parametrize("key", ["creep", "flat_a", "flat_b", "jump"])
def test_each_benchmark_page_draws_one_chart_without_console_errors(site, browser, key):
    out, commits = site
    browser.open(page_of(out, key))
    assert browser.errors() == []
    assert browser.evaluate("document.body.dataset.chartsDrawn") == "1"
    assert browser.evaluate("document.querySelectorAll('svg.chart-svg').length") == 1
    assert browser.evaluate("document.querySelectorAll('circle.point').length") == 30
    steps = browser.evaluate("[...document.querySelectorAll('.step')].map(e => e.dataset.commit)")
    drifts = browser.evaluate("[...document.querySelectorAll('.drift')]"
                              ".map(e => e.dataset.commit)")
    if key == "jump":
        assert (steps, drifts) == ([commits[history_repo.STEP_AT]], [])
    elif key == "creep":
        d = history_repo.DRIFT_FROM
        assert steps == [] and len(drifts) == 1 and drifts[0] in commits[d - 1:d + 1]
    else:
        assert (steps, drifts) == ([], [])


@needs_chromium
def test_the_step_is_drawn_at_its_commit_and_hover_shows_the_commit(site, browser, tmp_path):
    out, commits = site
    browser.open(page_of(out, "jump"))
    at = history_repo.STEP_AT
    step_x, _ = centre(browser, ".step")
    before_x, _ = centre(browser, "circle.point", at - 1)
    after_x, after_y = centre(browser, "circle.point", at)
    assert before_x < step_x < after_x
    assert browser.evaluate("document.querySelector('.tooltip').hidden") is True
    browser.hover(after_x, after_y)
    tip = browser.evaluate("document.querySelector('.tooltip').innerText")
    assert browser.evaluate("document.querySelector('.tooltip').hidden") is False
    assert commits[at] in tip and f"change {at}" in tip and "on main" in tip
    assert "us per run" in tip and "python=" in tip
    browser.hover(*centre(browser, "circle.point", 3))
    assert commits[3] in browser.evaluate("document.querySelector('.tooltip').innerText")
    assert browser.errors() == []
    shot = tmp_path / "jump.png"
    browser.screenshot(shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size < 200_000


def test_damaged_runs_are_named_on_the_index(site, tmp_path):
    import shutil

    from opbench.store import baselines

    store = tmp_path / "store"
    shutil.copytree(site[0].parent / "store", store)
    baselines.runs(store)[0].write_text("{")
    out = report.write(tmp_path / "site", root=store)
    index = (out / "index.html").read_text()
    assert "Skipped (damaged)" in index and "0001_" in index


def _readme_screenshot(path: Path) -> None:
    import tempfile

    base = Path(tempfile.mkdtemp())
    commits = history_repo.build(base / "repo", base / "store")
    out = report.write(base / "site", root=base / "store")
    with chromium.Browser(width=820, height=470) as b:
        b.open(page_of(out, "jump"))
        b.hover(*centre(b, "circle.point", history_repo.STEP_AT + 1))
        assert commits[history_repo.STEP_AT + 1] in b.evaluate(
            "document.querySelector('.tooltip').innerText")
        b.screenshot(path)


if __name__ == "__main__":
    _readme_screenshot(Path(sys.argv[1]))


def _two_machine_store(root: Path) -> None:
    """Two machines, each with six commits of one benchmark timed and counted."""
    from opbench.core.instructions import InstructionCounts
    from opbench.core.measurement import Measurement, TaskSpec
    from opbench.store.results import save

    spec = TaskSpec("f()", "pass", name="f")
    for machine, scale in (("box-a", 1.0), ("box-b", 2.0)):
        (root / machine).mkdir(parents=True)
        for i in range(6):
            env = {"git": {"commit": f"{i:040x}", "branch": "main", "dirty": False,
                           "commit_time": f"2026-01-0{i + 1}T00:00:00Z", "position": i + 1,
                           "subject": f"commit {i}"}, "hostname": machine}
            # A time run and an instruction-count run (pytest --opbench-mode) per commit.
            save([Measurement(1, [scale * 1e-6 * (1 + 0.001 * k) for k in range(7)], spec)],
                 root / machine / f"{2 * i + 1:04d}_x.json", environment=env)
            save([InstructionCounts(100, (100_000 + 50 * i,), spec)],
                 root / machine / f"{2 * i + 2:04d}_x.json", environment=env)


@needs_chromium
def test_machines_side_by_side_times_and_counts_on_their_own_charts(tmp_path, browser):
    _two_machine_store(tmp_path / "store")
    out = report.write(tmp_path / "site", root=tmp_path / "store")
    browser.open(out / "index.html")
    assert browser.errors() == []
    assert browser.evaluate("[...document.querySelectorAll('th[colspan]')].map(e => e.innerText)"
                            ) == ["box-a", "box-b"]
    browser.open(page_of(out, "f"))
    assert browser.errors() == []
    machines = browser.evaluate("[...document.querySelectorAll('.machine')].map(m => "
                                "[m.querySelector('h2').innerText, "
                                "[...m.querySelectorAll('h3')].map(h => h.innerText), "
                                "m.querySelectorAll('svg.chart-svg').length])")
    assert machines == [["box-a", ["time", "instructions"], 2],
                        ["box-b", ["time", "instructions"], 2]]
    tops = browser.evaluate("[...document.querySelectorAll('.machine')].map(m => "
                            "m.getBoundingClientRect().top)")
    assert tops[0] == tops[1]  # side by side, not stacked
    units = browser.evaluate("[...document.querySelectorAll('svg.chart-svg')].map(s => "
                             "s.querySelector('.axes > text[transform]').textContent)")
    assert units == ["us per run", "instructions"] * 2


# -- hostile names, redaction, where the site is written (issue 34) -------------------------

class _Tree(HTMLParser):
    """An HTML document as html.parser reads it: each element with its attributes and
    text, in document order (``<script>``'s content is its text, as a browser's)."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[dict] = []
        self._open: list[dict] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        element = {"tag": tag, "attrs": dict(attrs), "text": ""}
        self.elements.append(element)
        if tag not in ("meta", "br", "img", "link", "polyline"):
            self._open.append(element)

    def handle_endtag(self, tag):
        while self._open:
            if self._open.pop()["tag"] == tag:
                break

    def handle_data(self, data):
        for element in self._open:
            element["text"] += data

    def all(self, tag: str) -> list[dict]:
        return [e for e in self.elements if e["tag"] == tag]


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory) -> Path:
    mp = pytest.MonkeyPatch()
    try:
        root = hostile.history(tmp_path_factory.mktemp("hostile") / "store", mp)
    finally:
        mp.undo()
    return report.write(root.parent / "site", root=root)


def test_hostile_names_are_text_on_every_page(hostile_site):
    index = _Tree((hostile_site / "index.html").read_text())
    assert index.all("script") == [] and len(index.all("h1")) == 1
    links = [a for a in index.all("a") if a["attrs"]["href"].startswith("bench/")]
    # (HTML reads a carriage return as a line feed, as the file's text does here.)
    assert sorted(a["text"] for a in links) == sorted(n.replace("\r", "\n") for n in hostile.NAMES)
    for link in links:
        page = _Tree((hostile_site / link["attrs"]["href"]).read_text())
        assert [h["text"] for h in page.all("h1")] == [link["text"]]
        data_script, chart_script = page.all("script")  # nothing else became a script
        assert chart_script["attrs"]["src"] == f"../{report.CHART_SCRIPT}"
        # The data is JSON a browser reads as one script's text: nothing in it may open a
        # comment, a tag or an entity (a `<!--` there once swallowed the rest of the page).
        assert not set("<>&") & set(data_script["text"])
        series = next(iter(json.loads(data_script["text"])["series"].values()))
        assert series["commits"][0]["subject"] == hostile.NAMES[2] + " " + hostile.NAMES[0]
        assert series["commits"][0]["branch"] == hostile.NAMES[4]


@pytest.mark.slow  # Chromium
@needs_chromium
def test_a_subject_that_opens_a_comment_does_not_blank_the_page(hostile_site, browser):
    index = (hostile_site / "index.html").read_text()
    page = hostile_site / re.search(r'href="(bench/[^"]+)">&lt;!-- &lt;script&gt;<', index).group(1)
    browser.open(page)
    assert browser.evaluate("document.querySelectorAll('script').length") == 2
    assert browser.evaluate("document.querySelector('h1').textContent") == "<!-- <script>"
    subject = browser.evaluate("Object.values(JSON.parse(document.getElementById("
                               "'opbench-data').textContent).series)[0].commits[0].subject")
    assert subject == hostile.NAMES[2] + " " + hostile.NAMES[0]
    assert browser.evaluate("document.querySelectorAll('.chart svg').length") == 1
    assert browser.errors() == []


def test_redact_drops_host_names_and_paths(tmp_path, monkeypatch):
    from opbench import Measurement, TaskSpec, environment
    from opbench.store import baselines

    real = environment.collect
    monkeypatch.setattr(environment, "collect", lambda: {**real(), "hostname": "build-host-7"})
    store = tmp_path / "store"
    for t in (1e-6, 2e-6):
        baselines.autosave([Measurement(1, [t] * 5, TaskSpec("f()", "pass", name="f"))],
                           root=store)
    damaged = baselines.runs(store)[0]
    damaged.write_text("{")
    plain = report.write(tmp_path / "plain", root=store)
    text = "".join(p.read_text() for p in plain.rglob("*.html"))
    assert "build-host-7" in text  # shown unless redacted
    assert str(store) not in text and f"{damaged.parent.name}/{damaged.name}" in text
    redacted = report.write(tmp_path / "redacted", root=store, redact=True)
    text = "".join(p.read_text() for p in redacted.rglob("*.html"))
    assert "build-host-7" not in text and str(tmp_path) not in text
    assert damaged.name in text  # the damaged file is still named
    r = subprocess.run([sys.executable, "-m", "opbench", "report", "--redact", "--root",
                        str(store), "-o", str(tmp_path / "cli")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "build-host-7" not in "".join(p.read_text() for p in (tmp_path / "cli").rglob("*.html"))


def test_a_site_written_where_others_can_write_is_warned_about(tmp_path):
    import warnings

    from opbench.errors import UnsafeFolderWarning

    store = tmp_path / "store"
    from opbench import Measurement, TaskSpec
    from opbench.store import baselines

    baselines.autosave([Measurement(1, [1e-6] * 5, TaskSpec("f()", "pass", name="f"))], root=store)
    shared = tmp_path / "public"
    shared.mkdir()
    os.chmod(shared, 0o777)
    with pytest.warns(UnsafeFolderWarning, match=f"{shared}: it can be written by its group and "
                                                 "every user"):
        report.write(shared, root=store)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnsafeFolderWarning)
        report.write(tmp_path / "private", root=store)


def _save_release(store: Path, i: int, per_run: float, tags: list[str] | None = None,
                  info: dict | None = None) -> None:
    """A run of "f" (40 times from ``per_run`` seconds up, 1% apart in all) autosaved at
    "release ``i``", the ``i + 1``-th commit."""
    from opbench.core.measurement import Measurement, TaskSpec
    from opbench.store import baselines

    git = {"commit": f"{i + 1:040x}", "branch": None, "dirty": False, "position": i + 1,
           "commit_time": f"2026-01-01T00:{i:02d}:00Z", "subject": f"release {i}",
           "tags": tags or []}
    times = [per_run * (1 + k / 4000) for k in range(40)]
    baselines.autosave([Measurement(1, times, TaskSpec("f()", "pass", name="f"), info=dict(info or {}))],
                       root=store, git=git)


@needs_chromium
def test_tags_label_the_axis_and_changes_within_the_noise_are_drawn_faint(tmp_path, browser):
    levels = [1.0, 1.0, 1.0, 1.012, 1.012, 1.012, 1.5, 1.5, 1.5]  # +1.2%: within; +48%: beyond
    for rep in range(2):
        for i, level in enumerate(levels):
            noise = 1 + 0.004 * ((rep * 2 + i) % 3 - 1)
            _save_release(tmp_path / "store", i, level * noise * 1e-6,
                          tags=[f"v1.{i}"] if i % 2 == 0 else [])
    site = report.write(tmp_path / "site", root=tmp_path / "store")
    browser.open(page_of(site, "f"))
    assert browser.errors() == []
    labels = browser.evaluate("[...document.querySelectorAll('.commit-label')]"
                              ".map(e => e.textContent)")
    assert labels[:3] == ["v1.0", "0000000", "v1.2"]  # the tag, else the hash
    steps = browser.evaluate("[...document.querySelectorAll('.step')].map(e => e.dataset.commit)")
    assert steps == [f"{7:040x}"]
    said = browser.evaluate("[...document.querySelectorAll('.step title')].map(e => e.textContent)")
    assert len(said) == 1 and said[0].startswith("step +48") and "(z=" in said[0]
    minor = browser.evaluate("[...document.querySelectorAll('.minor-step title')]"
                             ".map(e => e.textContent)")
    assert minor and all("within the noise" in t for t in minor)
    browser.hover(*centre(browser, "circle.point", 0))
    assert "v1.0 " in browser.evaluate("document.querySelector('.tooltip').innerText")


@needs_chromium
def test_a_run_left_out_of_its_level_is_drawn_apart_and_says_why(tmp_path, browser):
    # Three commits of two runs; the first run at the middle one shared its core with
    # another tenant's work all along (the probe read 1.8) and took 1.8x as long.
    for rep in range(2):
        for i in range(3):
            slow = 1.8 if (i, rep) == (1, 0) else 1.0
            signals = {"waits": [0.0] * 40, "slowdowns": [slow] * 40, "threads": 1, "cpus": 2}
            _save_release(tmp_path / "store", i, slow * (1 + 0.002 * rep) * 1e-6,
                          info={"disturbance": signals})
    site = report.write(tmp_path / "site", root=tmp_path / "store")
    browser.open(page_of(site, "f"))
    assert browser.errors() == []
    left_out = browser.evaluate("[...document.querySelectorAll('circle.left-out')]"
                                ".map(e => [e.dataset.commit, e.classList.contains('clipped')])")
    # Beyond the counted runs' scale (within 0.3% of 1 us): on the chart's top edge.
    assert left_out == [[f"{2:040x}", True]]
    assert len(browser.evaluate("[...document.querySelectorAll('.interval')]")) == 5
    browser.hover(*centre(browser, "circle.left-out"))
    tip = browser.evaluate("document.querySelector('.tooltip').innerText")
    assert "run 2: 1.802 us" in tip and "left out of the level: its core ran 1.80x slower" in tip
    browser.hover(*centre(browser, "circle.point:not(.left-out)", 2))
    assert "left out" not in browser.evaluate("document.querySelector('.tooltip').innerText")
