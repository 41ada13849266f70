"""Measurement / TaskSpec / helpers against torch.utils.benchmark on the same data."""
from __future__ import annotations

import pickle
import random

import pytest
import torch.utils.benchmark as tb

import opbench
import torch_bugs
from conftest import strip_object_line


def _spec_kwargs(rng: random.Random) -> dict:
    return dict(
        stmt=rng.choice(["x + 1", "f(x)", "a = 1\nb = a * 2"]),
        setup=rng.choice(["pass", "", "x = 1", "import math\nx = math.pi"]),
        label=rng.choice([None, "Batched dot"]),
        sub_label=rng.choice([None, "", "[64, 64]"]),
        description=rng.choice([None, "mul/sum"]),
        env=rng.choice([None, "env A"]),
        num_threads=rng.choice([1, 4]),
    )


def _raw_times(rng: random.Random) -> tuple[int, list[float]]:
    # Above 1 ns: below it torch 2.13 prints seconds (tested separately).
    scale = 10 ** rng.uniform(-8.9, 0.5)
    n = rng.choice([1, 2, 3, 4, 5, 7, 10, 31, 100])
    spread = rng.choice([0.001, 0.05, 0.2, 0.6])
    number = rng.choice([1, 10, 1000])
    return number, [scale * number * (1 + spread * rng.random()) for _ in range(n)]


def _pair(seed: int):
    rng = random.Random(seed)
    kwargs = _spec_kwargs(rng)
    number, times = _raw_times(rng)
    ours = opbench.Measurement(number, times, opbench.TaskSpec(**kwargs))
    theirs = tb.Measurement(number, times, tb.TaskSpec(**kwargs))
    return ours, theirs


@pytest.mark.parametrize("seed", range(300))
def test_statistics_and_text_match_torch(seed):
    ours, theirs = _pair(seed)
    assert ours.times == theirs.times
    assert ours.median == theirs.median
    assert ours.iqr == theirs.iqr
    # torch sums in a vectorised cascade, opbench with fsum: equal to rounding.
    assert ours.mean == pytest.approx(theirs.mean, rel=1e-14)
    assert ours.significant_figures == theirs.significant_figures
    assert ours.has_warnings == theirs.has_warnings
    for threshold in (0.01, 0.1, 0.5):
        assert ours.meets_confidence(threshold) == theirs.meets_confidence(threshold)
    assert ours.title == theirs.title
    assert ours.as_row_name == theirs.as_row_name
    assert ours.task_spec.summarize() == theirs.task_spec.summarize()
    assert strip_object_line(repr(ours)) == strip_object_line(repr(theirs))


def test_repr_names_opbench_class():
    m = opbench.Measurement(1, [1e-6], opbench.TaskSpec("f()", "pass"))
    assert repr(m).startswith("<opbench.core.measurement.Measurement object at 0x")


def test_forwards_taskspec_fields():
    m = opbench.Measurement(1, [1e-6], opbench.TaskSpec("f()", "pass", label="L", num_threads=3))
    assert (m.stmt, m.label, m.num_threads) == ("f()", "L", 3)
    with pytest.raises(AttributeError):
        m.not_a_field


def test_env_default_is_documented_value():
    # torch 2.13 misspells `taskspec` inside Measurement.env and so returns None.
    m = opbench.Measurement(1, [1e-6], opbench.TaskSpec("f()", "pass"))
    assert m.env == "Unspecified env"
    if not torch_bugs.measurement_env_is_none():
        assert tb.Measurement(1, [1e-6], tb.TaskSpec("f()", "pass")).env == m.env
    assert opbench.Measurement(1, [1e-6], opbench.TaskSpec("f()", "pass", env="A")).env == "A"


@pytest.mark.parametrize("seed", range(50))
def test_merge_matches_torch(seed):
    rng = random.Random(seed)
    specs = [_spec_kwargs(rng) for _ in range(3)]
    data = [(rng.choice(specs), *_raw_times(rng)) for _ in range(8)]
    ours = opbench.Measurement.merge(
        opbench.Measurement(n, t, opbench.TaskSpec(**s)) for s, n, t in data
    )
    theirs = tb.Measurement.merge([tb.Measurement(n, t, tb.TaskSpec(**s)) for s, n, t in data])
    assert [(m.number_per_run, m.raw_times, m.metadata) for m in ours] == [
        (m.number_per_run, m.raw_times, m.metadata) for m in theirs
    ]


def test_pickle_round_trip():
    m = opbench.Measurement(
        10, [1e-5, 2e-5, 3e-5, 4e-5], opbench.TaskSpec("f()", "pass", label="L"),
        metadata={"k": 1}, overhead=1e-8,
    )
    m.median  # populate the lazy cache: it must survive too
    back = pickle.loads(pickle.dumps(m))
    assert back == m
    assert repr(back).splitlines()[1:] == repr(m).splitlines()[1:]
    assert back.overhead == 1e-8 and back.metadata == {"k": 1}


