"""The documentation's figures come from scripts and cannot rot into placeholders.

The figures live in ``docs/figures/``, one file per recorded output or table, included
by the pages that show them (the README keeps a copy of the demo's output). Each file
opens with a comment naming its script: ``<!-- output of ... -->`` above program
output, ``<!-- from benchmarks/NAME.py ... -->`` above a table.

Convention: a fenced block without a language (program output: a table, a
comparison) is introduced by an HTML comment on the line just above its fence,
``<!-- output of benchmarks/NAME.py [ARGS] -->`` (or ``<!-- output of python -m
opbench COMMAND [ARGS] -->`` for the command line's own output), naming a script that
exists. A page that shows an output block outside ``docs/figures/`` shows a recorded
one, character for character; where a page's prose restates a recorded figure (a cell,
a range, a ratio, a target met), the figure is read from its ``docs/figures/`` file
and compared with the page, so re-recording a table without the prose fails here. The
summary table (docs/figures/benchmarks.md) names a script in its first column: each
exists.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import doc_pages

ROOT = doc_pages.ROOT
FIGURES = sorted((doc_pages.DOCS / "figures").glob("*.md"))


def output_blocks(text: str) -> list[tuple[str, str]]:
    """(the line before its fence, its text) of every fenced block without a language."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        if lines[i].startswith("```"):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            if lines[i] == "```":
                blocks.append((lines[i - 1] if i else "", "\n".join(lines[i + 1:end]) + "\n"))
            i = end
        i += 1
    return blocks


OUTPUT_BLOCKS = [block for page in doc_pages.PAGES for block in output_blocks(page.read_text())]
_SOURCE = re.compile(r"^<!-- output of (?:(benchmarks/\w+\.py)|python -m opbench (\w+))(?: [^>]*)? -->$")
# A row: a label with letters, two or more spaces, then a figure.
_PLACEHOLDER = re.compile(r"^\s*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\s*$|\b(?:TODO|TBD|FIXME|XXX)\b", re.M)


def _script(before: str) -> Path:
    match = _SOURCE.match(before.strip())
    assert match, f"an output block must follow `<!-- output of benchmarks/NAME.py ... -->`, found {before!r}"
    if match[1]:
        return ROOT / match[1]
    return ROOT / "python" / "opbench" / "integrations" / "cli" / f"{match[2]}.py"


def test_there_are_output_blocks() -> None:
    assert len(OUTPUT_BLOCKS) >= 4


@pytest.mark.parametrize("figure", FIGURES, ids=[f.name for f in FIGURES])
def test_each_figure_file_names_the_script_that_made_it(figure: Path) -> None:
    first = figure.read_text().splitlines()[0]
    named = re.match(r"^<!-- (?:output of|from) (benchmarks/(?:\w+|\*)\.py|python -m opbench \w+)\b.* -->$",
                     first)
    assert named, f"{figure.name} must open with `<!-- from benchmarks/NAME.py ... -->`, found {first!r}"
    if "*" not in named[1] and named[1].startswith("benchmarks/"):
        assert (ROOT / named[1]).is_file(), named[1]


@pytest.mark.parametrize(("before", "block"), OUTPUT_BLOCKS,
                         ids=[f"block{i}" for i in range(len(OUTPUT_BLOCKS))])
def test_each_output_block_names_an_existing_script(before: str, block: str) -> None:
    script = _script(before)
    assert script.is_file(), f"{script} does not exist"


def test_a_page_shows_the_recorded_output() -> None:
    recorded = {block: figure for figure in FIGURES for block in output_blocks(figure.read_text())}
    for page in doc_pages.PAGES:
        if page.parent == doc_pages.DOCS / "figures":
            continue
        for block in output_blocks(page.read_text()):
            assert block in recorded, (f"{page.relative_to(ROOT)} shows an output that no file of "
                                       f"docs/figures/ holds (include the file, or copy it whole): {block}")


