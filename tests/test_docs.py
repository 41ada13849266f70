"""The documentation site (docs/): every code block runs, the references are generated
from the code and cover it, and the built site works in a browser.

The slow tests build the site with ``sphinx-build -W`` (or use the build CI made:
``$OPBENCH_DOCS_BUILD``) and open every page in headless Chromium: its title, every
internal link, no console error, and a search for ``collect_callgrind`` that finds it.
(docs/screenshots/make_screenshots.py takes the site's screenshots the same way.)
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

import chromium
import doc_pages
from conftest import PYTEST_PLUGIN_ARGS

sys.path.insert(0, str(doc_pages.DOCS / "_ext"))
import opbench_docs  # docs/_ext is not a package: found through sys.path

DOCS = doc_pages.DOCS
DOC_BLOCKS = [b for b in doc_pages.all_blocks()
              if b.page != doc_pages.README and b.kind in doc_pages.RUN_KINDS]
SOURCES = sorted(p for p in [*DOCS.glob("*.md"), *DOCS.glob("*.rst")])
# .ci/run installs Chromium and sets this: there a missing browser fails, not skips.
REQUIRED = bool(os.environ.get("OPBENCH_REQUIRE_CHROMIUM"))
needs_chromium = pytest.mark.skipif(not chromium.available() and not REQUIRED,
                                    reason="headless Chromium not installed (apt-get install "
                                           "chromium; .ci/run does)")


@pytest.fixture
def measured_peaks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A per-machine folder of the block's own, holding this machine's peaks as if
    `opbench peaks` had measured them (fixed figures). Measuring them streams three
    buffers of 8x the last-level cache, gigabytes on a server's CPU, and took most of the
    fast tier's time; tests/test_peaks.py measures them on small buffers."""
    from opbench.core import peaks

    monkeypatch.setenv("OPBENCH_BASELINE_DIR", str(tmp_path / "machine"))
    peaks.save({"cpu/1": peaks.Peak(device="cpu", threads=1, bandwidth=1e10, copy=1e10, triad=0.9e10,
                                    flop_rates={"float32": 1e11}, how={"fixed by": "tests/test_docs.py"},
                                    measured="2026-01-01T00:00:00+00:00")})


@pytest.mark.parametrize("block", [pytest.param(b, marks=[pytest.mark.slow] * b.slow)
                                   for b in DOC_BLOCKS], ids=[b.id for b in DOC_BLOCKS])
def test_doc_block(block: doc_pages.Block, tmp_path: Path, measured_peaks: None) -> None:
    doc_pages.run(block, tmp_path, PYTEST_PLUGIN_ARGS)


def test_every_block_is_of_a_kind_the_tests_run() -> None:
    kinds = {b.kind for b in doc_pages.all_blocks()}
    assert kinds <= set(doc_pages.KINDS), kinds - set(doc_pages.KINDS)
    assert sum(b.kind == "python" for b in DOC_BLOCKS) >= 15
    assert {"ipython", "sh", "py"} <= {b.kind for b in DOC_BLOCKS}


def test_the_block_checks_can_fail(tmp_path: Path) -> None:
    assert doc_pages.check_shell("opbench show new.json --format markdown\n"
                                 "pytest --opbench-compare base.json --opbench-fail-above 5%\n"
                                 "python -m opbench ab --base main -- pytest benchmarks/ -q\n") == []
    problems = doc_pages.check_shell("opbench nosuch\nopbench show a.json --bogus\n"
                                     "python -m pytest --opbench-nope\ntools/no-such-tool\n")
    assert len(problems) == 4, problems
    assert "invalid choice: 'nosuch'" in problems[0] and "--bogus" in problems[1]
    assert problems[2] == "pytest has no option --opbench-nope" and "tools/no-such-tool" in problems[3]
    bad = doc_pages.blocks(DOCS / "x.md", "```python\nraise SystemExit(3)\n```\n")[0]
    with pytest.raises(AssertionError, match=r"x\.md:1"):
        doc_pages.run(bad, tmp_path, [])
    cell = doc_pages.blocks(DOCS / "x.md", "```ipython\n%load_ext opbench\n%opbench --bogus 1\n```\n")[0]
    with pytest.raises(AssertionError, match=r"UsageError|bogus"):
        doc_pages.run(cell, tmp_path, [])


def _title(source: Path) -> str:
    """A page's title: its first heading (Markdown ``#`` or reStructuredText underlined)."""
    lines = source.read_text().splitlines()
    for i, line in enumerate(lines):
        if source.suffix == ".md" and line.startswith("# "):
            return line[2:].replace("`", "").strip()
        if source.suffix == ".rst" and i + 1 < len(lines) and lines[i + 1] and set(lines[i + 1]) == {"="}:
            return line.replace("``", "").strip()
    raise AssertionError(f"{source} has no title")


def test_every_page_is_in_the_table_of_contents() -> None:
    index = (DOCS / "index.md").read_text()
    listed = set(re.findall(r"^([a-z][\w-]*)$", index, re.M))
    assert listed == {p.stem for p in SOURCES if p.stem != "index"}


def test_every_figure_file_is_shown_by_a_page() -> None:
    pages = "".join(p.read_text() for p in SOURCES)
    for figure in (DOCS / "figures").glob("*.md"):
        assert f"{{include}} figures/{figure.name}" in pages, f"{figure.name} is included nowhere"


