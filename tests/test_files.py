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
