"""opbench.memory.counter: where the allocation counter is, whether a process has it, and
the environment that starts one with it (the user's own LD_PRELOAD kept)."""
from __future__ import annotations

import pytest

import preloaded
from opbench.errors import MemoryUnavailableError
from opbench.memory import counter


def test_the_counter_is_built_beside_the_extension_on_glibc_linux():
    preloaded.needs_counter()
    assert counter.library_path().is_file()
    assert not counter.preloaded()  # this test process was started without it


def test_preload_env_puts_the_counter_first_and_keeps_the_users_preload():
    preloaded.needs_counter()
    env = counter.preload_env({"LD_PRELOAD": "/opt/libfoo.so", "HOME": "/h"})
    assert env["LD_PRELOAD"].split() == [str(counter.library_path()), "/opt/libfoo.so"]
    assert env["HOME"] == "/h"
    again = counter.preload_env(env)  # a child of a preloaded process: still one counter
    assert again["LD_PRELOAD"] == env["LD_PRELOAD"]


def test_restore_environment_gives_started_processes_the_users_preload(monkeypatch):
    preloaded.needs_counter()
    for user in ("", "/opt/libfoo.so"):
        for key, value in counter.preload_env({"LD_PRELOAD": user}).items():
            if "PRELOAD" in key:
                monkeypatch.setenv(key, value)
        counter.restore_environment()
        assert counter.os.environ.get("LD_PRELOAD", "") == user
        assert counter._ORIGINAL_PRELOAD not in counter.os.environ


def test_a_platform_without_the_counter_says_why_and_how_to_fix_it(monkeypatch, tmp_path):
    monkeypatch.setattr(counter.sys, "platform", "darwin")
    assert "needs Linux with glibc" in counter.unavailable_reason()
    with pytest.raises(MemoryUnavailableError, match="darwin"):
        counter.preload_env()
    monkeypatch.setattr(counter.sys, "platform", "linux")
    monkeypatch.setattr(counter, "library_path", lambda: tmp_path / counter.LIBRARY)
    assert "built without its allocation counter" in counter.unavailable_reason()
    monkeypatch.setattr(counter, "_state", {"attached": False, "interposing": False})
    with pytest.raises(MemoryUnavailableError, match="Rebuild opbench"):
        counter.attach()


def test_attach_reports_whether_the_native_heap_is_counted():
    assert preloaded.run("""
from opbench.memory import counter
result = [counter.preloaded(), counter.attach(), counter.attach()]
""") == [True, True, True]
    assert preloaded.run("""
from opbench.memory import counter
result = [counter.preloaded(), counter.attach()]
""", preload=False) == [False, False]
