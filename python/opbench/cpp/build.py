"""Compile one C++ source into a shared library, cached on disk by content hash.

The cache key covers everything that changes the binary: the compiler's
identity (path and version banner), the flags, the source text, and for
torch builds torch's version. A second process that asks for the same source
finds ``<cache>/<key>.so`` and loads it without compiling. Builds happen in a
private temporary directory and are published with ``os.replace``, so two
processes building the same key at once both end with a complete library.

    >>> from opbench.cpp.build import cache_dir
    >>> isinstance(cache_dir(), Path)
    True
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from opbench.errors import CompileError, CompilerNotFoundError

# Bump when the generated code's ABI with timer.py changes: old entries then
# stop matching instead of being loaded with the wrong entry points.
_FORMAT = "opbench-cpp-1"

_SNIPPET_LINE = re.compile(r"^(?P<file>global_setup|setup|stmt):(?P<line>\d+)(?::\d+)?:")


def cache_dir() -> Path:
    """``$OPBENCH_CACHE_DIR``, else ``$XDG_CACHE_HOME/opbench/cpp``, else
    ``~/.cache/opbench/cpp``."""
    explicit = os.environ.get("OPBENCH_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "opbench" / "cpp"


def find_compiler() -> str:
    """The C++ compiler: ``$CXX`` if set, else the first of c++, g++, clang++ on PATH."""
    explicit = os.environ.get("CXX")
    if explicit:
        found = shutil.which(explicit)
        if found is None:
            raise CompilerNotFoundError(f"$CXX={explicit!r} is not an executable on PATH")
        return found
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found is not None:
            return found
    raise CompilerNotFoundError(
        "no C++ compiler found: language='c++' Timers compile their statement. "
        "Install g++ or clang++, or set $CXX to a compiler's path."
    )


@functools.lru_cache(maxsize=None)
def _compiler_identity(cxx: str) -> str:
    # The version banner tells apart compilers behind the same path (an upgrade).
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return f"{os.path.realpath(cxx)}\n{out.stdout.splitlines()[0] if out.stdout else ''}"


def _torch_flags() -> tuple[list[str], str]:
    """Compile and link flags for a library that uses libtorch, plus torch's
    version for the cache key. Uses cpp_extension's own path helpers so the
    headers and libraries are exactly those of the installed torch."""
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as e:  # pragma: no cover - exercised without torch only
        raise ImportError(
            "this C++ statement uses torch (torch::, at::, c10::), which needs torch: "
            "install torch (pip install 'opbench[torch]')"
        ) from e
    flags = ["-std=c++20"]  # torch's headers require C++20 since 2.10
    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)
    flags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(bool(abi))}")
    for path in cpp_extension.include_paths():
        flags += ["-isystem", path]
    for path in cpp_extension.library_paths():
        flags += [f"-L{path}", f"-Wl,-rpath,{path}"]
    flags += ["-lc10", "-ltorch_cpu", "-ltorch"]
    return flags, str(torch.__version__)


def _valgrind_headers() -> str:
    """Where valgrind's callgrind.h is (or ""), for the cache key: opbench/callgrind.h
    compiles to no-ops without it, so installing valgrind must give a new build."""
    for root in ("/usr/include", "/usr/local/include"):
        header = os.path.join(root, "valgrind", "callgrind.h")
        if os.path.isfile(header):
            return header
    return ""


def build_library(source: str, *, snippets: dict[str, str], include_dirs: list[str],
                  use_torch: bool) -> Path:
    """Path of a shared library compiled from `source`, building it if the cache
    lacks it. `snippets` are written beside the source under their names
    (``stmt``, ``setup``, ...), which the source's ``#line`` directives name,
    so the compiler quotes the user's lines in its diagnostics."""
    cxx = find_compiler()
    flags = ["-O2", "-std=c++17", "-shared", "-fPIC", "-fvisibility=hidden"]
    flags += [f"-I{d}" for d in include_dirs]
    torch_version = ""
    if use_torch:
        torch_flags, torch_version = _torch_flags()
        flags += torch_flags  # a later -std wins
    key = hashlib.sha256("\0".join([
        _FORMAT, _compiler_identity(cxx), " ".join(flags), torch_version, _valgrind_headers(),
        source,
    ]).encode()).hexdigest()[:32]
    root = cache_dir()
    target = root / f"{key}.so"
    if target.is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".build-{key[:8]}-", dir=root))
    try:
        (work / "timer.cpp").write_text(source)
        for name, text in snippets.items():
            (work / name).write_text(text + "\n")
        cmd = [cxx, *flags[:5], "timer.cpp", "-o", "out.so", *flags[5:]]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise CompileError(_format_diagnostics(proc.stderr, snippets))
        # Keep the source next to the library: the cache is inspectable.
        os.replace(work / "timer.cpp", root / f"{key}.cpp")
        os.replace(work / "out.so", target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _format_diagnostics(stderr: str, snippets: dict[str, str]) -> str:
    """The compiler's message, each diagnostic once (the statement is compiled
    in one place, but template instantiation repeats notes), led by the lines
    that point into the user's code."""
    seen: set[str] = set()
    lines = []
    for line in stderr.splitlines():
        if "opbench_body_" in line:  # "In function ..." of the generated wrapper: noise
            continue
        if line in seen and _SNIPPET_LINE.match(line):
            continue
        seen.add(line)
        lines.append(line)
    own = [ln for ln in lines if _SNIPPET_LINE.match(ln) and ": error" in ln]
    head = own[0] if own else "see the compiler output below"
    return f"C++ statement failed to compile: {head}\n" + "\n".join(lines)


def load_library(path: Path) -> ctypes.CDLL:
    """Loads a built library. ctypes.CDLL releases the GIL around each call."""
    return ctypes.CDLL(str(path))
