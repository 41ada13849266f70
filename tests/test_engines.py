"""opbench.engines: the Engine protocol every way of running code implements."""
from __future__ import annotations

import pytest

from opbench.engines import Engine, Foreign, as_engine


class _Fixed(Engine):
    def timeit(self, number: int) -> float:
        return 0.5 * number


def test_an_engine_needs_only_timeit() -> None:
    e = _Fixed()
    e.prepare(), e.reset(), e.discard_samples()  # the hooks default to nothing
    assert (e.timeit(10), e.samples(10, [5.0]), e.info(), e.clock) == (5.0, (10, [5.0]), {}, None)
    with pytest.raises(NotImplementedError):
        Engine().timeit(1)


def test_an_engine_that_cannot_be_a_callable_says_who_needs_one() -> None:
    with pytest.raises(ValueError, match=r"_Fixed cannot hand out its statement .*cProfile"):
        _Fixed().as_callable()


class _TimeitLike:
    def timeit(self, number: int) -> int:
        return number * 2  # an int: Foreign makes it seconds as a float


def test_anything_with_timeit_is_wrapped_and_engines_pass_through() -> None:
    wrapped = as_engine(_TimeitLike())
    assert isinstance(wrapped, Foreign) and wrapped.timeit(3) == 6.0
    assert isinstance(wrapped.timeit(3), float)
    engine = _Fixed()
    assert as_engine(engine) is engine
