"""Compare exports: Markdown, CSV and HTML show the text table's rows, columns and values."""
from __future__ import annotations

import csv
import html
import io
import os
import re
from html.parser import HTMLParser

import pytest

import opbench
from opbench.analysis.export import CSV_HEADER, to_csv, to_html, to_markdown


def _m(median: float, *, label="add", sub_label="[1]", description="eager", env=None,
       threads=1, n=5) -> opbench.Measurement:
    times = [median * (1 + 0.01 * (i - n // 2)) for i in range(n)]
    spec = opbench.TaskSpec("f(x)", "pass", label=label, sub_label=sub_label,
                            description=description, env=env, num_threads=threads)
    return opbench.Measurement(1, times, spec)


def _sweep() -> list[opbench.Measurement]:
    ms = []
    for threads in (1, 4):
        for size, scale in (("[1]", 1.0), ("[64]", 8.0)):
            for desc, factor in (("eager", 1.0), ("compiled", 0.5)):
                if (threads, size, desc) == (4, "[64]", "compiled"):
                    continue  # a missing cell
                ms.append(_m(2e-6 * scale * factor * threads, sub_label=size, description=desc,
                             threads=threads))
    ms.append(_m(3e-3, label="mul", sub_label=None, description="eager"))
    return ms


def _text_cells(compare: opbench.Compare) -> list[list[str]]:
    """The text table's data rows as cells (row name, values), thread lines skipped."""
    rows = []
    for line in str(compare).splitlines():
        if "|" in line and not line.startswith("["):
            rows.append([c.strip() for c in line.split("|")])
    return rows


def test_markdown_matches_the_text_table():
    compare = opbench.Compare(_sweep())
    md = to_markdown(compare)
    tables = [t for t in md.split("### ") if t]
    assert [t.splitlines()[0] for t in tables] == ["add", "mul"]
    md_rows = [[c.strip() for c in line.strip("|").split("|")]
               for line in tables[0].splitlines() if line.startswith("| ")]
    text_rows = _text_cells(compare)
    header, body = md_rows[0], md_rows[1:]
    assert header == ["threads", "", "eager", "compiled"]
    # same rows in the same order, same numbers; the threads column replaces separator lines
    assert [r[1:] for r in body] == text_rows[1:5]
    assert [r[0] for r in body] == ["1", "1", "4", "4"]
    assert body[3] == ["4", "[64]", "64.0", ""]  # missing cell: empty
    assert "Times are in microseconds (us)." in tables[0]
    assert "Times are in milliseconds (ms)." in tables[1]


def test_markdown_follows_trim_significant_figures_and_warnings():
    ms = [_m(1.234567e-6, n=50), _m(2e-6, description="noisy")]
    ms[1] = opbench.Measurement(1, [1e-6, 2e-6, 3e-6, 4e-6], ms[1].task_spec)
    compare = opbench.Compare(ms)
    compare.trim_significant_figures()
    compare.highlight_warnings()
    md = to_markdown(compare)
    text_values = _text_cells(compare)[1][1:]
    assert f"| {text_values[0]} | {text_values[1]} |" in md
    assert "(! " in md


def test_markdown_escapes_pipes_and_angle_brackets():
    md = to_markdown(opbench.Compare([_m(1e-6, sub_label="a|b<c>", description="x|y")]))
    assert "a\\|b&lt;c&gt;" in md and "x\\|y" in md


def test_env_column_only_when_envs_differ():
    md = to_markdown(opbench.Compare([_m(1e-6, env="A"), _m(2e-6, env="B")]))
    assert "| threads | env |  | eager |" in md
    assert "| 1 | A | [1] | 1.0 |" in md and "| 1 | B | [1] | 2.0 |" in md
    assert "| env |" not in to_markdown(opbench.Compare([_m(1e-6, env="A")]))


def test_csv_one_row_per_cell_in_seconds():
    compare = opbench.Compare(_sweep())
    rows = list(csv.DictReader(io.StringIO(to_csv(compare))))
    assert tuple(rows[0]) == CSV_HEADER
    add = [r for r in rows if r["label"] == "add"]
    assert len(add) == 4 * 2  # every (threads, env, row) x column, missing ones included
    first = add[0]
    assert (first["num_threads"], first["env"], first["row"], first["column"]) == (
        "1", "Unspecified env", "[1]", "eager")
    assert float(first["median_s"]) == pytest.approx(2e-6)
    assert first["unit"] == "us" and first["measurements"] == "5"
    missing = [r for r in add if r["median_s"] == ""]
    assert [(r["num_threads"], r["row"], r["column"]) for r in missing] == [("4", "[64]", "compiled")]
    assert missing[0]["iqr_s"] == "" and missing[0]["unit"] == "us"
    (mul,) = [r for r in rows if r["label"] == "mul"]
    assert mul["row"] == "f(x)" and mul["unit"] == "ms"
    assert float(mul["median_s"]) == pytest.approx(3e-3)


@pytest.mark.parametrize("text", ["=HYPERLINK(\"https://example.com\",\"x\")", "+1+1", "-2+3",
                                  "@SUM(A1:A9)", "\t=1", "\r=1"])
def test_csv_cells_a_spreadsheet_would_run_as_formulas_are_quoted(text):
    """Issue 34: a label, row or column opening with =, +, -, @ (or a tab or carriage
    return before one) was written as is: a spreadsheet opening the file runs it."""
    ms = [_m(1e-6, label=text, sub_label=text, description=text, env=text)]
    (row,) = csv.DictReader(io.StringIO(to_csv(opbench.Compare(ms)), newline=""))
    for column in ("label", "env", "row", "column"):  # (a carriage return as a line feed)
        assert row[column] == "'" + text.replace("\r", "\n"), column
    assert float(row["median_s"]) == pytest.approx(1e-6)  # numbers stay numbers


def test_csv_values_are_full_precision_and_merge_replicates():
    a = _m(1.23456789e-6, n=3)
    b = opbench.Measurement(1, [1.23456789e-6] * 3, a.task_spec)  # a replicate
    (row,) = csv.DictReader(io.StringIO(to_csv(opbench.Compare([a, b]))))
    merged = opbench.Measurement.merge([a, b])[0]
    assert float(row["median_s"]) == merged.median
    assert row["measurements"] == "6"


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.rows: list[list[str]] = []
        self.caption = ""
        self._in: str | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append([])
        if tag in ("td", "th", "caption"):
            self._in = tag
            if tag != "caption":
                self.rows[-1].append("")

    def handle_endtag(self, tag):
        self._in = None

    def handle_data(self, data):
        if self._in == "caption":
            self.caption += data
        elif self._in:
            self.rows[-1][-1] += data


def test_html_matches_markdown_and_escapes():
    compare = opbench.Compare([*_sweep(), _m(5e-06, sub_label="<script>&", description="eager")])
    html_text = to_html(compare)
    assert "<script>&" not in html_text and "&lt;script&gt;&amp;" in html_text
    first_table = html_text.split("</table>")[0]
    parser = _Cells()
    parser.feed(first_table)
    assert parser.caption == "add"
    md_rows = [[c.strip() for c in line.strip("|").split("|")]
               for line in to_markdown(compare).split("### mul")[0].splitlines()
               if line.startswith("| ")]
    body = parser.rows[:-1]  # the last row is the unit footnote
    assert [r for r in body] == [[html.unescape(c) for c in r] for r in md_rows]
    assert parser.rows[-1] == ["Times are in microseconds (us)."]
    assert html_text.count("<table") == 2


def test_html_of_hostile_names_is_their_text_in_opbenchs_tables():
    """Issue 34: names holding tags, comments and control characters, parsed as a browser
    parses HTML: one table per label, captioned with the name, no element of a name's."""
    import hostile

    class Tags(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []

        def handle_starttag(self, tag, attrs):
            self.tags.append(tag)

    text = to_html(opbench.Compare(hostile.measurements()))
    tags = Tags()
    tags.feed(text)
    assert set(tags.tags) == {"table", "caption", "thead", "tr", "th", "tbody", "td", "tfoot",
                              "br"}
    assert tags.tags.count("table") == len(hostile.NAMES)
    captions, headers = [], []
    for table in text.split("</table>")[:-1]:
        cells = _Cells()
        cells.feed(table)
        captions.append(cells.caption)
        headers.append(cells.rows[0][-1])
    names = [n.replace("\n", "") for n in hostile.NAMES]  # a line break is a <br> there
    assert captions == names and headers == names


def test_exports_write_atomically_to_path(tmp_path):
    compare = opbench.Compare(_sweep())
    for fn, name in ((to_markdown, "t.md"), (to_csv, "t.csv"), (to_html, "t.html")):
        text = fn(compare, tmp_path / name)
        assert (tmp_path / name).read_text() == text
    assert sorted(os.listdir(tmp_path)) == ["t.csv", "t.html", "t.md"]  # no temp files left


def test_no_label_and_no_description():
    m = opbench.Measurement(1, [1e-6], opbench.TaskSpec("f()", "pass"))
    compare = opbench.Compare([m])
    assert "### (no label)" in to_markdown(compare)
    (row,) = csv.DictReader(io.StringIO(to_csv(compare)))
    assert row["label"] == "" and row["column"] == ""
    assert re.search(r"<caption></caption>", to_html(compare))
