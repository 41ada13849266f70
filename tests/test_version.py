"""opbench._version: one version, the package's and the distribution's."""
from __future__ import annotations

import importlib.metadata
import re
from pathlib import Path

import tomllib

import opbench
from opbench._version import __version__

ROOT = Path(__file__).resolve().parents[1]


def test_the_version_is_pyprojects_and_the_packages() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert __version__ == project["project"]["version"] == opbench.__version__
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)


def test_the_package_tested_is_the_installed_distribution_or_this_checkout() -> None:
    # Installed (`pip install .`, as .ci/run does): the distribution's version is the
    # package's. Not installed, the only way `import opbench` works is this checkout's
    # python/ on the path (tools/build-dev): anything else is a stray copy, tested
    # in place of the code here.
    try:
        installed = importlib.metadata.version("opbench")
    except importlib.metadata.PackageNotFoundError:
        imported = Path(opbench.__file__).resolve()
        assert imported.is_relative_to(ROOT / "python" / "opbench"), (
            f"no opbench distribution is installed, yet opbench was imported from {imported}, "
            f"not from this checkout's {ROOT / 'python'} (tools/build-dev puts it on the path)")
        return
    assert installed == __version__
