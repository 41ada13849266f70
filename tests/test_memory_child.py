"""opbench.memory._child: the program Timer.memory starts with the counter preloaded: it
rebuilds the Timer, counts, and leaves its outcome (or the error) in a file, whole."""
from __future__ import annotations

import pickle

import opbench
from opbench.memory import _child


def test_without_the_counter_the_child_says_the_loader_ignored_it(tmp_path):
    job = tmp_path / "job.pickle"
    job.write_bytes(pickle.dumps({"timer": opbench.Timer("pass"), "number": 1, "repeats": 1,
                                  "cuda": None}))
    kind, pickled, text, _ = _child.run(str(job))  # this process has no counter preloaded
    assert kind == "error" and "ignored LD_PRELOAD" in text
    assert type(pickle.loads(pickled)).__name__ == "MemoryUnavailableError"


def test_a_timer_that_cannot_be_rebuilt_is_named_as_such(tmp_path, monkeypatch):
    monkeypatch.setattr(_child.counter, "preloaded", lambda: True)
    job = tmp_path / "job.pickle"
    job.write_bytes(b"\x80\x04\x95\x0e\x00\x00\x00\x00\x00\x00\x00\x8c\x08__main__\x8c\x01f\x93.")
    kind, _, text, _ = _child.run(str(job))
    assert kind == "error" and "cannot rebuild the Timer" in text and "__main__" in text


def test_the_outcome_is_written_whole_where_the_caller_reads_it(tmp_path, monkeypatch):
    monkeypatch.setattr(_child, "run", lambda path: ("ok", path))
    out = tmp_path / "out.pickle"
    monkeypatch.setattr(_child.sys, "argv", ["-c", "job-path", str(out)])
    _child.main()
    assert pickle.loads(out.read_bytes()) == ("ok", "job-path")
    assert [p.name for p in tmp_path.iterdir()] == ["out.pickle"]  # no temporary left
