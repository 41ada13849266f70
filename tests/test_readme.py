"""The README: the front door, read in five minutes; its examples run, so they cannot rot.

Its blocks are checked as every documentation page's are (``doc_pages``): ``python``
blocks run (a block defining ``test_`` functions under pytest with opbench's plugin),
``sh`` command lines parse with opbench's own parser.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import doc_pages
from conftest import PYTEST_PLUGIN_ARGS

README = doc_pages.README
TEXT = README.read_text()
BLOCKS = doc_pages.blocks(README)
# The issue's bound, and the size of the longest README among the anchors' (google/benchmark).
MAX_BYTES = 12_000
# CI's and the contributor guide's contract: these two lines, exactly.
QUICK_START = ('pip install ".[torch]" && python -m opbench demo\n'
               'pip install ".[test]" && python -m pytest -n 2\n')


def test_the_readme_is_at_most_12_kb() -> None:
    size = len(README.read_bytes())
    assert size <= MAX_BYTES, (f"README.md is {size} bytes, over {MAX_BYTES}: move the detail to a "
                               "page under docs/ and link it")


def test_the_quick_start_commands_are_unchanged() -> None:
    assert next(b.code for b in BLOCKS if b.kind == "sh") == QUICK_START


def test_the_readme_has_the_three_examples() -> None:
    kinds = [b.kind for b in BLOCKS]
    assert kinds.count("python") >= 2 and any("def test_" in b.code for b in BLOCKS)
    assert any("opbench ab --base" in b.code for b in BLOCKS if b.kind == "sh")
    assert "import opbench as benchmark" in TEXT  # the drop-in claim, shown


def _links(text: str) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", text)


def _anchors(page: Path) -> set[str]:
    """GitHub's and MyST's heading anchors: lower case, punctuation dropped, spaces as '-'."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).strip().replace(" ", "-") for h in headings}


def test_every_link_of_the_readme_reaches_a_page_and_heading() -> None:
    links = [link for link in _links(TEXT) if not link.startswith(("http://", "https://"))]
    assert len(links) >= 20
    for link in links:
        path, _, anchor = link.partition("#")
        target = README.parent / path
        assert target.is_file(), f"README links to {path}, which does not exist"
        if anchor:
            assert anchor in _anchors(target), f"README links to #{anchor}, not a heading of {path}"


def test_the_feature_table_links_every_guide_page() -> None:
    index = (doc_pages.DOCS / "index.md").read_text()
    guide = index.split(":caption: Guide", 1)[1].split("```", 1)[0].split()
    table = TEXT.split("## Features", 1)[1].split("\n## ", 1)[0]
    linked = {Path(link).stem for link in _links(table)}
    assert set(guide) - {":maxdepth:", "1"} <= linked


def _code_paths(table: str) -> list[str]:
    """The paths of the feature table's last column (under python/opbench/)."""
    rows = [line for line in table.split("|---|", 1)[1].splitlines() if line.startswith("| ")]
    return [path for row in rows for path in re.findall(r"`([^`]+)`", row.rsplit("|", 2)[1])]


def test_the_feature_table_names_where_each_feature_lives() -> None:
    # A newcomer finds a feature's code from the README at the first try: every path the
    # table names exists, and every package of opbench is some feature's home (torch's
    # module paths, utils/ and op_fuzzers/, and the front doors in integrations/ aside).
    package = README.parent / "python" / "opbench"
    paths = _code_paths(TEXT.split("## Features", 1)[1].split("\n## ", 1)[0])
    assert len(paths) >= 17, paths
    for path in paths:
        assert (package / path).exists(), f"the feature table names {path}, which does not exist"
    homes = {p.split("/")[0] for p in paths}
    packages = {d.name for d in package.iterdir() if (d / "__init__.py").is_file()}
    assert packages - {"utils", "op_fuzzers", "integrations"} <= homes


def test_the_demo_output_is_the_recorded_one() -> None:
    recorded = (doc_pages.DOCS / "figures" / "demo.md").read_text()
    assert recorded in TEXT


@pytest.mark.parametrize("block", [pytest.param(b, marks=[pytest.mark.slow] * b.slow)
                                   for b in BLOCKS if b.kind in doc_pages.RUN_KINDS],
                         ids=lambda b: b.id)
def test_readme_block(block: doc_pages.Block, tmp_path: Path) -> None:
    doc_pages.run(block, tmp_path, PYTEST_PLUGIN_ARGS)
