"""Precompiled headers (opbench.engines.cpp.pch through build.build_library) with a small
standard-library header in place of torch's, so each build takes about a second: built
once and reused, damaged entries rebuilt and never used, and the fallbacks (a
compiler that cannot precompile, flags that make the compiler refuse the PCH)."""
from __future__ import annotations

import os
import shutil
import stat
import warnings
from pathlib import Path

import pytest

from opbench.engines.cpp import build, pch
from opbench.errors import CompileError, PrecompiledHeaderWarning

REAL_CXX = shutil.which("g++") or shutil.which("c++")
pytestmark = pytest.mark.skipif(REAL_CXX is None, reason="needs g++ (GCC's PCH format)")

HEADER = "#include <map>\n#include <string>\n#include <vector>\n"
CFLAGS = ["-O2", "-std=c++17", "-fPIC"]
SOURCE = """#include <map>
#include <string>
extern "C" int answer() {{ std::map<std::string, int> m{{{{"a", {value}}}}}; return m["a"]; }}
"""


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("OPBENCH_CACHE_DIR", str(tmp_path / "cache"))
    pch._verified.cache_clear()  # each test starts as a fresh process would
    # One compiler at a time (a one-core machine), so the order of calls is fixed;
    # test_first_build_compiles_beside_the_precompiling covers the two-core way.
    monkeypatch.setattr(build, "_spare_core_and_memory", lambda: False)
    return tmp_path / "cache"


def _compiler(tmp_path: Path, *, refuse_headers: bool = False) -> Path:
    """A g++ that logs each call's mode (pch or compile) and, if asked, cannot precompile."""
    log = tmp_path / "cxx.log"
    wrapper = tmp_path / ("no-pch-cxx" if refuse_headers else "logging-cxx")
    refuse = 'echo "cc1plus: error: precompiled headers are not supported" >&2; exit 1'
    wrapper.write_text(f"""#!/bin/sh
case "$*" in
  *c++-header*) echo pch >> "{log}"; {refuse if refuse_headers else ':'} ;;
  *" -o "*) echo compile >> "{log}" ;;
esac
exec "{REAL_CXX}" "$@"
""")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    return wrapper


def _calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "cxx.log"
    return log.read_text().split() if log.exists() else []


def _build(value: int, **kwargs) -> int:
    import ctypes

    path = build.build_library(SOURCE.format(value=value), cflags=kwargs.pop("cflags", CFLAGS),
                               ldflags=["-shared"], pch_header=HEADER, **kwargs)
    return ctypes.CDLL(str(path)).answer()


def _entry(cache: Path) -> Path:
    (entry,) = (cache / "pch").glob("*/opbench_pch.h.gch")
    return entry


@pytest.mark.slow
def test_built_once_and_used_by_every_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            _cache: Path) -> None:
    monkeypatch.setenv("CXX", str(_compiler(tmp_path)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecompiledHeaderWarning)  # used, not refused
        assert _build(1) == 1
        assert _build(2) == 2
    assert _calls(tmp_path) == ["pch", "compile", "compile"]
    assert _entry(_cache).stat().st_size > 100_000
    assert not list((_cache / "pch").glob(".*"))  # no leftover build or trash directories


@pytest.mark.slow
def test_first_build_compiles_beside_the_precompiling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path) -> None:
    # With a spare core, the first build does not wait for the PCH to compile
    # through it: it compiles plainly meanwhile; the next build uses the PCH.
    monkeypatch.setattr(build, "_spare_core_and_memory", lambda: True)
    monkeypatch.setenv("CXX", str(_compiler(tmp_path)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecompiledHeaderWarning)
        assert _build(1) == 1
        calls = _calls(tmp_path)
        assert sorted(calls) == ["compile", "pch"]
        assert _build(2) == 2
    assert _calls(tmp_path)[2:] == ["compile"]
    assert _entry(_cache).is_file()


@pytest.mark.slow
def test_a_header_precompiled_on_reuse_is_built_by_the_second_build(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path) -> None:
    # For headers that cost far more to precompile than to compile once (torch's
    # <torch/types.h>): the first build compiles plainly and waits for nothing; the
    # second precompiles the header; the third compiles through it.
    monkeypatch.setenv("CXX", str(_compiler(tmp_path)))
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecompiledHeaderWarning)
        assert _build(1, pch_on_reuse=True) == 1
        assert _calls(tmp_path) == ["compile"] and not list((_cache / "pch").glob("*/*.gch"))
        assert _build(2, pch_on_reuse=True) == 2
        assert _calls(tmp_path) == ["compile", "pch", "compile"]
        assert _build(3, pch_on_reuse=True) == 3
    assert _calls(tmp_path)[3:] == ["compile"]


