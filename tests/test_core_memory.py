"""opbench.core.memory: MemoryCounts (figures per call from whole totals), how two memory
figures are judged (decide_memory), and how they print."""
from __future__ import annotations

import pytest

from opbench.core.formatting import format_value
from opbench.core.measurement import TaskSpec
from opbench.core.memory import MemoryCounts, decide_memory, format_bytes

SPEC = TaskSpec("torch.add(a, b)", "pass", name="add")


def _host(allocations, nbytes, peak, growth):
    return {"allocations": allocations, "bytes": nbytes, "peak": peak, "growth": growth}


def _counts(number=100, **sources):
    return MemoryCounts(number, sources or {"host": _host((500,), (409_600,), (4096,), (0,))}, SPEC)


def test_figures_per_call_divide_sums_by_the_calls_but_not_the_peak():
    c = _counts(100, host=_host((500, 500, 700), (409_600,) * 3, (4096, 4096, 8192), (0, 0, 6400)))
    assert c.values("allocations") == (5.0, 5.0, 7.0)
    assert c.allocations == 5.0 and c.bytes == 4096.0  # medians over the repeats
    assert c.values("peak") == (4096.0, 4096.0, 8192.0)  # a level: never divided
    assert c.values("growth") == (0.0, 0.0, 64.0)
    assert not c.exact and c.repeats == 3


def test_a_leak_is_positive_net_growth_per_call_and_freeing_is_no_leak():
    leaking = _counts(10, host=_host((10,), (1000,), (1000,), (1000,)))
    assert leaking.leak == 100.0 and leaking.leaking
    freeing = _counts(10, host=_host((0,), (0,), (0,), (-640,)))
    assert freeing.growth == -64.0 and freeing.leak == 0.0 and not freeing.leaking
    assert freeing.gated()["leak"] == ("bytes", (0.0,))  # a freeing call is no gain either


def test_the_default_source_is_host_else_python_and_a_missing_one_is_named():
    python_only = _counts(python=_host((100,), (800,), (8,), (0,)))
    assert python_only.sources == ("python",) and python_only.allocations == 1.0
    with pytest.raises(KeyError, match="'native' was not counted"):
        python_only.values("allocations", "native")


def test_cuda_figures_are_gated_apart_from_the_host():
    cuda = {"allocations": (200,), "bytes": (800,), "peak": (512,), "growth": (0,),
            "device_allocations": (0,), "device_bytes": (0,)}
    c = _counts(100, host=_host((0,), (0,), (0,), (0,)), cuda=cuda)
    gated = c.gated()
    assert gated["allocations"] == ("allocations", (0.0,))
    assert gated["cuda allocations"] == ("allocations", (2.0,))
    assert gated["cuda device allocations"] == ("allocations", (0.0,))
    assert "device: 0 allocations" in c.describe()


@pytest.mark.parametrize("bad, message", [
    ({"disk": _host((1,), (1,), (1,), (1,))}, "unknown memory source"),
    ({"host": {"allocations": (1,)}}, "needs the fields"),
    ({"host": _host((1, 2), (1,), (1,), (1,))}, "one value per repeat"),
    ({}, "at least one source"),
])
def test_malformed_counts_are_refused(bad, message):
    with pytest.raises(ValueError, match=message):
        MemoryCounts(10, bad, SPEC)
    with pytest.raises(ValueError, match="positive int"):
        MemoryCounts(0, {"host": _host((1,), (1,), (1,), (1,))}, SPEC)


def test_problem_names_what_a_results_file_entry_gets_wrong():
    good = _counts().to_dict()
    assert MemoryCounts.problem(good) is None
    assert "whole numbers" in MemoryCounts.problem(
        {"counts": {"host": {**good["counts"]["host"], "bytes": [1.5]}}})
    assert "expected one of" in MemoryCounts.problem({"counts": {"gpu": {}}})
    assert MemoryCounts.problem({"counts": []}) == "expected an object of sources"


def test_replicates_join_their_repeats_and_refuse_other_numbers():
    a, b = _counts(), _counts()
    assert MemoryCounts.joined([a, b]).repeats == 2
    with pytest.raises(ValueError, match="different numbers of calls"):
        MemoryCounts.joined([a, _counts(50)])


def test_text_names_allocations_bytes_peak_and_a_leak():
    assert _counts().cell_text() == "5 / 4.00 KiB"
    leaking = _counts(10, host=_host((10,), (1000,), (1000,), (1650,)))
    assert leaking.cell_text() == "1 / 100 B leaks 165 B"
    assert "leaks 165 B per call" in repr(leaking)
    assert format_bytes(1536) == "1.50 KiB" and format_bytes(-2 * 2**20) == "-2.00 MiB"
    assert format_value(2.5, "allocations") == "2.50 allocs" and format_value(64, "bytes") == "64 B"


def test_one_allocation_more_per_call_is_a_regression_whatever_the_threshold():
    assert decide_memory([100.0] * 3, [101.0] * 3, 0.5, "allocations").verdict == "slower"
    assert decide_memory([101.0], [100.0], 0.5, "allocations").verdict == "faster"
    assert decide_memory([5.0], [5.0], 0.05, "allocations").verdict == "same"
    # Repeats that straddle one allocation (amortised growth) decide nothing.
    assert decide_memory([5.0, 5.5], [5.9, 6.2], 0.05, "allocations").verdict == "inconclusive"


def test_bytes_are_judged_against_the_threshold_and_from_zero_any_growth_counts():
    assert decide_memory([4096.0], [4100.0], 0.05, "bytes").verdict == "same"
    assert decide_memory([4096.0], [8192.0], 0.05, "bytes").verdict == "slower"
    zero = decide_memory([0.0], [64.0], 0.05, "bytes")
    assert zero.verdict == "slower" and zero.ratio == 65.0  # one more on each side: finite
    assert decide_memory([0.0], [0.0], 0.05, "bytes").verdict == "same"
    with pytest.raises(ValueError, match="kind"):
        decide_memory([1.0], [1.0], 0.05, "time")
