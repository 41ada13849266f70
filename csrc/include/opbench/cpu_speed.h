// opbench/cpu_speed.h: how fast this core runs right now, against a fixed piece of work.
//
// A virtual CPU shares its physical core with another (the host's other
// hyperthread, which may be another guest's), and a laptop's core slows when
// it is hot: the same code then takes up to twice as long, with no sign in the
// scheduler's counters. The probe times a fixed mix of work that competes for
// what a busy sibling takes (four independent integer streams, loads and
// stores to a 4 KiB buffer that stays in L1), about 2 us at full speed, and
// keeps the fastest of a few tries so that an interrupt does not count.
// Comparing its time with the fastest ever seen says how much slower the core
// runs now. A dependent chain would not do: it is latency-bound and runs at
// full speed beside a busy sibling (measured: 1.02x where this probe read 1.5x
// and a torch op 2x).
#pragma once

#include <algorithm>
#include <cstdint>

#include "opbench/clock.h"

namespace opbench {

namespace detail {

inline std::uint32_t* speed_buffer() {
  alignas(64) static std::uint32_t buffer[1024];  // 4 KiB: stays in L1, pollutes little
  return buffer;
}

// The probe's work; `volatile` keeps the compiler from folding the loop away.
inline std::uint64_t speed_work(int iterations) {
  std::uint32_t* buf = speed_buffer();
  std::uint64_t a = 1, b = 2, c = 3, d = 4;
  for (int i = 0; i < iterations; ++i) {
    a += buf[(i * 7) & 1023];
    b ^= a << 3;
    c += b >> 2;
    d ^= c + static_cast<std::uint64_t>(i);
    buf[(i * 13) & 1023] = static_cast<std::uint32_t>(d);
  }
  volatile std::uint64_t sink = a + b + c + d;
  return sink;
}

}  // namespace detail

/// Nanoseconds the probe's fixed work takes now: the fastest of `tries`.
inline std::int64_t cpu_speed_probe_ns(int tries = 3, int iterations = 2000) {
  std::int64_t best = INT64_MAX;
  for (int t = 0; t < std::max(tries, 1); ++t) {
    const std::int64_t start = now_ns();
    detail::speed_work(iterations);
    best = std::min(best, now_ns() - start);
  }
  return best;
}

}  // namespace opbench
