"""Atomic file writes: a reader (or a crash) never sees a half-written results file."""
from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Union

PathLike = Union[str, "os.PathLike[str]"]


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Calls ``write(binary_file)`` on a temporary file beside ``path``, flushes it to
    disk, then renames it over ``path``. On any error the old file is untouched and
    the temporary one removed. Returns ``path`` as a Path."""
    target = Path(path)
    if not target.parent.is_dir():
        raise FileNotFoundError(f"cannot write {target}: directory {target.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
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
