"""Atomic writes: the old file survives any failure, no temporary file is left."""
from __future__ import annotations

import os

import pytest

from opbench._files import atomic_write, atomic_write_text


def test_atomic_write_leaves_old_file_on_failure(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")

    def fail(f):
        f.write(b"half")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write(target, fail)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.txt"]
    with pytest.raises(FileNotFoundError, match="does not exist"):
        atomic_write(tmp_path / "nope" / "x.txt", lambda f: None)


def test_atomic_write_text_replaces_content(tmp_path):
    target = tmp_path / "r.json"
    atomic_write_text(target, "one")
    atomic_write_text(target, "two \u00e9")
    assert target.read_text(encoding="utf-8") == "two \u00e9"
    assert os.listdir(tmp_path) == ["r.json"]


# -- the mode a saved file gets (issue 34) -------------------------------------------------

def _umask_default() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def test_a_mode_is_never_copied_through_a_link_nor_its_special_bits(tmp_path):
    """The target of a link (any file of the user's, setuid included) lent its mode to
    the file saved in the link's place."""
    import stat

    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("")
    os.chmod(elsewhere, 0o4755)
    link = tmp_path / "r.json"
    link.symlink_to(elsewhere)
    atomic_write_text(link, "new")
    assert not link.is_symlink() and stat.S_IMODE(os.stat(link).st_mode) == _umask_default()
    assert elsewhere.read_text() == "" and stat.S_IMODE(os.stat(elsewhere).st_mode) == 0o4755
    own = tmp_path / "own.json"
    own.write_text("")
    os.chmod(own, 0o6750)  # the user's own file keeps its mode, without setuid/setgid
    atomic_write_text(own, "new")
    assert stat.S_IMODE(os.stat(own).st_mode) == 0o750


def test_the_mode_of_another_users_file_is_not_copied(tmp_path):
    import stat

    import other_user

    if other_user.REASON:
        pytest.skip(other_user.REASON)
    theirs = tmp_path / "r.json"
    theirs.write_text("")
    os.chmod(theirs, 0o666)
    os.chown(theirs, other_user.uid(), -1)
    atomic_write_text(theirs, "new")
    assert stat.S_IMODE(os.stat(theirs).st_mode) == _umask_default()
