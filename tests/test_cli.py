"""opbench.integrations.cli: the command line's parser, errors and shared options."""
from __future__ import annotations

import pytest

from opbench.integrations import cli


def test_every_command_has_a_parser_with_its_help() -> None:
    parser = cli.build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert sorted(commands) == sorted(cli.COMMANDS)
    assert all(sub.description for sub in commands.values())


@pytest.mark.parametrize(("text", "value"), [("5%", 0.05), ("0.01", 0.01), (" 12.5% ", 0.125)])
def test_fractions_read_as_percent_or_decimal(text: str, value: float) -> None:
    assert cli.parse_fraction(text, "--threshold") == pytest.approx(value)


@pytest.mark.parametrize(("text", "message"), [("five", "must look like '5%' or '0.05'"),
                                               ("100%", "must be between 0% and 100%"),
                                               ("0", "must be between")])
def test_bad_fractions_name_the_option(text: str, message: str) -> None:
    with pytest.raises(cli.UsageError, match=f"--threshold {message}"):
        cli.parse_fraction(text, "--threshold")


class _Tty:
    def __init__(self, tty: bool) -> None:
        self._tty = tty

    def isatty(self) -> bool:
        return self._tty


def test_color_on_a_terminal_unless_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert cli.use_color("auto", _Tty(True)) and not cli.use_color("auto", _Tty(False))
    assert cli.use_color("always", _Tty(False)) and not cli.use_color("never", _Tty(True))
    monkeypatch.setenv("NO_COLOR", "1")
    assert not cli.use_color("auto", _Tty(True))


def test_a_usage_error_prints_the_commands_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["compare", "a.json", "b.json", "--threshold", "five"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: ") and "compare: error: --threshold must look like" in err


def test_unknown_arguments_are_the_commands_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["show", "--no-such-flag", "file.json"])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
