"""opbench._markdown, and every Markdown report opbench writes (the gate's, ab's, the exports
of ``show`` and Compare), rendered by a CommonMark parser with GitHub's tables: whatever a
benchmark, label, commit or host is named, the reports' blocks are opbench's and each
name renders as the text it is (issue 34: a name once added a "no regression" heading
and folded the real REGRESSION row away).

The parser is markdown-it-py (the ``test`` extra), with raw HTML on as GitHub allows it."""
from __future__ import annotations

import html
import json
import random
import re
from html.parser import HTMLParser

import pytest
from markdown_it import MarkdownIt

import hostile
from opbench import _markdown, _text
from opbench.callgrind.function_diff import FunctionChange
from opbench.gate import compare
from opbench.gate.session_verdicts import ABReport, FailedRun, Side

MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# Tokens only Markdown syntax makes: none may come from a name.
SYNTAX = {"link_open", "image", "code_inline", "em_open", "strong_open", "s_open",
          "code_block", "fence", "blockquote_open", "hr", "heading_open", "bullet_list_open",
          "ordered_list_open", "html_block", "html_inline", "table_open", "tr_open"}


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text = ""

    def handle_starttag(self, tag, attrs):
        if tag == "br":
            self.text += "\n"

    def handle_data(self, data):
        self.text += data


def text_of(rendered_html: str) -> str:
    parser = _Text()
    parser.feed(rendered_html)
    parser.close()
    return parser.text


def shown(name: str) -> str:
    """What a name must render as: each line printable, mentions defused, lines broken."""
    lines = re.split(r"\r\n|\r|\n", name)
    return "\n".join(_text.printable(line).replace("@", "@\u200b") for line in lines)


def inline_tokens(markdown: str) -> list[str]:
    """The token types inside one line of inline Markdown (a paragraph's)."""
    blocks = MD.parse(markdown)
    assert [t.type for t in blocks] == ["paragraph_open", "inline", "paragraph_close"], markdown
    return [c.type for c in blocks[1].children or []]


# -- the escaper ------------------------------------------------------------------------------

ALPHABET = "\\`*_{}[]()#+-.!|~=<>:&@$ \n\r\tab1\x1b\u202e"


def _strings():
    rng = random.Random(34)
    yield from hostile.NAMES
    yield from ("1. x", "1) x", "- x", "+ x", "= ", "===", "---", "    code", "[a]: /x",
                "# h", "<!--", "&amp;", "&#64;", "\\", "x\\", "`", "``a``", "[x](y)",
                "![i](j)", "www.x", "**b**", "__init__", "~~s~~", "$x$", "a|b")
    for _ in range(3000):
        yield "".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 16)))


@pytest.mark.parametrize("where", ["paragraph", "heading", "list item", "table cell"])
def test_every_string_renders_as_itself_wherever_it_stands(where):
    for s in _strings():
        if where == "table cell":
            doc = f"| a | b |\n|---|---|\n{_markdown.row(['x', s])}\n"
            tokens = MD.parse(doc)
            assert [t.type for t in tokens].count("tr_open") == 2, (s, doc)
            cells = [t for t in tokens if t.type == "inline"]
            assert len(cells) == 4, (s, doc)
            inline = cells[3]
        else:
            prefix = {"paragraph": "", "heading": "### ", "list item": "- "}[where]
            doc = prefix + _markdown.escape(s) + "\n"
            tokens = MD.parse(doc)
            opening = {"paragraph": "paragraph_open", "heading": "heading_open",
                       "list item": "bullet_list_open"}[where]
            assert tokens[0].type == opening and sum(t.level == 0 for t in tokens) == 2, (
                s, doc, [t.type for t in tokens])
            inline = next(t for t in tokens if t.type == "inline")
        kinds = {c.type for c in inline.children or []}
        assert kinds <= {"text", "html_inline", "softbreak", "text_special"}, (s, kinds)
        assert all(c.content == "<br>" for c in inline.children or [] if c.type == "html_inline")
        assert text_of(MD.renderer.render(inline.children, MD.options, {})).strip() == shown(s).strip(), s


def test_no_mention_survives():
    rendered = text_of(MD.render(_markdown.escape("@octocat and @team/reviewers, cc@x")))
    assert not re.search(r"@\w", rendered)


# -- the reports ------------------------------------------------------------------------------

def _blocks(markdown: str) -> list[tuple[str, str]]:
    """The document's top-level blocks: (type, its text), a table as ("table", rows)."""
    out = []
    tokens = MD.parse(markdown)
    for i, t in enumerate(tokens):
        assert t.type not in ("link_open", "image"), t
        if t.level != 0 or t.nesting == -1:
            continue
        if t.type == "html_block":
            out.append(("html", t.content.strip()))
        elif t.type == "table_open":
            out.append(("table", json.dumps(_rows(tokens, i))))
        elif t.type in ("heading_open", "paragraph_open"):
            out.append((t.type[:-5], text_of(MD.renderer.render(tokens[i + 1].children,
                                                                MD.options, {}))))
        else:
            out.append((t.type.removesuffix("_open"), ""))
    return out


def _rows(tokens, start) -> list[list[str]]:
    rows: list[list[str]] = []
    for t in tokens[start:]:
        if t.type == "table_close":
            return rows
        if t.type == "tr_open":
            rows.append([])
        if t.type == "inline":
            for child in t.children or []:
                assert child.type in ("text", "html_inline", "text_special"), child
            rows[-1].append(text_of(MD.renderer.render(t.children, MD.options, {})))
    raise AssertionError("unclosed table")


