"""opbench.engines.cuda.events: CUDA events without torch, on the fake driver."""
from __future__ import annotations

import pytest

from fake_cuda import FakeTorchCuda, fake_fixture, fake_library_fixture, use_fake_torch  # noqa: F401 (fixtures)
from opbench.engines.cuda.events import Event


def test_record_synchronize_elapsed(fake):
    stream = fake.stream(0)
    start, end = Event(), Event()
    start.record(stream=stream)
    fake.set_current(0)  # the caller's own launches need a context, as with torch
    fake.launch(2.5, stream=stream)
    end.record(stream=stream)
    end.synchronize()
    assert end.query() is True
    assert start.elapsed_time(end) == pytest.approx(2.5, abs=5e-4)
    assert fake.records_on(stream) == 2


def test_misuse_is_a_clear_error(fake):
    start, end = Event(), Event()
    with pytest.raises(ValueError, match=r"Event.synchronize\(\) before Event.record\(\)"):
        start.synchronize()
    start.record()
    with pytest.raises(ValueError, match=r"the end event was never recorded"):
        start.elapsed_time(end)


def test_the_default_stream_is_torchs_current_stream_of_the_events_device(fake, monkeypatch):
    fake.configure(device_count=2)
    streams = {0: fake.stream(0), 1: fake.stream(1)}
    use_fake_torch(monkeypatch, FakeTorchCuda(fake, streams, current=0))
    Event(device=1).record()
    assert fake.records_on(streams[1], 1) == 1 and fake.records_on(streams[0], 0) == 0
