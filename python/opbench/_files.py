"""Atomic file writes: a reader (or a crash) never sees a half-written results file.

Example:
    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "a.txt")
    >>> _ = atomic_write_text(path, "hello")
    >>> open(path).read()
    'hello'
"""
from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Union

PathLike = Union[str, "os.PathLike[str]"]


def check_writable(path: PathLike) -> Path:
    """Raises unless ``path`` can be written as a file: its directory must exist and it
    must not be a directory. Commands call it before measuring, not after."""
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(f"cannot write {target}: it is a directory; give a file name")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {target}: directory {target.parent} does not exist")
    return target


_umask_lock = threading.Lock()


def _default_mode(target: Path) -> int:
    """The old file's permissions, else what a new file gets (0o666 minus the umask):
    mkstemp's 0600 would hide results from a CI artifact server running as another user."""
    try:
        return os.stat(target).st_mode & 0o7777
    except FileNotFoundError:
        with _umask_lock:  # the only portable way to read the umask is to set it
            umask = os.umask(0o022)
            os.umask(umask)
        return 0o666 & ~umask


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Calls ``write(binary_file)`` on a temporary file beside ``path``, flushes it to
    disk, then renames it over ``path``. On any error the old file is untouched and
    the temporary one removed. The file gets the old file's permissions, or the
    umask's for a new one. Returns ``path`` as a Path."""
    target = check_writable(path)
    mode = _default_mode(target)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(target.parent)
    return target


def atomic_write_text(path: PathLike, text: str) -> Path:
    """``atomic_write`` of UTF-8 text."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable; not every filesystem allows it.
    try:
        dir_fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
