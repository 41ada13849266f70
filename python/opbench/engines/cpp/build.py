"""Compile one C++ source into a shared library, cached on disk by content hash.

The cache key covers everything that changes the binary: the compiler's
identity (path and version banner), the flags, the source text, and what the
caller names (torch's version for torch builds, valgrind's headers). Headers
the source includes from its ``-I`` directories, opbench's own among them,
are recorded with their SHA-256 when the library is built (the compiler's
``-MMD`` list) and checked on every lookup, so an upgraded or edited header
rebuilds instead of reusing a stale library. A second process that asks for
the same source finds ``<cache>/lib/<key>.<headers>/`` and loads it without
compiling.
Builds happen in a private directory published by one ``rename``, so two
processes building the same key at once both end with a complete library.
The cache's ``lib`` and ``pch`` folders are made with mode 0700 and refused
(``UntrustedPathError``) when another user owns or can write them, and an entry
is loaded only when it, its record and its library are yours alone and its
record names its key: a library planted in a shared cache never runs.

Code that includes torch's headers can name them in ``pch_header``: they are
precompiled once per compiler, flags and torch version (``opbench.engines.cpp.pch``)
and every later build skips parsing them.

    >>> from opbench.engines.cpp.build import cache_dir
    >>> isinstance(cache_dir(), Path)
    True
"""
from __future__ import annotations

import concurrent.futures
import contextvars
import ctypes
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from opbench._ownership import private_folder, problem
from opbench.engines.cpp import pch
from opbench.errors import CompileError, CompilerNotFoundError, PrecompiledHeaderWarning, warn

# Bump when the generated code's ABI with the engine changes: old entries then
# stop matching instead of being loaded with the wrong entry points.
_FORMAT = "opbench-cpp-2"

_SNIPPET_LINE = re.compile(
    r"^(?P<file>global_setup|setup|stmt|cpp_sources\[\d+\]):(?P<line>\d+)(?::\d+)?:")


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


@functools.cache
def compiler_identity(cxx: str) -> str:
    """Path and version banner: tells apart compilers behind the same path (an upgrade)."""
    out = subprocess.run([cxx, "--version"], capture_output=True, text=True, check=False)
    return f"{os.path.realpath(cxx)}\n{out.stdout.splitlines()[0] if out.stdout else ''}"


@dataclass(frozen=True)
class TorchFlags:
    """What compiling and linking against the installed torch takes."""

    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    identity: str  # torch's version and commit, for cache keys


@functools.cache
def torch_flags(python_extension: bool = False) -> TorchFlags:
    """Flags for code that uses libtorch, from cpp_extension's own path helpers (so the
    headers and libraries are exactly those of the installed torch). With
    ``python_extension``, also Python's headers and ``libtorch_python``, as
    ``torch.utils.cpp_extension`` builds extension modules."""
    try:
        import torch
        from torch.utils import cpp_extension
    except ImportError as e:  # pragma: no cover - exercised without torch only
        raise ImportError(
            "this C++ code uses torch (torch::, at::, c10::), which needs torch: "
            "pip install torch"
        ) from e
    abi = bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    identity = f"torch {torch.__version__} {getattr(torch.version, 'git_version', '')}"
    return flags_for(cpp_extension.include_paths(), cpp_extension.library_paths(), abi, identity,
                     python_extension)


def flags_for(includes: Sequence[str], libraries: Sequence[str], abi: bool, identity: str,
              python_extension: bool = False) -> TorchFlags:
    """The flags of ``torch_flags`` for a torch whose headers and libraries are in these
    folders, built with or without the C++11 string ABI (``abi``)."""
    cflags = ["-std=c++20"]  # torch's headers require C++20 since 2.10
    cflags.append(f"-D_GLIBCXX_USE_CXX11_ABI={int(abi)}")
    includes = list(includes)
    if python_extension:
        cflags.append("-DTORCH_API_INCLUDE_EXTENSION_H")
        includes.append(sysconfig.get_path("include", scheme="posix_prefix"))
    for path in includes:
        cflags += ["-isystem", path]
    ldflags = []
    for path in libraries:
        ldflags += [f"-L{path}", f"-Wl,-rpath,{path}"]
    ldflags += ["-lc10", "-ltorch_cpu", "-ltorch"]
    if python_extension:
        ldflags.append("-ltorch_python")
    return TorchFlags(tuple(cflags), tuple(ldflags), identity)


def valgrind_headers() -> str:
    """Where valgrind's callgrind.h is (or ""), for cache keys: opbench/callgrind.h
    compiles to no-ops without it, so installing valgrind must give a new build."""
    for root in ("/usr/include", "/usr/local/include"):
        header = os.path.join(root, "valgrind", "callgrind.h")
        if os.path.isfile(header):
            return header
    return ""


