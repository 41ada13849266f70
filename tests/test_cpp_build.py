"""opbench.engines.cpp.build: where builds are cached, which compiler, how errors read, and
that the cache loads nothing another user could have written (compiling and the cache's
other behaviour are in tests/test_engines_cpp.py and test_cpp_pch.py)."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

import other_user
from opbench.engines.cpp import build
from opbench.errors import CompilerNotFoundError, UntrustedPathError
from other_user import shared_folder  # noqa: F401  (the fixture)


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


# -- the cache trusts nothing it did not make (issue 34) --------------------------------

KEY = "0" * 32


def _entry(lib: Path, record: object, name: str = "timer") -> Path:
    entry = lib / f"{KEY}.abcdef123456"
    entry.mkdir(parents=True)
    (entry / "deps.json").write_text(json.dumps(record))
    (entry / f"{name}.so").write_bytes(b"\x7fELF planted")
    return entry


def test_an_empty_dependency_record_never_matches(tmp_path: Path) -> None:
    entry = _entry(tmp_path / "lib", {})
    assert build._lookup(tmp_path / "lib", KEY, "timer") is None
    assert not entry.exists()  # discarded, so the next build replaces it


@pytest.mark.parametrize("change", ["others write the folder", "others write the library",
                                    "the library is a link", "another user owns it"])
def test_an_entry_others_could_have_written_is_never_returned(tmp_path: Path, change: str) -> None:
    lib = tmp_path / "lib"
    entry = _entry(lib, {"key": KEY, "headers": {}})
    assert build._lookup(lib, KEY, "timer") == entry / "timer.so"  # sound: found
    library = entry / "timer.so"
    if change == "others write the folder":
        os.chmod(entry, 0o777)
    elif change == "others write the library":
        os.chmod(library, 0o666)
    elif change == "the library is a link":
        library.rename(tmp_path / "elsewhere.so")
        library.symlink_to(tmp_path / "elsewhere.so")
    else:
        if other_user.REASON:
            pytest.skip(other_user.REASON)
        os.chown(library, other_user.uid(), -1)
    assert build._lookup(lib, KEY, "timer") is None


def test_cache_folders_are_made_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("c++") is None and shutil.which("g++") is None:
        pytest.skip("no C++ compiler (build_library looks for one before the cache)")
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "lib").mkdir(parents=True)
    os.chmod(tmp_path / "cache" / "lib", 0o777)  # as a shared folder would be
    with pytest.raises(UntrustedPathError, match=r"lib: it can be written by its group and "
                                                 r"every user .*\$OPBENCH_CACHE_DIR"):
        build.build_library("int x;", cflags=["-shared", "-fPIC"])
    shutil.rmtree(tmp_path / "cache")
    monkeypatch.setattr(build, "_compile_with_pch", _no_compiler)
    with pytest.raises(RuntimeError, match="compiler called"):
        build.build_library("int x;", cflags=["-shared", "-fPIC"])
    for folder in ("lib", "pch"):
        assert stat.S_IMODE((tmp_path / "cache" / folder).stat().st_mode) == 0o700


def _no_compiler(*args: object, **kwargs: object) -> None:
    raise RuntimeError("compiler called")


@pytest.mark.slow  # compiles
@other_user.needed
def test_a_library_another_user_plants_in_a_shared_cache_is_never_loaded(
        tmp_path: Path, shared_folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    """The attack of issue 34: $OPBENCH_CACHE_DIR on a folder every user can write; another
    user makes lib/ first and plants a library (a constructor that runs on load) under
    the name the victim's build will look for."""
    source = 'extern "C" int opbench_value() { return 1; }\n'
    flags = ["-shared", "-fPIC"]
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "own"))
    name = build.build_library(source, cflags=flags).parent.name  # the victim's entry name
    marker = shared_folder / "constructor-ran"
    evil = tmp_path / "evil.cpp"
    evil.write_text('#include <cstdio>\n__attribute__((constructor)) static void run() '
                    f'{{ std::fopen("{marker}", "w"); }}\n'
                    'extern "C" int opbench_value() { return 666; }\n')
    subprocess.run(["c++", "-shared", "-fPIC", str(evil), "-o", str(shared_folder / "evil.so")],
                   check=True)
    os.chmod(shared_folder / "evil.so", 0o755)
    other_user.run(f"cd {shared_folder} && mkdir -m 777 lib lib/{name} && cp evil.so "
                   f"lib/{name}/timer.so && echo '{{}}' > lib/{name}/deps.json && chmod -R a+rwX lib")
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(shared_folder))
    with pytest.raises(UntrustedPathError, match=f"{shared_folder}/lib: it is owned by nobody"):
        path = build.build_library(source, cflags=flags)
        build.load_library(path)
    assert not marker.exists()
