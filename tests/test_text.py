"""opbench._text: the plain-text tables of opbench's own reports."""
from __future__ import annotations

from opbench._text import text_table


def test_github_style_pads_and_right_aligns_numbers() -> None:
    assert text_table(["name", "time"], [["a", "1.5"], ["long", "10.25"]], [False, True]) == (
        "| name |  time |\n"
        "|------|-------|\n"
        "| a    |   1.5 |\n"
        "| long | 10.25 |")


def test_plain_style_separates_by_two_spaces_without_trailing_blanks() -> None:
    assert text_table(["a", "b"], [["xyz", "1"]], github=False) == "a    b\nxyz  1"
