"""opbench.callgrind._worker_process: the worker's pipe protocol and how a statement's failure travels
(the worker under valgrind is tested in tests/test_callgrind_worker.py)."""
from __future__ import annotations

import os
import pickle
import threading

from opbench.callgrind import _worker_process


def test_messages_cross_a_pipe_whole_and_a_closed_pipe_reads_none() -> None:
    read, write = os.pipe()
    big = {"payload": b"x" * 200_000, "n": 3}  # larger than a pipe's buffer: written in parts

    def writer() -> None:
        _worker_process.send(write, big)
        _worker_process.send(write, ("done",))
        os.close(write)
    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert _worker_process.recv(read) == big
        assert _worker_process.recv(read) == ("done",)
        thread.join()
        assert _worker_process.recv(read) is None
    finally:
        os.close(read)


def test_a_statements_error_is_kept_with_its_text_and_traceback() -> None:
    assert _worker_process._failure(lambda: None) is None
    data, text, tb = _worker_process._failure(lambda: 1 / 0)
    assert text == "ZeroDivisionError: division by zero" and "Traceback" in tb
    assert isinstance(pickle.loads(data), ZeroDivisionError)


class _HoldsALock(Exception):
    def __init__(self) -> None:
        super().__init__("locked")
        self.lock = threading.Lock()  # no pickle of it can be made (tblib's either)


def test_an_exception_that_cannot_be_pickled_travels_as_text() -> None:
    def raise_it() -> None:
        raise _HoldsALock()
    data, text, _ = _worker_process._failure(raise_it)
    assert data is None and text == "_HoldsALock: locked"


def test_the_statement_runs_on_a_thread_of_its_own() -> None:
    main = threading.get_ident()
    assert _worker_process._on_new_thread(threading.get_ident) != main
