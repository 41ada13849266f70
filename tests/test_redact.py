"""opbench._redact: what --redact takes out of a published report (issue 34). Its use by the
reports is in test_gate.py, test_session_verdicts.py, test_report.py and the commands' tests."""
from __future__ import annotations

import socket

import pytest

from opbench import _redact


@pytest.mark.parametrize("text, shown", [
    ('File "/home/ann/proj/bench.py", line 3', 'File "…/bench.py", line 3'),
    ("saved /tmp/opbench-run-x1/results.json: ok", "saved …/results.json: ok"),
    ("in ~/proj/x.py and C:\\Users\\ann\\y.py", "in …/x.py and …/y.py"),
    ("new / baseline, a/b/c, 1/2, https://example.com/a/b", "new / baseline, a/b/c, 1/2, "
                                                             "https://example.com/a/b"),
])
def test_absolute_paths_keep_their_last_part_only(text: str, shown: str) -> None:
    assert _redact.text(text) == shown


def test_host_names_are_replaced_as_whole_words() -> None:
    hosts = _redact.hosts_of({"hostname": "ci-runner-7"}, {"worker": "gpu-box:1234"})
    assert hosts[0] == socket.gethostname() and hosts[1:] == ["ci-runner-7", "gpu-box"]
    assert _redact.text("ran on ci-runner-7 and GPU-BOX:1234, not ci-runner-77", hosts) == (
        "ran on <host> and <host>:1234, not ci-runner-77")
    assert _redact.text("a b", ["a"]) == "a b"  # too short to tell from a word


def test_environments_lose_the_facts_that_name_the_host() -> None:
    env = {"hostname": "h1", "worker": "h1:3", "python": "3.11", "cpu_model": "X"}
    assert _redact.environment(env) == {"python": "3.11", "cpu_model": "X"}