def test_the_api_reference_names_every_public_name() -> None:
    import opbench

    text = "\n".join(opbench_docs.api_lines())
    for name in opbench.__all__:
        assert f"opbench.{name}\n" in text or f":: opbench.{name}\n" in text, name


def test_the_cli_reference_has_every_command_and_option() -> None:
    from opbench.integrations.cli import COMMANDS, build_parser

    text = "\n".join(opbench_docs.cli_lines())
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMANDS:
        assert f".. program:: opbench {name}\n" in text
        for action in sub.choices[name]._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert re.search(rf"^\.\. option:: .*{re.escape(option)}\b", text, re.M), option


def test_the_pytest_options_reference_is_the_plugins_table() -> None:
    text = "\n".join(opbench_docs.pytest_option_lines())
    names = doc_pages.pytest_option_names()
    assert {"--opbench-save", "--opbench-mode", "--benchmark-json"} <= names
    for name in names:
        assert re.search(rf"^\.\. option:: {re.escape(name)}\b", text, re.M), name
    # The help is the table's, with argparse's escapes resolved: '5%%' reads '5%'.
    assert "\\'5\\%\\'" in text and "%%" not in text


def test_the_plugin_docstring_points_to_the_generated_options_instead_of_copying_them() -> None:
    from opbench.integrations import pytest_plugin

    doc = pytest_plugin.__doc__ or ""
    assert "docs/pytest-options.rst" in doc
    assert len(re.findall(r"^\s+--opbench-[\w-]+ +[A-Z]", doc, re.M)) == 0


def test_a_docstring_that_is_not_restructuredtext_is_shown_as_written() -> None:
    good = ["Seconds per call.", "", "Example::", "", "    >>> 1", "    1"]
    assert opbench_docs.as_rst(good) == good
    table = ["Options:", "    --a X       one", "  --b      two", "*unclosed"]
    assert opbench_docs.as_rst(table)[:2] == ["::", ""]
    assert opbench_docs.as_rst(["See :func:`opbench.load`."]) == ["See :func:`opbench.load`."]
    assert opbench_docs.escape("a*b `c`") == "a\\*b \\`c\\`"


# -- the built site (slow) ------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CI's build (``$OPBENCH_DOCS_BUILD``, made by .ci/run with -W), else a fresh one."""
    built = os.environ.get("OPBENCH_DOCS_BUILD")
    if built:
        assert (Path(built) / "index.html").is_file(), f"$OPBENCH_DOCS_BUILD={built} has no site"
        return Path(built)
    out = tmp_path_factory.mktemp("docs") / "html"
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(DOCS), str(out)],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return out


class _Ids(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.ids.update(v for k, v in attrs if k == "id" and v)


def _ids(page: Path) -> set[str]:
    parser = _Ids()
    parser.feed(page.read_text())
    return parser.ids


@pytest.mark.slow
def test_the_site_builds_with_every_page_and_every_public_name(site: Path) -> None:
    for source in SOURCES:
        assert (site / f"{source.stem}.html").is_file(), source.name
    import opbench

    ids = _ids(site / "api.html")
    missing = [n for n in opbench.__all__ if f"opbench.{n}" not in ids and f"module-opbench.{n}" not in ids]
    assert not missing, f"not in the API reference: {missing}"
    assert "opbench.Timer.collect_callgrind" in ids
    cli = _ids(site / "cli.html")
    assert "cmdoption-opbench-ab-base" in cli and "cmdoption-pytest-opbench-save" in _ids(
        site / "pytest-options.html")
    # The figures are included, not linked: the methodology page shows the summary table.
    assert "compile_overhead.py" in (site / "methodology.html").read_text()


@pytest.fixture(scope="module")
def browser():
    with chromium.Browser() as b:
        yield b


@pytest.mark.slow
@needs_chromium
def test_every_page_opens_with_its_title_and_working_links(site: Path, browser) -> None:
    checked_links = 0
    for source in SOURCES:
        page = site / f"{source.stem}.html"
        browser.open(page)
        title = _title(source)
        assert browser.evaluate("document.querySelector('[role=main] h1').textContent").rstrip("¶ ") == title
        assert browser.evaluate("document.title").startswith(title)
        hrefs = browser.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)")
        for href in hrefs:
            if not href.startswith("file://"):
                assert href.startswith(("http://", "https://", "mailto:")), (page.name, href)
                continue
            target, _, fragment = href[len("file://"):].partition("#")
            target_path = Path(target.split("?", 1)[0])
            assert target_path.is_file(), f"{page.name}: broken link {href}"
            if fragment and target_path.suffix == ".html":
                assert fragment in _ids(target_path), f"{page.name}: no #{fragment} in {target_path.name}"
            checked_links += 1
        assert browser.errors() == [], page.name
    assert checked_links > 200


@pytest.mark.slow
@needs_chromium
def test_search_finds_collect_callgrind(site: Path, browser) -> None:
    browser.open(site / "search.html")
    browser.evaluate("location.search = '?q=collect_callgrind'")
    deadline = time.monotonic() + 60
    found: list[str] = []
    while time.monotonic() < deadline and not found:
        time.sleep(0.5)
        try:
            found = browser.evaluate(
                "[...document.querySelectorAll('#search-results li a')].map(a => a.textContent)")
        except RuntimeError:  # the page was navigating
            found = []
    assert any("collect_callgrind" in text for text in found), found
    assert browser.errors() == []
