"""Who may write a path: private folders for what opbench loads or locks, and the checks
before it trusts a file someone could have planted.

A compile cache holds libraries opbench loads into the process (their constructors
run); the sweep's slot folder holds the locks every measurement waits on. Another
user who can write there can run code as you, or freeze every sweep. So:

* ``private_folder(path)`` makes a folder opbench owns alone: created with mode
  0700, then checked: a directory (not a link), owned by you, writable by nobody
  else, in a chain of folders none of which another user could rename or
  replace (each owned by you or root, and writable by others only when sticky,
  as ``/tmp`` is). Anything else is an ``UntrustedPathError`` that names the
  path, what is wrong and what to do.
* ``problem(path)`` is why a file or folder inside such a folder must not be
  used (``None`` when it may): a link, owned by another user, or writable by
  others. A cache entry with a problem is discarded, never loaded.
* ``shared_writers(path)``: why others could change what is written into a
  folder (a report about to be published), for a warning.

Example:
    >>> import os, tempfile
    >>> folder = private_folder(os.path.join(tempfile.mkdtemp(), "cache", "lib"))
    >>> oct(os.stat(folder).st_mode & 0o777), problem(folder), shared_writers(folder)
    ('0o700', None, None)
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from opbench.errors import UntrustedPathError

__all__ = ["euid", "private_folder", "problem", "shared_writers"]


def euid() -> int:
    """The user this process acts as (0 where there are no users)."""
    return os.geteuid() if hasattr(os, "geteuid") else 0


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _writers(mode: int) -> str:
    who = [name for bit, name in ((stat.S_IWGRP, "its group"), (stat.S_IWOTH, "every user"))
           if mode & bit]
    return " and ".join(who)


def problem(path: str | os.PathLike[str]) -> str | None:
    """Why ``path`` (a file or folder inside a private folder) must not be trusted: not
    there, a link, owned by another user, or writable by others; None when it may be."""
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if stat.S_ISLNK(st.st_mode):
        return "is a symbolic link"
    if st.st_uid != euid():
        return f"is owned by {_owner(st.st_uid)}, not by you ({_owner(euid())})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by {_writers(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):#o})"
    return None


def _ancestor_problem(folder: Path) -> str | None:
    """Why another user could rename or replace what is in ``folder``, or None."""
    try:
        st = os.stat(folder)  # a link to a folder is as safe as the folder (and its chain)
    except FileNotFoundError:
        return None  # made by private_folder, as the user's own
    except OSError as e:
        return f"cannot be read ({e.strerror or e})"
    if st.st_uid not in (euid(), 0):
        return f"is owned by {_owner(st.st_uid)}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
        return (f"can be written by {_writers(st.st_mode)} and is not sticky (mode "
                f"{stat.S_IMODE(st.st_mode):#o})")
    return None


def private_folder(path: str | os.PathLike[str], *, what: str = "use",
                   fix: str = "") -> Path:
    """``path``, created if missing (mode 0700), after checking that no other user can
    write it or rename it away (module doc). ``what`` says what opbench does with the
    folder (``"load compiled code from"``), ``fix`` how to choose another, for the
    error.

    Raises:
        UntrustedPathError: it or a folder above it fails the checks.
    """
    folder = Path(path).absolute()
    for above in dict.fromkeys([*folder.parents, *folder.resolve().parents]):
        reason = _ancestor_problem(above)
        if reason is not None:
            raise _refusal(folder, f"the folder above it, {above}, {reason}", what, fix)
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    except FileNotFoundError:  # a missing parent: made as a user's new folder is
        folder.parent.mkdir(parents=True, exist_ok=True)
        return private_folder(folder, what=what, fix=fix)
    reason = problem(folder)
    if reason is None and not folder.is_dir():
        reason = "is not a folder"
    if reason is not None:
        raise _refusal(folder, f"it {reason}", what, fix)
    return folder


def _refusal(folder: Path, reason: str, what: str, fix: str) -> UntrustedPathError:
    return UntrustedPathError(
        f"{folder}: {reason}, so another user could put files there: opbench will not {what} "
        f"it. {fix or 'Remove it, or use a folder of your own.'}")


def shared_writers(folder: str | os.PathLike[str]) -> str | None:
    """Why users other than you could change files written into ``folder`` (it is theirs,
    or writable by others, sticky or not), or None."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    if st.st_uid != euid():
        return f"it is owned by {_owner(st.st_uid)}"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it can be written by {_writers(st.st_mode)} (mode {stat.S_IMODE(st.st_mode):#o})"
    return None
