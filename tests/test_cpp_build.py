"""opbench.engines.cpp.build: where builds are cached, which compiler, how errors read
(compiling and the cache's behaviour are in tests/test_engines_cpp.py and test_cpp_pch.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from opbench.engines.cpp import build
from opbench.errors import CompilerNotFoundError


def test_the_cache_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "a"))
    assert build.cache_dir() == tmp_path / "a"
    monkeypatch.delenv("OPBENCH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert build.cache_dir() == tmp_path / "xdg" / "opbench" / "cpp"


def test_a_cxx_that_is_not_there_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", "no-such-compiler-4242")
    with pytest.raises(CompilerNotFoundError, match=r"\$CXX='no-such-compiler-4242' is not an executable"):
        build.find_compiler()
    monkeypatch.delenv("CXX")
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(CompilerNotFoundError, match="Install g\\+\\+ or clang\\+\\+, or set \\$CXX"):
        build.find_compiler()


def test_diagnostics_lead_with_the_users_line_once() -> None:
    stderr = "\n".join([
        "timer.cpp: In function 'void {anonymous}::opbench_body_(opbench::Fiber&, ...)':",
        "stmt:1:5: error: 'y' was not declared in this scope",
        "stmt:1:5: error: 'y' was not declared in this scope",
        "timer.cpp:80:1: note: in expansion",
    ])
    text = build.format_diagnostics(stderr)
    assert text.splitlines()[0] == ("C++ statement failed to compile: "
                                    "stmt:1:5: error: 'y' was not declared in this scope")
    assert text.count("was not declared") == 2  # the head, and the diagnostic once
    assert "opbench_body_" not in text
    assert build.format_diagnostics("ld: cannot find -lfoo").startswith(
        "C++ statement failed to compile: see the compiler output below")