@pytest.mark.slow
def test_a_corrupt_pch_is_rebuilt_and_what_was_built_from_it_discarded(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _cache: Path) -> None:
    monkeypatch.setenv("CXX", str(_compiler(tmp_path)))
    assert _build(1) == 1
    binary = _entry(_cache)
    data = bytearray(binary.read_bytes())
    middle = slice(len(data) // 2, len(data) // 2 + 64)
    # Same size, damaged content; inverted, not zeroed: a .gch has runs of zero bytes.
    data[middle] = bytes(b ^ 0xFF for b in data[middle])
    binary.write_bytes(bytes(data))
    pch._verified.cache_clear()  # a new process
    assert _build(2) == 2
    # The compile that ran alongside the failed check was thrown away: the PCH was
    # rebuilt and the source compiled again from it.
    assert _calls(tmp_path) == ["pch", "compile", "compile", "pch", "compile"]
    assert _entry(_cache).read_bytes() != bytes(data)


@pytest.mark.parametrize("damage", ["truncated", "no manifest", "changed input"])
@pytest.mark.slow
def test_a_damaged_entry_is_rebuilt_before_any_use(tmp_path: Path, damage: str,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   _cache: Path) -> None:
    monkeypatch.setenv("CXX", str(_compiler(tmp_path)))
    assert _build(1) == 1
    binary = _entry(_cache)
    if damage == "truncated":  # a half-written file
        binary.write_bytes(binary.read_bytes()[:4096])
    elif damage == "no manifest":  # a directory a crash left without its manifest
        (binary.parent / "manifest.json").unlink()
    else:  # one of the headers it was built from has changed since
        import json

        manifest = json.loads((binary.parent / "manifest.json").read_text())
        first = min(manifest["inputs"])
        manifest["inputs"][first][1] -= 1  # as if that file's mtime moved
        (binary.parent / "manifest.json").write_text(json.dumps(manifest))
    assert _build(2) == 2
    assert _calls(tmp_path) == ["pch", "compile", "pch", "compile"]


@pytest.mark.slow
def test_a_compiler_that_cannot_precompile_falls_back_with_one_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CXX", str(_compiler(tmp_path, refuse_headers=True)))
    with pytest.warns(PrecompiledHeaderWarning, match="could not precompile") as caught:
        assert _build(1) == 1
    assert len(caught) == 1 and "not supported" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("error", PrecompiledHeaderWarning)  # shown once per process
        assert _build(2) == 2


@pytest.mark.slow
def test_flags_the_compiler_refuses_the_pch_for_fall_back_with_a_warning() -> None:
    # The PCH is built for C++14 and used for C++17: g++ refuses it (-Winvalid-pch)
    # and parses the header text instead.
    with pytest.warns(PrecompiledHeaderWarning, match="did not use the precompiled header"):
        assert _build(3, pch_cflags=["-O2", "-std=c++14", "-fPIC"]) == 3


@pytest.mark.slow
def test_errors_through_a_pch_point_at_the_users_line() -> None:
    with pytest.raises(CompileError) as info:
        build.build_library('#line 1 "stmt"\nint f() { return undefined_name; }\n',
                            cflags=CFLAGS, ldflags=["-shared"], pch_header=HEADER,
                            snippets={"stmt": "int f() { return undefined_name; }"})
    message = str(info.value)
    assert message.startswith("C++ statement failed to compile: stmt:1:")
    assert "Winvalid-pch" not in message


@pytest.mark.slow
def test_concurrent_builders_of_one_pch_build_it_once(tmp_path: Path, _cache: Path) -> None:
    import subprocess
    import sys

    child = ("import os, sys; sys.path.insert(0, os.environ['TESTS']); "
             "import test_cpp_pch as t; print(t._build(int(sys.argv[1])))")
    env = dict(os.environ, CXX=str(_compiler(tmp_path)), TESTS=str(Path(__file__).parent))
    procs = [subprocess.Popen([sys.executable, "-c", child, str(i)], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in (5, 6)]
    outputs = [p.communicate(timeout=300) for p in procs]
    assert [out.strip() for out, _ in outputs] == ["5", "6"], outputs
    assert sorted(_calls(tmp_path)) == ["compile", "compile", "pch"]


# -- without a compiler (the fast tier) ----------------------------------------------

def test_dependencies_are_read_from_the_make_rule_with_escaped_spaces() -> None:
    rule = "opbench_pch.h.gch: opbench_pch.h /opt/my\\ headers/x.h \\\n /usr/include/c++/map\n"
    assert pch._make_deps(rule) == ["opbench_pch.h", "/opt/my headers/x.h", "/usr/include/c++/map"]


def test_the_key_changes_with_every_input() -> None:
    base = pch._key("g++ 13", ["-O2"], HEADER, ["torch 2.13"])
    assert base == pch._key("g++ 13", ["-O2"], HEADER, ["torch 2.13"])
    assert len({base, pch._key("g++ 14", ["-O2"], HEADER, ["torch 2.13"]),
                pch._key("g++ 13", ["-O3"], HEADER, ["torch 2.13"]),
                pch._key("g++ 13", ["-O2"], HEADER + "\n", ["torch 2.13"]),
                pch._key("g++ 13", ["-O2"], HEADER, ["torch 2.14"])}) == 5


def test_first_use_is_noted_once_per_header_and_flags(tmp_path: Path) -> None:
    args = ("g++ 13", ["-O2"], HEADER, ["torch 2.13"], tmp_path)
    assert pch.first_use(*args) and not pch.first_use(*args)
    assert pch.first_use("g++ 13", ["-O3"], HEADER, ["torch 2.13"], tmp_path)