def build_library(source: str, *, cflags: Sequence[str], ldflags: Sequence[str] = (),
                  snippets: Mapping[str, str] | None = None, key_parts: Sequence[str] = (),
                  pch_header: str | None = None, pch_cflags: Sequence[str] | None = None,
                  pch_on_reuse: bool = False,
                  library_name: str = "timer",
                  what: str = "C++ statement", verbose: bool = False) -> Path:
    """Path of a shared library compiled from ``source``, building it if the cache lacks it.

    ``snippets`` are written beside the source under their names (``stmt``,
    ``setup``, ``cpp_sources[0]``, ...), which the source's ``#line``
    directives name, so the compiler quotes the user's lines in its
    diagnostics. ``pch_header`` is header text to precompile and pass with
    ``-include`` (the source must still include what it needs: without a
    usable PCH it is compiled as it stands), built with ``pch_cflags``
    (default ``cflags``): flags that leave a PCH valid, such as code-placement
    ones, can then differ between builds that share it. With ``pch_on_reuse``, the
    first build that names the header compiles without one and the header is
    precompiled by the next (for headers that cost much more to precompile than
    to compile once). The library is
    ``<cache>/lib/<key>.<headers>/<library_name>.so``, where ``<headers>`` is a
    hash of the headers it was built from.
    """
    cxx = find_compiler()
    identity = compiler_identity(cxx)
    cflags, ldflags = list(cflags), list(ldflags)
    key = hashlib.sha256("\0".join([
        _FORMAT, identity, *cflags, "\0link", *ldflags, *key_parts, pch_header or "",
        library_name, source,
    ]).encode()).hexdigest()[:32]
    root = _private_cache()
    found = _lookup(root / "lib", key, library_name)
    if found is not None:
        return found
    work = Path(tempfile.mkdtemp(prefix=f".build-{key[:8]}-", dir=root / "lib"))
    try:
        (work / "source.cpp").write_text(source)
        for name, text in (snippets or {}).items():
            (work / name).write_text(text + "\n")
        pch_spec = None
        if pch_header is not None:
            pch_spec = (pch_header, list(cflags if pch_cflags is None else pch_cflags))
        proc = _compile_with_pch(cxx, identity, cflags, ldflags, pch_spec, pch_on_reuse,
                                 key_parts, work, f"{library_name}.so", verbose)
        if proc.returncode != 0:
            raise CompileError(format_diagnostics(proc.stderr, what))
        # The record names its key: an empty or foreign one (``{}``) never matches.
        deps = json.dumps({"key": key, "headers": _own_headers((work / "deps.d").read_text(),
                                                               work, root)}, sort_keys=True)
        (work / "deps.d").unlink()
        (work / "deps.json").write_text(deps)
        # The headers' contents name the directory: a rebuild after an edit gets a new
        # path, which dlopen (it reuses a library already loaded from the same path)
        # must see to load the new code.
        entry = root / "lib" / f"{key}.{hashlib.sha256(deps.encode()).hexdigest()[:12]}"
        try:
            os.rename(work, entry)
        except OSError:
            if not entry.is_dir():  # anything but "another process published it first"
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return entry / f"{library_name}.so"


def _private_cache() -> Path:
    """``cache_dir()``, with its ``lib`` and ``pch`` folders made private (mode 0700) and
    checked: nobody else may be able to put a library there that this process loads.

    Raises:
        UntrustedPathError: a cache folder (or one above it) that another user owns or
            can write.
    """
    root = cache_dir()
    for sub in ("lib", "pch"):
        private_folder(root / sub, what="load compiled code from",
                       fix="Set $OPBENCH_CACHE_DIR to a folder of your own.")
    return root


def _lookup(lib_root: Path, key: str, library_name: str) -> Path | None:
    """The library of the entry for ``key`` whose record names ``key`` and whose
    recorded headers still have their contents; other entries (built from older
    versions of those headers, damaged, or writable by anyone but you) are removed."""
    for entry in sorted(lib_root.glob(f"{key}.*")):
        target = entry / f"{library_name}.so"
        if _entry_valid(entry, target, key):
            return target
        pch._discard(entry)
    return None