def _no_syntax_from_names(markdown: str, allowed_html: set[str]) -> None:
    for t in MD.parse(markdown):
        if t.type == "html_block":
            assert t.content.strip() in allowed_html, t.content
        for child in t.children or []:
            assert child.type in ("text", "softbreak", "text_special", "strong_open",
                                  "strong_close") or (child.type == "html_inline"
                                                      and child.content == "<br>"), child
    assert not re.search(r"@\w", text_of(MD.render(markdown)))


def _gate_report():
    names = hostile.NAMES
    old = hostile.measurements(1e-6)
    new = hostile.measurements(1e-6)
    new[0] = hostile.measurements(3e-6)[0]  # the one regression: the first name
    report = compare(_results(old, {"hostname": names[1], "git_commit": names[0],
                                    "torch": names[2]}),
                     _results(new, {"hostname": names[4], "git_commit": names[6],
                                    "torch": names[3]}), threshold=0.05)
    return report


def _results(ms, env):
    from opbench.store.results import Results

    return Results(ms, environment=env)


def test_the_gates_pr_comment_is_opbenchs_whatever_the_names():
    report = _gate_report()
    assert [r.status for r in report.rows].count("regression") == 1
    md = report.markdown()
    blocks = _blocks(md)
    headings = [b for b in blocks if b[0] == "heading"]
    assert headings == [("heading", f"{report.headline()}")]  # no heading of a name's
    tables = [json.loads(text) for kind, text in blocks if kind == "table"]
    failing, rest = tables
    assert [row[0] for row in failing[1:]] == [shown(hostile.NAMES[0])]
    assert failing[1][-1] == "REGRESSION"
    assert sorted(row[0] for row in rest[1:]) == sorted(shown(n) for n in hostile.NAMES[1:])
    assert [text for kind, text in blocks if kind == "html"] == [
        "<details><summary>7 other benchmark(s)</summary>", "</details>",
        "<details><summary>Environment</summary>", "</details>"]
    _no_syntax_from_names(md, {"<details><summary>7 other benchmark(s)</summary>",
                               "<details><summary>Environment</summary>", "</details>"})
    rendered = text_of(MD.render(md))
    assert shown(hostile.NAMES[6]) in rendered and shown(hostile.NAMES[3]) in rendered


def test_the_ab_pr_comment_is_opbenchs_whatever_the_names():
    names = hostile.NAMES
    change = FunctionChange(names[5] + ":f [/usr/lib/x.so]", names[1], (1.0, 2.0), (3.0, 4.0))
    report = ABReport(_gate_report(), Side("base", names[0], "a" * 40, {"hostname": names[2]}, 3),
                      Side("head", names[6], "b" * 40, {"hostname": names[3]}, 3),
                      ("pytest",), "instructions", rounds=1, max_rounds=1,
                      failed=(FailedRun("head", 1, names[7] + names[0]),),
                      functions=((names[4], (change,)),), notes=(names[2],))
    md = report.markdown()
    blocks = _blocks(md)
    assert [b for b in blocks if b[0] == "heading"] == [("heading", report.gate.headline())]
    summaries = {"<details><summary>7 other benchmark(s)</summary>",
                 "<details><summary>Environment</summary>", "</details>",
                 "<details><summary>1 failed run(s), not counted</summary>"}
    htmls = [text for kind, text in blocks if kind == "html"]
    where = [h for h in htmls if h not in summaries]
    title = "Native functions whose instructions per call changed most: "
    assert len(where) == 1 and text_of(where[0]) == title + shown(names[4])
    _no_syntax_from_names(md, summaries | set(where))
    tables = [json.loads(text) for kind, text in blocks if kind == "table"]
    assert tables[-1][1][:2] == [shown(names[1]), shown(names[5]) + ":f [x.so]"]
    rendered = text_of(MD.render(md))
    for name in (names[0], names[6], names[7], names[2]):
        assert shown(name).replace("\n", "") in rendered.replace("\n", "")


def test_the_exports_of_show_and_compare_are_opbenchs_whatever_the_names(tmp_path, capsys):
    import opbench
    from opbench.analysis.export import to_markdown
    from opbench.integrations.cli import main
    from opbench.store.results import save

    ms = hostile.measurements()
    md = to_markdown(opbench.Compare(ms))
    blocks = _blocks(md)
    assert [text for kind, text in blocks if kind == "heading"] == [shown(n) for n in hostile.NAMES]
    tables = [json.loads(text) for kind, text in blocks if kind == "table"]
    assert [t[0][-1] for t in tables] == [shown(n) for n in hostile.NAMES]  # the columns
    assert [t[1][1] for t in tables] == ["f()"] * len(hostile.NAMES)
    _no_syntax_from_names(md, set())
    path = tmp_path / "r.json"
    save(ms, path, environment={"hostname": hostile.NAMES[1]})
    assert main(["show", "--format", "markdown", str(path)]) == 0
    md = capsys.readouterr().out
    (table,) = [json.loads(text) for kind, text in _blocks(md) if kind == "table"]
    assert sorted(row[1] for row in table[1:]) == sorted(shown(n) for n in hostile.NAMES)
    _no_syntax_from_names(md, set())


def test_html_entities_of_names_stay_text():
    # A name that is an entity reference renders as the reference, not as what it names.
    assert text_of(MD.render(_markdown.escape("&lt;b&gt; &#64;x"))).strip() == html.unescape(
        "&amp;lt;b&amp;gt; &amp;#64;x")
