"""The documentation's figures come from scripts and cannot rot into placeholders.

The figures live in ``docs/figures/``, one file per recorded output or table, included
by the pages that show them (the README keeps a copy of the demo's output). Each file
opens with a comment naming its script: ``<!-- output of ... -->`` above program
output, ``<!-- from benchmarks/NAME.py ... -->`` above a table.

Convention: a fenced block without a language (program output: a table, a
comparison) is introduced by an HTML comment on the line just above its fence,
``<!-- output of benchmarks/NAME.py [ARGS] -->`` (or ``<!-- output of python -m
opbench COMMAND [ARGS] -->`` for the command line's own output). The script must
exist, and every word of every row label of the block (the words before a row's
first figure) must be in the script's source or opbench's (which formats most
tables; words in parentheses are data, a kernel's name), so a renamed row or a
pasted figure from elsewhere fails here. The summary table (docs/figures/benchmarks.md)
names a script in its first column: each exists.
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
_ROW = re.compile(r"^(?P<label>\s*[A-Za-z][^|]*?)\s{2,}-?[\d.,]+(?:\s|%|$)")
_PACKAGE_SOURCE = "".join(p.read_text() for p in (ROOT / "python" / "opbench").rglob("*.py"))
_PLACEHOLDER = re.compile(r"^\s*[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\s*$|\b(?:TODO|TBD|FIXME|XXX)\b", re.M)


def _script(before: str) -> Path:
    match = _SOURCE.match(before.strip())
    assert match, f"an output block must follow `<!-- output of benchmarks/NAME.py ... -->`, found {before!r}"
    if match[1]:
        return ROOT / match[1]
    return ROOT / "python" / "opbench" / "integrations" / "cli" / f"{match[2]}.py"


def row_labels(block: str) -> list[str]:
    """The labels of a block's rows of figures (``all instructions`` of
    ``all instructions      1234      1200``)."""
    return [m["label"].strip() for line in block.splitlines() if (m := _ROW.match(line))]


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
def test_each_output_block_names_an_existing_script_that_prints_its_rows(before: str, block: str) -> None:
    script = _script(before)
    assert script.is_file(), f"{script} does not exist"
    source = script.read_text() + _PACKAGE_SOURCE
    for label in row_labels(block):
        words = re.findall(r"[A-Za-z_]{3,}", re.sub(r"\(.*?\)", "", label))
        unknown = [w for w in words if w not in source]
        assert not unknown, f"row {label!r}: {unknown} in neither {script.relative_to(ROOT)} nor opbench"


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
    assert row_labels("x:\nall instructions        1234      1200\n  denoised   12\n[1, 1]  |  4") == \
        ["all instructions", "denoised"]
    assert _PLACEHOLDER.search("SIDE_BY_SIDE") and _PLACEHOLDER.search("figures: TODO")
    assert not _PLACEHOLDER.search("Times are in microseconds (us).")
    with pytest.raises(AssertionError, match="must follow"):
        _script("Some prose:")
