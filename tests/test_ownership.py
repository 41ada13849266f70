"""opbench._ownership: folders opbench loads code from or locks in are the user's alone, and
files another user could have planted are refused (issue 34). The checks as used are in
test_cpp_build.py, test_checkout.py, test_placement.py and test_report.py."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import other_user
from opbench._ownership import private_folder, problem, shared_writers
from opbench.errors import UntrustedPathError
from other_user import shared_folder  # noqa: F401  (the fixture)


def test_a_new_folder_is_private_and_its_missing_parents_made(tmp_path: Path) -> None:
    folder = private_folder(tmp_path / "a" / "b" / "lib")
    assert folder == tmp_path / "a" / "b" / "lib"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert private_folder(folder) == folder  # an existing one of the user's: as it is


@pytest.mark.parametrize("change, reason", [
    (lambda p: os.chmod(p, 0o770), "can be written by its group"),
    (lambda p: os.chmod(p, 0o707), "can be written by every user"),
])
def test_a_folder_others_can_write_is_refused_naming_it(tmp_path: Path, change, reason) -> None:
    folder = tmp_path / "lib"
    folder.mkdir()
    change(folder)
    with pytest.raises(UntrustedPathError, match=f"{folder}: it {reason}.*will not load code "
                                                 "from it. Use /mine"):
        private_folder(folder, what="load code from", fix="Use /mine.")


def test_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir(mode=0o700)
    (tmp_path / "lib").symlink_to(tmp_path / "real")
    with pytest.raises(UntrustedPathError, match="lib: it is a symbolic link"):
        private_folder(tmp_path / "lib")
    assert problem(tmp_path / "lib") == "is a symbolic link"
    assert problem(tmp_path / "missing").startswith("cannot be read")


def test_a_folder_above_that_others_could_rename_is_refused(tmp_path: Path) -> None:
    os.chmod(tmp_path, 0o777)  # writable by all and not sticky: lib could be swapped
    try:
        with pytest.raises(UntrustedPathError, match=f"the folder above it, {tmp_path}, can "
                                                     "be written by .* and is not sticky"):
            private_folder(tmp_path / "cache" / "lib")
        os.chmod(tmp_path, 0o1777)  # sticky, as /tmp: others cannot rename what is yours
        assert private_folder(tmp_path / "cache" / "lib").is_dir()
    finally:
        os.chmod(tmp_path, 0o700)


@other_user.needed
def test_what_another_user_made_first_is_refused(shared_folder: Path) -> None:  # noqa: F811
    other_user.run(f"mkdir -m 755 {shared_folder}/lib && touch {shared_folder}/lib.so")
    with pytest.raises(UntrustedPathError, match=r"lib: it is owned by nobody \(uid \d+\), not "
                                                 r"by you"):
        private_folder(shared_folder / "lib")
    assert problem(shared_folder / "lib.so").startswith("is owned by nobody")
    assert shared_writers(shared_folder / "lib").startswith("it is owned by nobody")


def test_shared_writers_names_who_else_can_write(tmp_path: Path) -> None:
    assert shared_writers(tmp_path) is None
    os.chmod(tmp_path, 0o1777)
    try:
        assert shared_writers(tmp_path) == ("it can be written by its group and every user "
                                            "(mode 0o1777)")
    finally:
        os.chmod(tmp_path, 0o700)
