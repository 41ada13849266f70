"""A checkout made importable: the folders its packages import from, and its compiled
extension modules, copied or built.

A command at a revision runs with the checkout's source roots (``source_roots``)
first on ``PYTHONPATH``, so ``import yourpackage`` finds the revision's code before
any installed copy. The roots come from ``pyproject.toml`` (scikit-build-core's
``wheel.packages``, setuptools' ``package-dir``), else ``src/`` when it holds
packages, else the repository root.

Compiled extension modules (a ``.so`` next to the Python files, git-ignored, as
opbench's own ``_C``) are not in git (``add_compiled_modules``): when the revision's
native sources (C, C++, CUDA, Cython, CMake files) are identical to the working
tree's, the working tree's built modules are copied in; otherwise the revision is
built once with ``pip wheel --no-deps --no-build-isolation`` (the build backend and
compilers of the current environment) and its extension modules are kept in a cache
keyed by the native sources (``$OPBENCH_CACHE_DIR/builds``, default
``~/.cache/opbench/builds``; made with mode 0700, and an entry another user owns or can
write is built again, never copied), so a bisect over Python-only commits builds
nothing and one over C++ commits builds each distinct source once.

Example:
    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> _ = (root / "pyproject.toml").write_text('[tool.setuptools]\\npackage-dir = {"" = "lib"}\\n')
    >>> (root / "lib").mkdir()
    >>> [p.name for p in source_roots(root)] == ["lib", root.name]
    True
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from opbench._ownership import private_folder, problem
from opbench.revisions import RevisionError
from opbench.revisions.command import last_lines
from opbench.revisions.git import git

__all__ = ["CACHE_ENV", "add_compiled_modules", "source_roots"]

CACHE_ENV = "OPBENCH_CACHE_DIR"
# Files whose change means the compiled extension modules must be rebuilt.
_NATIVE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".cu", ".cuh",
                    ".pyx", ".pxd", ".cmake")
_NATIVE_NAMES = ("CMakeLists.txt", "setup.py", "meson.build")
_EXTENSION_SUFFIXES = (".so", ".pyd")


def source_roots(root: Path) -> list[Path]:
    """The folders to put on PYTHONPATH so the project's packages import from ``root``."""
    roots: list[Path] = []
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        try:
            import tomllib
        except ImportError:  # Python < 3.11: fall back to the layout
            tomllib = None  # type: ignore[assignment]
        if tomllib is not None:
            try:
                doc = tomllib.loads(pyproject.read_text())
            except (ValueError, OSError):
                doc = {}
            tool = doc.get("tool", {})
            packages = tool.get("scikit-build", {}).get("wheel", {}).get("packages", [])
            roots += [(root / p).parent for p in packages if isinstance(p, str)]
            package_dir = tool.get("setuptools", {}).get("package-dir", {})
            if isinstance(package_dir, dict) and isinstance(package_dir.get(""), str):
                roots.append(root / package_dir[""])
    if not roots and (root / "src").is_dir() and any((root / "src").glob("*/__init__.py")):
        roots.append(root / "src")
    roots.append(root)
    unique: list[Path] = []
    for r in roots:
        if r.is_dir() and r not in unique:
            unique.append(r)
    return unique


def _extension_modules(top: Path) -> list[Path]:
    """The working tree's built extension modules (ignored by git), relative to ``top``."""
    listed = git(top, "ls-files", "--others", "--ignored", "--exclude-standard", "-z", "--",
                  *[f":(glob)**/*{s}" for s in _EXTENSION_SUFFIXES])
    found = []
    for name in filter(None, listed.split("\0")):
        path = Path(name)
        # Only modules inside a package (not build trees, not a virtual environment).
        if (top / path.parent / "__init__.py").is_file() and not any(
                part in ("build", ".venv", "venv", "site-packages") for part in path.parts):
            found.append(path)
    return found


