// opbench/autorange.h: choose a block size, then collect timed blocks.
//
// The same search and stopping rules as opbench.Timer (and torch's Timer),
// so a C++ program gets the numbers the Python layer would report:
//   estimate_block_size: grow n tenfold from 1 until one block takes at least
//     min_run_time / 1000 and the empty-block overhead (n = 0) is under 1e-4
//     of it, or a block exceeds min_run_time.
//   blocked_autorange: repeat blocks of that size until min_run_time total.
//   adaptive_autorange: repeat until IQR / median < threshold (after more
//     than 3 blocks and min_run_time total) or max_run_time is spent.
// `time_block(n)` is any callable returning the seconds n runs took, e.g.
//   [&](std::int64_t n) { return opbench::time_loop_ns(f, n) * 1e-9; }
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "opbench/stats.h"

namespace opbench {

/// Samples are seconds per run: one entry per block, already divided by n.
struct Blocks {
  std::int64_t number_per_run = 1;
  std::vector<double> times;
};

template <class TimeBlock>
std::int64_t estimate_block_size(TimeBlock&& time_block, double min_run_time) {
  std::vector<double> empties;
  for (int i = 0; i < 5; ++i) empties.push_back(std::max(time_block(std::int64_t{0}), 1e-9));
  std::sort(empties.begin(), empties.end());
  // torch takes the lower median of an even count; five reads make it exact.
  const double overhead = empties[empties.size() / 2];
  std::int64_t number = 1;
  for (;;) {
    // A clock that cannot see the block yet returns 0; the floor keeps the
    // ratio finite, as Timer._timeit's max(t, 1e-9) does.
    const double taken = std::max(time_block(number), 1e-9);
    if (overhead / taken <= 1e-4 && taken >= min_run_time / 1000) break;
    if (taken > min_run_time) break;
    if (number * 10 > 2147483647) break;  // torch's int32 bound, kept for parity
    number *= 10;
  }
  return number;
}

namespace detail {
template <class TimeBlock, class Stop>
Blocks collect(TimeBlock& time_block, std::int64_t number, double min_run_time, double max_run_time,
               Stop&& can_stop_now) {
  Blocks out;
  out.number_per_run = number;
  double total = 0;
  bool can_stop = false;
  while (total < min_run_time || !can_stop) {
    const double t = std::max(time_block(number), 1e-9);
    out.times.push_back(t / static_cast<double>(number));
    total += t;
    can_stop = can_stop_now(out.times);
    if (max_run_time > 0 && total > max_run_time) break;
  }
  return out;
}
}  // namespace detail

template <class TimeBlock>
Blocks blocked_autorange(TimeBlock&& time_block, double min_run_time = 0.2) {
  const std::int64_t number = estimate_block_size(time_block, min_run_time);
  return detail::collect(time_block, number, min_run_time, 0.0,
                         [](const std::vector<double>&) { return true; });
}

template <class TimeBlock>
Blocks adaptive_autorange(TimeBlock&& time_block, double threshold = 0.1, double min_run_time = 0.01,
                          double max_run_time = 10.0) {
  const std::int64_t number = estimate_block_size(time_block, 0.05);
  return detail::collect(time_block, number, min_run_time, max_run_time,
                         [threshold](const std::vector<double>& times) {
                           return times.size() > 3 && meets_confidence(summarize(times), threshold);
                         });
}

}  // namespace opbench