def test_without_overhead_subtracts_per_run_cost():
    m = opbench.Measurement(10, [1e-5, 2e-5], opbench.TaskSpec("f()", "pass"), overhead=1e-7)
    adjusted = m.without_overhead()
    assert adjusted.raw_times == pytest.approx([1e-5 - 1e-6, 2e-5 - 1e-6])
    assert m.raw_times == [1e-5, 2e-5]  # raw times are never changed in place
    with pytest.raises(ValueError, match="calibrate_overhead"):
        opbench.Measurement(1, [1.0], opbench.TaskSpec("f()", "pass")).without_overhead()


def test_clock_is_shown_only_when_not_default():
    spec = opbench.TaskSpec("f()", "pass")
    assert "clock" not in repr(opbench.Measurement(1, [1e-6], spec))
    assert "  clock: cuda-events" in repr(opbench.Measurement(1, [1e-6], spec, clock="cuda-events"))


@pytest.mark.parametrize("seed", range(200))
def test_select_unit_and_trim_sigfig_match_torch(seed):
    rng = random.Random(seed)
    t = 10 ** rng.uniform(-8.9, 2)
    assert opbench.select_unit(t) == tb.select_unit(t)
    n = rng.randint(1, 4)
    assert opbench.trim_sigfig(t * 1e6, n) == tb.trim_sigfig(t * 1e6, n)


@pytest.mark.parametrize("t", [1e-9, 1e-6, 1e-3, 1.0, 999.999e-9, 1000e-9, 0.999999e-3])
def test_select_unit_boundaries_match_torch(t):
    assert opbench.select_unit(t) == tb.select_unit(t)


def test_select_unit_below_one_nanosecond_is_ns():
    # torch 2.13 returns seconds here (its table lookup falls off the end).
    assert opbench.select_unit(2e-10) == ("ns", 1e-9)
    assert opbench.select_unit(0.0) == ("ns", 1e-9)
    if not torch_bugs.select_unit_below_a_nanosecond_is_seconds():
        assert tb.select_unit(2e-10) == opbench.select_unit(2e-10)


def test_helpers_match_torch():
    assert opbench.unit_to_english("us") == tb.unit_to_english("us") == "microsecond"
    assert opbench.ordered_unique([3, 1, 3, 2, 1]) == tb.ordered_unique([3, 1, 3, 2, 1])
    with pytest.raises(AssertionError):
        opbench.trim_sigfig(1.0, 1.5)
    spec = dict(stmt="s", setup="pass", label="L")
    assert opbench.TaskSpec(**spec) == opbench.TaskSpec(**spec)
    assert hash(opbench.TaskSpec(**spec)) == hash(opbench.TaskSpec(**spec))


def test_zero_median_does_not_crash():
    m = opbench.Measurement(1, [0.0, 0.0], opbench.TaskSpec("f()", "pass"))
    # torch 2.13 raises OverflowError on both (log10(0) = -inf).
    assert m.significant_figures == 1
    assert "0.00 ns" in repr(m)


def test_describe_extends_repr_which_stays_untouched():
    times = [1e-6 * (1 + (i % 7) / 100) for i in range(30)] + [5e-6]
    m = opbench.Measurement(1, times, opbench.TaskSpec("f()", "pass"))
    before = repr(m)
    text = m.describe()
    assert repr(m) == before
    assert text.startswith(before + "\n")
    extra = text[len(before) + 1:]
    assert "Median 95% CI:" in extra and "order statistic" in extra
    assert "Outliers (Tukey fences): 0 low, 1 high (1 severe) of 31" in extra
    m.info.update(converged=False, stop_reason="plateau", target=0.01, relative_ci=0.03)
    assert "NOT converged: relative CI 3.00%, target 1.00% (stopped on plateau)" in \
        m.describe()


@pytest.mark.parametrize("number, times, match", [
    (1, [], "needs at least one time"),  # torch accepts it and prints -1000000000.00 ns
    (0, [1e-6], "number_per_run must be a positive int"),
    (True, [1e-6], "number_per_run must be a positive int"),
])
def test_an_impossible_measurement_is_refused_at_construction(number, times, match):
    with pytest.raises(ValueError, match=match):
        opbench.Measurement(number, times, opbench.TaskSpec("f()", "pass"))


def test_without_overhead_never_returns_times_of_zero_or_less():
    spec = opbench.TaskSpec("f()", "pass")
    # The harness's estimate at or above some run: those runs are indistinguishable
    # from the harness itself; a time of 0 or less would be a confident wrong figure.
    for times in ([2e-9, 5e-9], [1.5e-9, 1.9e-9]):
        m = opbench.Measurement(1, times, spec, overhead=2e-9)
        with pytest.raises(opbench.Error, match="overhead") as e:
            m.without_overhead()
        assert isinstance(e.value, ValueError)
    m = opbench.Measurement(1, [3e-9, 5e-9], spec, overhead=1e-9)
    assert m.without_overhead().times == pytest.approx([2e-9, 4e-9])
