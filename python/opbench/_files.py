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
import stat
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, Union

from opbench._ownership import euid

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
    mkstemp's 0600 would hide results from a CI artifact server running as another user.

    Only a regular file of the user's own lends its mode, and never its setuid, setgid
    or sticky bit: a link there (to any file, a setuid program included) or another
    user's file gets the new file's mode."""
    try:
        st = os.lstat(target)
        if stat.S_ISREG(st.st_mode) and st.st_uid == euid():
            return stat.S_IMODE(st.st_mode) & 0o777
    except FileNotFoundError:
        pass
    with _umask_lock:  # the only portable way to read the umask is to set it
        umask = os.umask(0o022)
        os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Calls ``write(binary_file)`` on a temporary file beside ``path``, flushes it to
    disk, then renames it over ``path`` (a link there is replaced, never written
    through). On any error the old file is untouched and the temporary one removed.
    The file gets the old file's permissions (``_default_mode``), or the umask's for
    a new one. Returns ``path`` as a Path."""
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


def _linked_here(tmp: str, target: Path) -> bool:
    """Whether ``target`` is ``tmp``'s own inode: on NFS a ``link`` whose reply was lost is
    retried and answers EEXIST although it succeeded (open(2), "O_EXCL" notes)."""
    try:
        return os.path.samestat(os.stat(tmp), os.stat(target))
    except OSError:
        return False


def atomic_write_numbered(folder: PathLike, text: str, name: Callable[[int], str], first: int,
                          *, registry: str = ".numbers") -> tuple[int, Path]:
    """Writes ``text`` as a new file ``folder/name(n)`` for the first number ``n >= first``
    that no other writer holds, and returns ``(n, path)``; concurrent writers (threads,
    processes, hosts sharing an NFS export) each get their own number and none is lost.

    Why not ``O_EXCL``: NFS before v3 lacks it, and a name that holds more than the
    number (a commit, a time) would not collide anyway. A number is claimed by
    ``link(2)``, which the NFS server does atomically: the file is written whole to a
    temporary name, then hard-linked as ``folder/<registry>/<n>``; EEXIST means the
    number is taken (unless the link is ours, which a lost NFS reply can hide: the
    inode is compared, the recipe of open(2)'s manual), so the next one is tried.
    Only then is the file linked under its visible name, so a reader never sees a
    partial file. The registry links share the file's inode (no space); whoever
    deletes a file removes its registry link too (``remove_numbered``). Where hard
    links are refused (some FUSE or SMB mounts), an ``O_EXCL`` claim of the registry
    name stands in."""
    folder = Path(folder)
    claims = folder / registry
    claims.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".claim.", suffix=".tmp")
    try:
        os.fchmod(fd, _default_mode(folder / ".new"))
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8"))
            f.flush()
            os.fsync(f.fileno())
        number = first
        while not _claim(tmp, claims / str(number)):
            number += 1
        target = folder / name(number)
        try:
            os.link(tmp, target)
        except FileExistsError:  # a stale file of that name (an old copy): never overwrite
            if not _linked_here(tmp, target):
                os.unlink(claims / str(number))
                raise
        except OSError:  # no hard links here: the registry claim already holds the number
            os.replace(tmp, target)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    _fsync_directory(folder)
    return number, target


def _claim(tmp: str, claim: Path) -> bool:
    try:
        os.link(tmp, claim)
        return True
    except FileExistsError:
        return _linked_here(tmp, claim)
    except OSError:  # hard links refused: the exclusive create of the claim decides
        try:
            os.close(os.open(claim, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
            return True
        except FileExistsError:
            return False


def remove_numbered(path: PathLike, number: int, *, registry: str = ".numbers") -> None:
    """Deletes a file written by ``atomic_write_numbered`` and its registry link."""
    target = Path(path)
    for p in (target, target.parent / registry / str(number)):
        try:
            os.unlink(p)
        except FileNotFoundError:
            pass


def numbers_taken(folder: PathLike, *, registry: str = ".numbers") -> list[int]:
    """The numbers claimed in ``folder``'s registry, ascending."""
    try:
        names = os.listdir(Path(folder) / registry)
    except FileNotFoundError:
        return []
    return sorted(int(n) for n in names if n.isdigit())


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