def _compile_with_pch(cxx: str, identity: str, cflags: list[str], ldflags: list[str],
                      pch_spec: tuple[str, list[str]] | None, on_reuse: bool,
                      key_parts: Sequence[str], work: Path,
                      output: str, verbose: bool) -> subprocess.CompletedProcess[str]:
    """Compiles ``work/source.cpp``, through a precompiled header when one can be had
    (``pch_spec``: the header text and the flags it is built with). The PCH's hash
    is checked while the compiler runs; if the check fails, the entry is rebuilt and
    the source compiled again, so nothing built from a damaged PCH is kept."""
    entry = None
    if pch_spec is not None:
        header, pch_cflags = pch_spec
        entry = pch.find(identity, pch_cflags, header, key_parts, cache_dir())
        if entry is None and on_reuse and pch.first_use(identity, pch_cflags, header, key_parts,
                                                        cache_dir()):
            return _run_compiler(cxx, cflags, ldflags, None, work, output, verbose)
        if entry is None and _spare_core_and_memory():
            # Precompiling costs g++ more than one plain compile: the first build
            # compiles plainly while the header is precompiled beside it for the
            # builds to come, and waits for both (no compiler may outlive the build:
            # it would share the machine with the measurement that follows).
            context = contextvars.copy_context()  # warnings land on this measurement
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                future = pool.submit(context.run, pch.obtain, cxx, identity, pch_cflags,
                                     header, key_parts, cache_dir())
                proc = _run_compiler(cxx, cflags, ldflags, None, work, output, verbose)
                future.result()
            return proc
        start = time.perf_counter()
        entry = pch.obtain(cxx, identity, pch_cflags, header, key_parts, cache_dir())
        if verbose and entry is not None:
            print(f"opbench: precompiled header {entry.binary} "
                  f"({time.perf_counter() - start:.1f} s)", file=sys.stderr)
    if entry is None:
        return _run_compiler(cxx, cflags, ldflags, None, work, output, verbose)
    verdict: list[bool] = []
    checker = threading.Thread(target=lambda e=entry: verdict.append(e.verify()))
    checker.start()
    proc = _run_compiler(cxx, cflags, ldflags, entry, work, output, verbose)
    checker.join()
    if verdict != [True]:
        assert pch_spec is not None
        pch.invalidate(entry)
        entry = pch.obtain(cxx, identity, pch_spec[1], pch_spec[0], key_parts, cache_dir())
        proc = _run_compiler(cxx, cflags, ldflags, entry, work, output, verbose)
    reason = pch.unused_reason(proc.stderr, entry) if entry is not None else None
    if reason is not None:
        warn(PrecompiledHeaderWarning,
             f"{cxx} did not use the precompiled header ({reason}); built without it (slower)",
             once=f"pch-unused:{reason}")
    return proc


def _spare_core_and_memory() -> bool:
    """Room for a second compiler beside the first: a free core and, since g++ needs up
    to 2.5 GB to precompile torch's extension header, 5 GB of available memory."""
    try:
        cores = len(os.sched_getaffinity(0))
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return False
    return cores >= 2 and available >= 5 << 30


def _run_compiler(cxx: str, cflags: list[str], ldflags: list[str], entry: pch.Pch | None,
                  work: Path, output: str, verbose: bool) -> subprocess.CompletedProcess[str]:
    include = ["-Winvalid-pch", "-include", str(entry.header)] if entry is not None else []
    cmd = [cxx, *cflags, *include, "source.cpp", "-o", output, "-MMD", "-MF", "deps.d",
           *ldflags]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
    if verbose:
        print(f"opbench: {' '.join(cmd)}  ({time.perf_counter() - start:.1f} s)",
              file=sys.stderr)
    return proc


def _own_headers(make_rule: str, work: Path, root: Path) -> dict[str, str]:
    """SHA-256 of each header the build read outside the system directories (``-MMD``),
    leaving out the build's own files and the precompiled header (keyed already)."""
    deps = {}
    for path in pch._make_deps(make_rule):
        full = os.path.realpath(os.path.join(work, path))
        if full.startswith((str(work.resolve()) + os.sep, str(root.resolve() / "pch") + os.sep)):
            continue
        deps[full] = _file_sha256(full)
    return deps


def _file_sha256(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _entry_valid(entry: Path, target: Path, key: str) -> bool:
    """A published entry that is yours alone (the folder, its record and the library:
    owned by you, writable by nobody else, no links), whose record names ``key`` and
    whose recorded headers still have their contents."""
    if any(problem(p) is not None for p in (entry, entry / "deps.json", target)):
        return False
    try:
        record = json.loads((entry / "deps.json").read_text())
        headers = record.get("headers") if record.get("key") == key else None
        if not isinstance(headers, dict) or not target.is_file():
            return False
        return all(_file_sha256(path) == digest for path, digest in headers.items())
    except (OSError, ValueError, AttributeError, TypeError):
        return False


def format_diagnostics(stderr: str, what: str = "C++ statement") -> str:
    """The compiler's message, each diagnostic once (the statement is compiled
    in one place, but template instantiation repeats notes), led by the lines
    that point into the user's code."""
    seen: set[str] = set()
    lines = []
    for line in stderr.splitlines():
        if "opbench_body_" in line:  # "In function ..." of the generated wrapper: noise
            continue
        if "opbench_pch.h" in line and "Winvalid-pch" in line:
            continue  # reported as a warning of its own
        if line in seen and _SNIPPET_LINE.match(line):
            continue
        seen.add(line)
        lines.append(line)
    own = [ln for ln in lines if _SNIPPET_LINE.match(ln) and ": error" in ln]
    head = own[0] if own else "see the compiler output below"
    return f"{what} failed to compile: {head}\n" + "\n".join(lines)


def load_library(path: Path) -> ctypes.CDLL:
    """Loads a built library. ctypes.CDLL releases the GIL around each call."""
    return ctypes.CDLL(str(path))
