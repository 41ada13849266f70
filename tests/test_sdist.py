"""The source distribution: built as PyPA's ``build`` builds it, it holds everything the
tests need, installs (compiling the C++ core), and the fast tier passes from it.

One slow test: ``python -m build --sdist``, then the sdist unpacked and installed into a
fresh virtual environment (``pip install`` of the tarball, the C++ core compiled from it),
then ``pytest -m "not slow"`` run in the unpacked tree against that installation.
"""
from __future__ import annotations

import sys
import tarfile
from pathlib import Path

import pytest

import fresh_venv
from conftest import standalone_env

ROOT = Path(__file__).resolve().parent.parent
# What a source tree needs to build and test; what it must not carry (build outputs).
NEEDED = ("pyproject.toml", "CMakeLists.txt", "README.md", "csrc", "python/opbench", "tests",
          "docs", "benchmarks", "examples", "tools")


def _members(sdist: Path) -> list[str]:
    with tarfile.open(sdist) as tar:
        return [m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name]


@pytest.mark.slow
def test_an_sdist_builds_installs_and_passes_the_fast_tier(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    fresh_venv.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(dist), str(ROOT)],
                   timeout=600)
    (sdist,) = dist.glob("opbench-*.tar.gz")
    members = _members(sdist)
    for needed in NEEDED:
        assert any(m == needed or m.startswith(needed + "/") for m in members), needed
    built = [m for m in members if m.endswith(".so") or m.startswith(("build/", ".venv/"))]
    assert not built, f"build outputs in the sdist: {built[:5]}"

    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path / "src", filter="data")
    (tree,) = (tmp_path / "src").iterdir()
    python, site = fresh_venv.create(tmp_path / "venv", sdist)

    # The outer run's settings stay out: its xdist worker id, its coverage, its options.
    env = standalone_env()
    env.pop("OPBENCH_DOCS_BUILD", None)  # the outer run's site build, not this tree's
    env["HOME"] = str(tmp_path)
    env["OPBENCH_CACHE_DIR"] = str(tmp_path / "cache")
    fresh_venv.assert_imports_from(python, site, env, tree)
    tier = fresh_venv.run([str(python), "-m", "pytest", "-m", "not slow", "-q", "-n", "2",
                           "-p", "no:cacheprovider", "--tb=short", "-W", "ignore"],
                          env=env, cwd=tree, timeout=2400, tail=20000)
    assert " passed" in tier.stdout.splitlines()[-1], tier.stdout[-2000:]
