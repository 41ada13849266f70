"""opbench._version: one version, the package's and the distribution's."""
from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import tomllib

import opbench
from opbench._version import __version__


def test_the_version_is_pyprojects_and_the_packages() -> None:
    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert __version__ == project["project"]["version"] == opbench.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_an_installed_distribution_reports_the_same_version() -> None:
    try:
        installed = importlib.metadata.version("opbench")
    except importlib.metadata.PackageNotFoundError:
        return  # a development checkout (tools/build-dev): nothing installed to compare
    assert installed == __version__