def _prose(page: str) -> str:
    """A page's text with every run of blanks one space, as it reads."""
    return " ".join((ROOT / page).read_text().split())


def _figure(name: str) -> str:
    return (doc_pages.DOCS / "figures" / name).read_text()


def test_the_compile_page_restates_the_recorded_cells() -> None:
    text = _figure("compile_overhead.md")
    cells = {row.split("|")[0].strip(): [c.strip() for c in row.split("|")[1:]]
             for row in text.splitlines() if re.match(r"^\s+(eager|compiled)\s+\|", row)}
    pairs = [f"{eager} / {compiled}" for eager, compiled in zip(cells["eager"], cells["compiled"])]
    assert len(pairs) == 3, cells
    page = _prose("docs/compile.md")
    assert f"here {pairs[0]}, {pairs[1]} and {pairs[2]}." in page, pairs
    ratios = [row.split()[-1] for row in text.splitlines() if re.match(r"^(eager|compiled), ", row)]
    assert len(ratios) == 6, ratios
    low, high = min(ratios, key=float), max(ratios, key=float)
    assert f"within 3% of timeit's figure ({low}-{high})" in page, (low, high)
    assert 0.97 <= float(low) and float(high) <= 1.03  # "within 3%"


def test_the_cpp_page_restates_the_recorded_first_build() -> None:
    row = next(r for r in _figure("benchmarks.md").splitlines()
               if "first measurement, `torch::` statement from an empty cache" in r)
    ours, torchs, ratio = re.search(r"\(([\d.]+) s vs ([\d.]+) s;.*\| ([\d.]+) \|$", row).groups()
    assert f"in {ratio}x torch's time ({ours} s against {torchs} s" in _prose("docs/cpp.md")
    assert round(float(ours) / float(torchs), 2) == float(ratio)


def test_the_ab_page_says_its_targets_are_met_and_the_figures_meet_them() -> None:
    page = _prose("docs/ab.md")
    targets = re.search(r"The targets were at most (\d+) false alarm, (\d+) and (\d+) of 20 caught, in "
                        r"at most ([\d.]+)x a session: all met\.", page)
    assert targets, "docs/ab.md no longer states its targets as this test reads them"
    alarms, caught_5, caught_10, ratio = targets.groups()
    row = next(r for r in _figure("ab_detection.md").splitlines() if r.startswith("| `opbench ab`"))
    cells = [c.strip().strip("*") for c in row.split("|")[2:-1]]
    figures = [int(c.split("/")[0]) for c in cells[:4]] + [float(cells[4].rstrip("x"))]
    assert figures[0] <= int(alarms) and figures[1] >= int(caught_5) and figures[2] >= int(caught_10), cells
    assert figures[4] <= float(ratio), cells


def test_no_placeholder_remains() -> None:
    for _, block in OUTPUT_BLOCKS:
        assert not _PLACEHOLDER.search(block), block
    assert not any("SIDE_BY_SIDE" in page.read_text() for page in doc_pages.PAGES)


def test_the_benchmarks_table_names_scripts_that_exist() -> None:
    section = (doc_pages.DOCS / "figures" / "benchmarks.md").read_text()
    scripts = re.findall(r"^\| `(\w+\.py)` \|", section, re.M)
    assert len(scripts) >= 5
    for name in scripts:
        assert (ROOT / "benchmarks" / name).is_file(), name


def test_the_checks_catch_what_they_are_for() -> None:
    text = "a\n```python\nx = 1\n```\nprose\n<!-- c -->\n```\nout  1\n```\n"
    assert output_blocks(text) == [("<!-- c -->", "out  1\n")]
    assert _PLACEHOLDER.search("SIDE_BY_SIDE") and _PLACEHOLDER.search("figures: TODO")
    assert not _PLACEHOLDER.search("Times are in microseconds (us).")
    with pytest.raises(AssertionError, match="must follow"):
        _script("Some prose:")
