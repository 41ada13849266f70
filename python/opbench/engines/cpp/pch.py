"""Precompiled headers: torch's headers parsed once, reused by every build that needs them.

Parsing ``<torch/types.h>`` takes g++ ten seconds or more; a statement compiled
against a precompiled copy of it takes a couple. A precompiled header (PCH)
is only valid for the compiler that wrote it and the exact flags it was
written with, so each entry is keyed by a content hash of the compiler's
identity, the flags, the header's text and whatever else the caller names
(torch's version), and lives in ``<cache>/pch/<key>/``:

* ``opbench_pch.h``: the header text (what builds pass to ``-include``; g++
  picks ``opbench_pch.h.gch`` beside it when it is valid, and parses the text
  otherwise, so a PCH the compiler refuses costs time, never correctness);
* ``opbench_pch.h.gch`` (``.pch`` for clang): the compiled header;
* ``manifest.json``: the binary's size and SHA-256, and every header it was
  built from with its size and modification time.

An entry is built in a private directory and published by one ``rename``, so
readers see a whole entry or none; concurrent builders of one key serialize
on a lock file, so the work is done once. Before an entry is used it is
checked: a missing or unreadable manifest, a binary of the wrong size or a
changed input header makes it rebuilt. The binary's hash is checked once per
process (``verify``), alongside the first compile that uses it, whose result
is thrown away if the check fails.

    >>> _binary_suffix("g++ (Debian 12.2.0-14) 12.2.0"), _binary_suffix("clang version 14")
    ('.gch', '.pch')
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from opbench.errors import PrecompiledHeaderWarning, warn

__all__ = ["Pch", "find", "first_use", "invalidate", "obtain", "unused_reason"]

_FORMAT = 1
_HEADER = "opbench_pch.h"



@dataclass(frozen=True)
class Pch:
    """One published entry: pass ``-include <header>`` to use it."""

    directory: Path
    header: Path
    binary: Path
    sha256: str
    size: int

    def verify(self) -> bool:
        """Whether the binary still has the hash it was published with (once per process
        per file version; a few tenths of a second for torch's headers)."""
        return _verified(str(self.binary), self.sha256, *_stat_key(self.binary))


def _binary_suffix(compiler_identity: str) -> str:
    # `-include NAME` makes g++ look for NAME.gch beside it, clang for NAME.pch.
    return ".pch" if "clang" in compiler_identity.lower() else ".gch"


def _stat_key(path: Path) -> tuple[int, int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns, st.st_ino


@functools.cache
def _verified(path: str, sha256: str, size: int, mtime_ns: int, inode: int) -> bool:
    del size, mtime_ns, inode  # part of the memo key: a rewritten file is checked again
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest() == sha256


def _key(compiler_identity: str, cflags: Sequence[str], header_text: str,
         key_parts: Sequence[str]) -> str:
    return hashlib.sha256("\0".join([
        f"opbench-pch-{_FORMAT}", compiler_identity, *cflags, header_text, *key_parts,
    ]).encode()).hexdigest()[:32]


def find(compiler_identity: str, cflags: Sequence[str], header_text: str,
         key_parts: Sequence[str], root: Path) -> Pch | None:
    """The valid cached entry for these inputs, or None; never builds."""
    key = _key(compiler_identity, cflags, header_text, key_parts)
    return _load(root / "pch" / key, compiler_identity)


def first_use(compiler_identity: str, cflags: Sequence[str], header_text: str,
              key_parts: Sequence[str], root: Path) -> bool:
    """Whether no build has named these inputs before (in any process); notes that one has
    (``<cache>/pch/<key>.wanted``). For headers precompiled only once a second build
    needs them."""
    key = _key(compiler_identity, cflags, header_text, key_parts)
    marker = root / "pch" / f"{key}.wanted"
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        with open(marker, "x"):
            return True
    except FileExistsError:
        return False


def obtain(cxx: str, compiler_identity: str, cflags: Sequence[str], header_text: str,
           key_parts: Sequence[str], root: Path) -> Pch | None:
    """The precompiled ``header_text`` for builds with exactly ``cflags``, built now if the
    cache has no valid entry. None, after one warning per process and reason, when the
    compiler cannot precompile it: callers then build without it."""
    key = _key(compiler_identity, cflags, header_text, key_parts)
    pch_root = root / "pch"
    entry = _load(pch_root / key, compiler_identity)
    if entry is not None:
        return entry
    pch_root.mkdir(parents=True, exist_ok=True)
    with _locked(pch_root / f"{key}.lock"):
        entry = _load(pch_root / key, compiler_identity)  # built while we waited
        if entry is not None:
            return entry
        error = _build(cxx, compiler_identity, cflags, header_text, pch_root, key)
    if error is not None:
        first = next((ln for ln in error.splitlines() if "error" in ln), error.strip()[:200])
        warn(PrecompiledHeaderWarning,
             f"could not precompile torch's headers with {cxx} ({first.strip()}); "
             "building without a precompiled header (slower)", once=f"pch-build:{key}")
        return None
    return _load(pch_root / key, compiler_identity)


def invalidate(entry: Pch) -> None:
    """Removes an entry (its binary failed verification): the next ``obtain`` rebuilds it."""
    _discard(entry.directory)


def unused_reason(stderr: str, entry: Pch) -> str | None:
    """The compiler's reason for not using ``entry`` (from ``-Winvalid-pch``), or None."""
    for line in stderr.splitlines():
        if entry.binary.name in line and "Winvalid-pch" in line:
            reason = line.split(entry.binary.name, 1)[1].replace("[-Winvalid-pch]", "")
            return reason.lstrip(": ").strip()
    return None


def _load(directory: Path, compiler_identity: str) -> Pch | None:
    """The entry in ``directory`` if it is complete and its inputs are unchanged, else None
    (a damaged entry is removed so that it gets rebuilt)."""
    if not directory.is_dir():
        return None
    binary = directory / (_HEADER + _binary_suffix(compiler_identity))
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
        ok = (manifest["format"] == _FORMAT and binary.stat().st_size == manifest["size"]
              and (directory / _HEADER).is_file() and _inputs_unchanged(manifest["inputs"]))
        sha256, size = str(manifest["sha256"]), int(manifest["size"])
    except (OSError, ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        _discard(directory)
        return None
    return Pch(directory, directory / _HEADER, binary, sha256, size)


def _inputs_unchanged(inputs: dict[str, list[int]]) -> bool:
    return _inputs_unchanged_cached(tuple(sorted((p, tuple(v)) for p, v in inputs.items())))


@functools.lru_cache(maxsize=8)
def _inputs_unchanged_cached(inputs: tuple[tuple[str, tuple[int, ...]], ...]) -> bool:
    # Thousands of stat calls (torch's headers), tens of milliseconds: once per process.
    for path, (size, mtime_ns) in inputs:
        try:
            st = os.stat(path)
        except OSError:
            return False
        if st.st_size != size or st.st_mtime_ns != mtime_ns:
            return False
    return True


def _build(cxx: str, compiler_identity: str, cflags: Sequence[str], header_text: str,
           pch_root: Path, key: str) -> str | None:
    """Builds and publishes the entry; returns the compiler's output on failure."""
    work = Path(tempfile.mkdtemp(prefix=f".build-{key[:8]}-", dir=pch_root))
    try:
        (work / _HEADER).write_text(header_text)
        binary = _HEADER + _binary_suffix(compiler_identity)
        cmd = [cxx, *cflags, "-x", "c++-header", _HEADER, "-o", binary, "-MD", "-MF", "deps.d"]
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, check=False)
        if proc.returncode != 0 or not (work / binary).is_file():
            return proc.stderr or proc.stdout or f"{cxx} exited with status {proc.returncode}"
        inputs = {}
        for path in _make_deps((work / "deps.d").read_text()):
            full = os.path.realpath(os.path.join(work, path))
            if os.path.dirname(full) == str(work.resolve()):
                continue  # the header text itself: hashed into the key
            st = os.stat(full)
            inputs[full] = [st.st_size, st.st_mtime_ns]
        digest = hashlib.sha256()
        with open(work / binary, "rb") as f:
            for block in iter(lambda: f.read(1 << 22), b""):
                digest.update(block)
        (work / "manifest.json").write_text(json.dumps({
            "format": _FORMAT, "size": (work / binary).stat().st_size,
            "sha256": digest.hexdigest(), "command": cmd, "inputs": inputs,
        }))
        (work / "deps.d").unlink()
        _publish(work, pch_root / key)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return None


def _make_deps(text: str) -> list[str]:
    """The prerequisites of a make rule written by ``-MD`` (escaped spaces kept)."""
    body = text.replace("\\\n", " ").split(":", 1)[1]
    paths, current = [], ""
    for part in body.split(" "):
        if current.endswith("\\"):
            current = current[:-1] + " " + part
            continue
        if current:
            paths.append(current)
        current = part.strip()
    if current:
        paths.append(current)
    return paths


def _publish(work: Path, target: Path) -> None:
    """Renames the finished directory into place; a stale entry there is moved aside first."""
    if target.exists():
        _discard(target)
    try:
        os.rename(work, target)
    except OSError:
        if not target.is_dir():  # not "someone else published first"
            raise


def _discard(directory: Path) -> None:
    """Removes an entry without ever exposing a half-deleted one under its name."""
    trash = directory.with_name(f".trash-{directory.name}-{os.getpid()}-{threading.get_ident()}")
    try:
        os.rename(directory, trash)
    except OSError:
        return  # already gone (another process discarded or replaced it)
    shutil.rmtree(trash, ignore_errors=True)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    # flock is released by the kernel if the holder dies: a crashed build never
    # leaves the key locked.
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
