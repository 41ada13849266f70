"""opbench.engines.cuda.clocks: each sample window judged by a clock reading, or said not to be."""
from __future__ import annotations

import pytest

from opbench.engines.cuda.clocks import (
    GPU_IDLE,
    HW_SLOWDOWN,
    READING_LIFETIME_S,
    SW_POWER_CAP,
    ClockLog,
    Reading,
    reason_names,
    verdict,
)

HW_THERMAL = 0x40


def test_reason_names():
    assert reason_names(SW_POWER_CAP | HW_SLOWDOWN) == ["SwPowerCap", "HwSlowdown"]
    assert reason_names(0) == [] and reason_names(0x1000) == ["0x1000"]


@pytest.mark.parametrize("reading, expected", [
    (Reading(1485, 0, 0, True, 1.0), "full"),  # 75% of 1980
    (Reading(1484, 0, 0, True, 1.0), "throttled"),  # low under full load, no reason named
    (Reading(1200, 0, HW_SLOWDOWN, True, 0.2), "throttled"),  # a throttling reason, whatever the load
    (Reading(1200, 0, SW_POWER_CAP | HW_THERMAL, True, 1.0), "throttled"),  # combined bits
    (Reading(1200, 0, SW_POWER_CAP, True, 1.0), "power capped"),
    (Reading(1200, 0, SW_POWER_CAP | GPU_IDLE, True, 1.0), "power capped"),
    (Reading(1200, 0, -1, True, 1.0), "throttled"),  # NVML names no reasons at all: the clock judges
])
def test_verdicts(reading, expected):
    assert verdict(reading, 1980) == expected


def test_a_low_clock_on_a_half_idle_gpu_is_not_judged():
    why = verdict(Reading(1000, 0, 0, True, 0.3), 1980)
    assert why.startswith("the statement kept the GPU busy 30% of the time") and "launch-bound" in why
    assert verdict(Reading(1000, 0, -1, True, 0.3), 1980).startswith("the statement kept")
    assert verdict(Reading(1000, 0, 0, True, 1.0), None) == "NVML reports no maximum SM clock"


def test_the_first_samples_get_a_probe_of_their_own():
    log = ClockLog(1980)
    assert log.probe_due(now=0.0)
    log.note(Reading(1980, 2619, 0, True, 1.0), now=0.0)
    log.judge(5)  # a block-size search's windows
    assert not log.probe_due(now=0.5)
    log.begin_samples()
    assert log.probe_due(now=0.5)  # the samples are never judged by the search's reading
    assert (log.judged_windows, log.throttled_windows) == (0, 0)


def test_readings_judge_the_windows_of_the_next_second():
    log = ClockLog(1980)
    log.note(Reading(1200, 2619, HW_SLOWDOWN, True, 1.0), now=10.0)
    assert log.judge(3) == "throttled"
    assert not log.probe_due(now=10.0 + READING_LIFETIME_S - 0.01)
    assert log.judge(2) == "throttled"
    assert log.probe_due(now=10.0 + READING_LIFETIME_S)
    assert log.facts()["throttled_windows"] == log.facts()["judged_windows"] == 5


def test_windows_without_a_reading_are_counted_with_the_reason():
    log = ClockLog(1980)
    log.note(None, now=0.0)
    assert log.judge(4, "libnvidia-ml.so.1 not found") is None
    facts = log.facts()
    assert (facts["throttled"], facts["judged_windows"], facts["unjudged_windows"]) == (None, 0, 4)
    assert facts["unjudged_reason"] == "libnvidia-ml.so.1 not found"
    assert facts["sm_clock_mhz"] is None and facts["power_capped"] is None


def test_facts_of_a_power_capped_gemm():
    log = ClockLog(1980)
    log.note(Reading(1200, 2619, SW_POWER_CAP, True, 1.0), now=0.0)
    log.judge(7)
    facts = log.facts()
    assert (facts["throttled"], facts["power_capped"], facts["throttled_windows"]) == (False, True, 0)
    assert facts["throttle_reasons"] == ["SwPowerCap"]
    assert (facts["sm_clock_mhz"], facts["sm_clock_mhz_lowest"], facts["mem_clock_mhz"]) == (1200, 1200, 2619)
