"""Stand-ins for pytest's config, items and terminal, for unit tests of the plugin's modules
(tests/test_pytest_plugin_*.py); tests/test_pytest_plugin.py runs the plugin in real pytest."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from opbench.integrations.pytest_plugin import options


class RecordingParser:
    """Records ``--opbench-*`` options as pytest's parser would register them."""

    def __init__(self) -> None:
        self.options: dict[str, dict[str, Any]] = {}

    def getgroup(self, name: str, description: str = "") -> RecordingParser:
        return self

    def addoption(self, name: str, **kwargs: Any) -> None:
        self.options[name] = kwargs


def defaults() -> dict[str, Any]:
    """{dest: default} of every option the plugin registers (``opbench_min_time``: 0.2, ...)."""
    parser = RecordingParser()
    options.add_options(parser)  # type: ignore[arg-type]
    return {name[2:].replace("-", "_"): kw.get("default") for name, kw in parser.options.items()}


class FakeConfig:
    """``getoption`` answers the plugin's defaults overridden by ``options``; ``stash``
    and ``rootpath`` as pytest's."""

    def __init__(self, rootpath: Path | None = None, **overrides: Any) -> None:
        self._options = {**defaults(), "numprocesses": None, **overrides}
        self.stash = pytest.Stash()
        self.rootpath = rootpath or Path.cwd()
        self.pluginmanager = SimpleNamespace(getplugin=lambda name: None)

    def getoption(self, name: str, default: Any = None) -> Any:
        return self._options.get(name, default)


class FakeTerminal:
    """A terminal reporter that keeps what was written, one entry a line or separator."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.stats: dict[str, list[Any]] = {}  # what pytest's last line counts

    def write_line(self, line: str, **markup: Any) -> None:
        self.lines.extend(line.splitlines())

    def write_sep(self, sep: str, title: str) -> None:
        self.lines.append(f"{sep * 3} {title}")
