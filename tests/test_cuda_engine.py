"""opbench.engines.cuda.engine: DeviceEngine fits a DeviceTimer under Timer (clock, info, and
the per-call samples of the per-call modes). The device timer itself, on the fake driver, is
tests/test_cuda.py's."""
from __future__ import annotations

from typing import Any

import pytest

from opbench.engines import Engine
from opbench.engines.cuda import engine as cuda_engine


class _FakeDeviceTimer:
    def __init__(self, fn: Any, mode: str, cache: str, **options: Any) -> None:
        self.fn, self.mode, self.cache, self.options = fn, mode, cache, options
        self.last_per_call_times: list[float] = []
        self.samples_begun = 0

    def begin_samples(self) -> None:
        self.samples_begun += 1

    def timeit(self, number: int) -> float:
        self.last_per_call_times = [1e-6 * (i + 1) for i in range(number)]
        return sum(self.last_per_call_times)

    def metadata(self) -> dict[str, Any]:
        return {"clock": f"cuda events ({self.mode})", "device": "Fake GPU", "l2_cache": self.cache}


class _Statement(Engine):
    def timeit(self, number: int) -> float:
        return 0.0

    def as_callable(self) -> Any:
        return lambda: None


@pytest.fixture
def fake_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda_engine, "DeviceTimer", _FakeDeviceTimer)


def test_block_modes_keep_the_blocks(fake_timer: None) -> None:
    e = cuda_engine.DeviceEngine(_Statement(), mode="events", l2_cache="warm")
    assert e.timeit(3) == pytest.approx(6e-6)
    assert e.samples(3, [6e-6]) == (3, [6e-6])
    assert e.clock == "cuda events (events)"
    assert e.info() == {"clock": "cuda events (events)", "device": "Fake GPU", "l2_cache": "warm"}


@pytest.mark.parametrize(("mode", "cache"), [("per_iteration", "warm"), ("events", "cold")])
def test_per_call_modes_hold_every_call(fake_timer: None, mode: str, cache: str) -> None:
    e = cuda_engine.DeviceEngine(_Statement(), mode=mode, l2_cache=cache)
    e.timeit(2)
    e.discard_samples()  # warm-up forgotten, and the samples begin: judged afresh
    assert e._device.samples_begun == 1
    e.timeit(3)
    assert e.samples(3, [6e-6]) == (1, [1e-6, 2e-6, 3e-6])
    e.reset()
    assert e.samples(3, [6e-6]) == (3, [6e-6])  # nothing recorded since: the blocks


def test_a_statement_that_is_not_python_is_refused() -> None:
    class _Cpp(Engine):
        def timeit(self, number: int) -> float:
            return 0.0
    with pytest.raises(ValueError, match="cannot hand out its statement as a Python callable"):
        cuda_engine.DeviceEngine(_Cpp(), mode="events", l2_cache="warm")