def _native_pathspecs() -> list[str]:
    return ([f":(glob)**/*{s}" for s in _NATIVE_SUFFIXES]
            + [f":(glob)**/{n}" for n in _NATIVE_NAMES])


def _is_native(name: str) -> bool:
    return name.endswith(_NATIVE_SUFFIXES) or Path(name).name in _NATIVE_NAMES


def _native_key(top: Path, commit: str) -> str:
    """A hash of the revision's native sources (the cache key of its built modules)."""
    listing = "\n".join(line for line in git(top, "ls-tree", "-r", commit).splitlines()
                        if _is_native(line.rsplit("\t", 1)[-1]))
    return hashlib.sha256(f"{sys.version}|{listing}".encode()).hexdigest()[:24]


def _cache_dir() -> Path:
    """Where built extension modules are kept: ``$OPBENCH_CACHE_DIR`` or ~/.cache/opbench."""
    env = os.environ.get(CACHE_ENV)
    return Path(env) if env else Path.home() / ".cache" / "opbench"


def _build_extensions(tree: Path, modules: list[Path], key: str) -> None:
    """Puts the revision's compiled ``modules`` into ``tree``: from the cache, else built
    with ``pip wheel`` (then cached). The cache's ``builds`` folder is private (mode
    0700); an entry another user owns or could have written is built again, never
    copied: the modules run in every command of the checkout.

    Raises:
        UntrustedPathError: the ``builds`` folder (or one above it) is another user's or
            writable by others.
    """
    builds = private_folder(_cache_dir() / "builds", what="copy compiled modules from",
                            fix="Set $OPBENCH_CACHE_DIR to a folder of your own.")
    cached = builds / key
    if not _cached(cached, modules):
        with tempfile.TemporaryDirectory(prefix="opbench-wheel-") as out:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                 "--quiet", "--wheel-dir", out, str(tree)],
                capture_output=True, text=True, stdin=subprocess.DEVNULL)
            wheels = list(Path(out).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                raise RevisionError(
                    f"building the compiled modules of {tree} failed (pip wheel, exit "
                    f"{proc.returncode}): {last_lines(proc.stdout + proc.stderr, 8)}")
            staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=builds))
            with zipfile.ZipFile(wheels[0]) as wheel:
                names = set(wheel.namelist())
                for m in modules:
                    # In the wheel a module sits at its import path: drop the source root.
                    inside = next((n for n in names if m.as_posix().endswith(n)
                                   and n.endswith(m.name)), None)
                    if inside is None:
                        shutil.rmtree(staging, ignore_errors=True)
                        raise RevisionError(f"the wheel built from {tree} has no {m.name}")
                    (staging / m).parent.mkdir(parents=True, exist_ok=True)
                    (staging / m).write_bytes(wheel.read(inside))
            shutil.rmtree(cached, ignore_errors=True)
            os.replace(staging, cached)  # whole or not at all, for a concurrent reader
    for m in modules:
        (tree / m).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached / m, tree / m)


def _cached(entry: Path, modules: list[Path]) -> bool:
    """Whether ``entry`` holds every module, and it and they are yours alone (no link,
    nothing another user owns or can write)."""
    return problem(entry) is None and all(
        problem(entry / m) is None and (entry / m).is_file() for m in modules)



def add_compiled_modules(top: Path, tree: Path, commit: str) -> None:
    """Puts into ``tree`` (a checkout of ``commit`` of the repository ``top``) the compiled
    extension modules the working tree has built: copied when the native sources are the
    same, else built for the revision (module doc).

    Raises:
        RevisionError: the build failed.
        UntrustedPathError: the cache is not this user's alone.
    """
    modules = _extension_modules(top)
    if not modules:
        return
    same = subprocess.run(
        ["git", "-C", str(top), "diff", "--quiet", commit, "--", *_native_pathspecs()],
        stdin=subprocess.DEVNULL, capture_output=True).returncode == 0
    if same:
        for m in modules:
            (tree / m).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(top / m, tree / m)
    else:
        _build_extensions(tree, modules, _native_key(top, commit))
