"""Whether the GPU was throttled while a statement's timed windows ran.

NVML changes its readings on a millisecond scale and the clock ramps up from
idle over milliseconds, so clocks are read by a *clock probe* (``CudaContext.
clock_probe``), off the timed path: the statement runs unheld while NVML is
read every 5 ms until two readings agree. ``ClockLog`` decides when a probe is
due and judges every sample window by a reading:

* The first sample windows of a measurement (after ``begin_samples``) always
  have a probe of their own, so a block-size search's reading never judges the
  samples; later windows are judged by the latest reading while it is under a
  second old, and by a new probe after that. Every window is judged, or counted
  as not judged with the reason (``unjudged_windows``, ``unjudged_reason``).
* A reading judges a window *throttled* when the SM clock is under
  ``THROTTLE_THRESHOLD`` of its maximum (75%, nvbench's default) and NVML names
  a throttling reason (hardware slowdown, thermal, power brake), or names none
  while the statement kept the GPU fully busy. The power limit alone
  (SwPowerCap, as a large GEMM) is *power capped*, the GPU at work as designed.
  A low clock with no throttling reason while the statement kept the GPU busy
  under 90% of the probe (a launch-bound statement: the GPU idles between its
  kernels and the clock governor keeps the clock down) is not judged: that is a
  half-idle GPU, not a throttled one.

Example:
    >>> log = ClockLog(max_sm_mhz=1980)
    >>> log.begin_samples()
    >>> log.probe_due(now=0.0)
    True
    >>> log.note(Reading(1200, 2619, HW_SLOWDOWN, True, 1.0), now=0.0)
    >>> log.judge(4)  # the windows just timed
    'throttled'
    >>> log.throttled_windows, log.facts()["throttled"]
    (4, True)
"""
from __future__ import annotations

import statistics
from typing import Any, NamedTuple

__all__ = ["GPU_IDLE", "HW_SLOWDOWN", "SW_POWER_CAP", "THROTTLE_THRESHOLD", "ClockLog", "Reading",
           "reason_names"]

#: A window is throttled when the SM clock sampled while it ran is below this
#: fraction of the device's maximum SM clock (nvbench's default threshold).
THROTTLE_THRESHOLD = 0.75
#: A probe during which the statement kept the GPU busy less than this share of
#: the time read the clock of a partly idle GPU.
FULL_LOAD = 0.9
#: A reading judges the windows timed within this many seconds after it.
READING_LIFETIME_S = 1.0

# NVML clocks-event ("throttle") reason bits, nvml.h.
GPU_IDLE = 0x1
SW_POWER_CAP = 0x4
HW_SLOWDOWN = 0x8
_REASONS = {
    0x1: "GpuIdle", 0x2: "ApplicationsClocksSetting", 0x4: "SwPowerCap", 0x8: "HwSlowdown",
    0x10: "SyncBoost", 0x20: "SwThermalSlowdown", 0x40: "HwThermalSlowdown",
    0x80: "HwPowerBrakeSlowdown", 0x100: "DisplayClockSetting",
}
# The reasons that are throttling: hardware slowdown, thermal, the power brake.
_THROTTLING = 0x8 | 0x20 | 0x40 | 0x80


class Reading(NamedTuple):
    """One clock probe: SM and memory MHz, NVML's reasons (-1: not known), whether the
    clock had settled, and the statement's share of the GPU's time during it (-1: not known)."""

    sm_mhz: int
    mem_mhz: int
    reasons: int
    settled: bool
    duty: float


def reason_names(mask: int) -> list[str]:
    """NVML clocks-event reason bits as names (unknown bits in hex).

    >>> reason_names(0x4 | 0x40), reason_names(0x1000)
    (['SwPowerCap', 'HwThermalSlowdown'], ['0x1000'])
    """
    names = [name for bit, name in _REASONS.items() if mask & bit]
    rest = mask & ~sum(_REASONS)
    return names + ([hex(rest)] if rest else [])


