// opbench/clock.h: the clock every opbench timing reads.
//
// A monotonic nanosecond clock, and a measurement of what reading it costs and
// how finely it ticks. Both are measured, never assumed: virtual machines and
// older kernels can fall back from the vDSO to a syscall (~20 ns -> ~500 ns) or
// to a coarse clocksource, and a benchmark must know when that happened.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace opbench {

// steady_clock is CLOCK_MONOTONIC on Linux/glibc: never goes backwards, not
// slewed by NTP steps, and read through the vDSO without a syscall.
using clock = std::chrono::steady_clock;

/// Nanoseconds since an arbitrary, fixed epoch. Only differences are meaningful.
inline std::int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now().time_since_epoch()).count();
}

/// What one clock read costs and the smallest step the clock can show, in ns.
struct ClockInfo {
  double read_cost_ns;   ///< mean cost of one now_ns() call
  double resolution_ns;  ///< smallest non-zero difference between two successive reads
};

/// Measures the clock: `reads` back-to-back reads for the cost; for the
/// resolution, the smallest non-zero step seen between successive reads (the
/// clock's nominal resolution, clock_getres, is 1 ns on Linux whatever the
/// hardware does, so it cannot be trusted).
inline ClockInfo measure_clock(int reads = 200000) noexcept {
  reads = std::max(reads, 2);
  std::int64_t smallest_step = INT64_MAX;
  const std::int64_t start = now_ns();
  std::int64_t prev = start;
  for (int i = 0; i < reads; ++i) {
    const std::int64_t t = now_ns();
    if (t != prev) smallest_step = std::min(smallest_step, t - prev);
    prev = t;
  }
  const double cost = static_cast<double>(prev - start) / reads;
  // A clock that never moved in `reads` reads is coarser than the whole window.
  const double resolution =
      smallest_step == INT64_MAX ? static_cast<double>(prev - start) : static_cast<double>(smallest_step);
  return ClockInfo{cost, resolution};
}

}  // namespace opbench
