"""A fresh virtual environment for packaging tests: opbench installed into it from a built
artefact (a wheel, an sdist), everything else (torch, pytest, ...) borrowed from the
environment running the tests, so nothing is downloaded and the artefact under test is
the only opbench on its path."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path


def run(cmd: list[str], tail: int = 3000, **kwargs) -> subprocess.CompletedProcess:
    """``cmd``'s completed process; an AssertionError with the last ``tail`` characters of
    its output when it failed."""
    proc = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    assert proc.returncode == 0, f"{cmd}:\n{proc.stdout[-tail:]}\n{proc.stderr[-tail:]}"
    return proc


def create(env_dir: Path, artefact: Path, *pip_args: str) -> tuple[Path, Path]:
    """A new venv at ``env_dir`` with ``artefact`` (a wheel or an sdist) pip-installed into
    it, and this environment's packages after its own: (its python, its site-packages)."""
    run([sys.executable, "-m", "venv", str(env_dir)], timeout=300)
    python = env_dir / "bin" / "python"
    # Installed before the outer packages are lent: pip would take this environment's own
    # opbench for the requirement already satisfied.
    run([str(python), "-m", "pip", "install", "--no-deps", *pip_args, str(artefact)], timeout=1800)
    # This environment's packages by their folder (a path, not a site dir: no .pth in it
    # runs, so a source checkout this environment puts on the path stays off it).
    torch_spec = importlib.util.find_spec("torch")
    assert torch_spec and torch_spec.origin
    site = next((env_dir / "lib").glob("python3*/site-packages"))
    (site / "outer_packages.pth").write_text(str(Path(torch_spec.origin).parent.parent) + "\n")
    return python, site


def assert_imports_from(python: Path, site: Path, env: dict[str, str], cwd: Path) -> None:
    """``import opbench`` in ``python`` finds the installed artefact in ``site``."""
    where = run([str(python), "-c", "import opbench; print(opbench.__file__)"],
                env=env, cwd=cwd).stdout
    assert where.startswith(str(site)), f"opbench imported from {where}, not {site}"