def verdict(reading: Reading, max_mhz: int | None, threshold: float = THROTTLE_THRESHOLD) -> str:
    """``"throttled"``, ``"power capped"``, ``"full"`` or why the reading cannot judge.

    >>> verdict(Reading(1200, 0, HW_SLOWDOWN | SW_POWER_CAP, True, 1.0), 1980)
    'throttled'
    >>> verdict(Reading(1200, 0, SW_POWER_CAP, True, 1.0), 1980)
    'power capped'
    >>> verdict(Reading(1900, 0, 0, True, 1.0), 1980)
    'full'
    >>> verdict(Reading(1000, 0, 0, True, 0.3), 1980)[:40]
    'the statement kept the GPU busy 30% of t'
    """
    if not max_mhz:
        return "NVML reports no maximum SM clock"
    if reading.sm_mhz >= threshold * max_mhz:
        return "full"
    reasons = reading.reasons
    if reasons > 0 and reasons & _THROTTLING:
        return "throttled"
    if reasons > 0 and reasons & ~GPU_IDLE == SW_POWER_CAP:
        return "power capped"
    if 0 <= reading.duty < FULL_LOAD:
        return (f"the statement kept the GPU busy {reading.duty:.0%} of the time while the clock was read "
                "(launch-bound: the GPU idles between its kernels), so NVML's clock is that of a partly "
                "idle GPU and names no throttling reason")
    return "throttled"  # a low clock under full load, whatever NVML says of it


class ClockLog:
    """The clock readings of one timer, and each sample window's verdict."""

    def __init__(self, max_sm_mhz: int | None) -> None:
        self.max_sm_mhz = max_sm_mhz
        self.sm: list[int] = []
        self.mem: list[int] = []
        self.reasons = 0
        self.settled: bool | None = None
        self.throttled_windows = 0
        self.power_capped_windows = 0
        self.judged_windows = 0
        self.unjudged_windows = 0
        self.unjudged_reason: str | None = None
        self._last: Reading | None = None
        self._last_at: float | None = None
        self._fresh = False  # a reading taken since the samples began

    def begin_samples(self) -> None:
        """What follows are samples: their windows are counted afresh, and the first of
        them get a probe of their own."""
        self.throttled_windows = self.power_capped_windows = 0
        self.judged_windows = self.unjudged_windows = 0
        self.unjudged_reason = None
        self._fresh = False

    def probe_due(self, now: float) -> bool:
        """Whether the windows just timed need a new reading to be judged."""
        return not self._fresh or self._last_at is None or now - self._last_at >= READING_LIFETIME_S

    def note(self, reading: Reading | None, now: float) -> None:
        """A probe's reading (None: NVML gave none; the windows go unjudged)."""
        self._fresh = True
        self._last_at = now
        self._last = reading
        if reading is None:
            return
        self.sm.append(reading.sm_mhz)
        self.mem.append(reading.mem_mhz)
        self.settled = reading.settled
        if reading.reasons > 0:
            self.reasons |= reading.reasons

    def judge(self, windows: int, no_reading: str = "no clock reading") -> str | None:
        """Judges ``windows`` by the latest reading; the verdict when it is throttled,
        else None."""
        if self._last is None:
            self._unjudged(windows, no_reading)
            return None
        result = verdict(self._last, self.max_sm_mhz)
        if result == "throttled":
            self.judged_windows += windows
            self.throttled_windows += windows
            return result
        if result in ("full", "power capped"):
            self.judged_windows += windows
            if result == "power capped" or (self._last.reasons > 0 and self._last.reasons & SW_POWER_CAP):
                self.power_capped_windows += windows
            return None
        self._unjudged(windows, result)
        return None

    def _unjudged(self, windows: int, why: str) -> None:
        self.unjudged_windows += windows
        self.unjudged_reason = why

    @property
    def last(self) -> Reading | None:
        return self._last

    def facts(self) -> dict[str, Any]:
        """The clocks and the windows' verdicts, for ``Measurement.info``."""
        sm, mem = self.sm, self.mem
        return {
            "sm_clock_mhz": int(statistics.median(sm)) if sm else None,
            "sm_clock_mhz_lowest": min(sm) if sm else None,
            "sm_clock_mhz_max": self.max_sm_mhz,
            "mem_clock_mhz": int(statistics.median(mem)) if mem else None,
            "clock_settled": self.settled,
            "throttle_threshold": THROTTLE_THRESHOLD,
            "throttled": bool(self.throttled_windows) if self.judged_windows else None,
            "throttled_windows": self.throttled_windows,
            "judged_windows": self.judged_windows,
            "unjudged_windows": self.unjudged_windows,
            "unjudged_reason": self.unjudged_reason,
            "throttle_reasons": reason_names(self.reasons),
            "power_capped": bool(self.power_capped_windows) if self.judged_windows else None,
        }
