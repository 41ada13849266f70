// A standalone C++ benchmark with opbench's header library alone: no Python,
// no torch. It times two ways of summing a vector of floats (a plain loop and
// std::accumulate over doubles) with the block-size search and stopping rules
// of opbench.Timer (opbench/autorange.h), and prints the statistics the Python
// layer prints for the same samples (opbench/stats.h).
//
// Build and run:
//
//   inc=$(python -c 'import opbench; print(opbench.include_dir())')
//   g++ -std=c++17 -O2 -I"$inc" examples/cpp_autorange.cpp -o cpp_autorange && ./cpp_autorange
//
// Each benchmark prints a summary line, then its raw per-run times (seconds),
// one block per line, so other tools can read the samples back:
//
//   sum_float: blocked_autorange, 1000 runs per block, 40 blocks
//     median 1.02 us  IQR 0.01 us  (mean 1.03 us, min 1.01 us, max 1.12 us)  4 significant figures
//   samples: 1.021e-06 1.019e-06 ...
//
// An optional argument sets min_run_time in seconds (default 0.2).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "opbench/autorange.h"
#include "opbench/loop.h"
#include "opbench/stats.h"

namespace {

void report(const char* name, const char* how, const opbench::Blocks& blocks) {
  const opbench::Summary s = opbench::summarize(blocks.times);
  std::printf("%s: %s, %lld runs per block, %zu blocks\n", name, how,
              static_cast<long long>(blocks.number_per_run), blocks.times.size());
  std::printf(
      "  median %.3g us  IQR %.3g us  (mean %.3g us, min %.3g us, max %.3g us)"
      "  %d significant figures%s\n",
      s.median * 1e6, s.iqr * 1e6, s.mean * 1e6, s.min * 1e6, s.max * 1e6,
      opbench::significant_figures(blocks.times),
      opbench::meets_confidence(s, 0.25) ? "" : "  (noisy: IQR above 25% of the median)");
  std::printf("samples:");
  for (const double t : blocks.times) std::printf(" %.17g", t);
  std::printf("\n");
}

// The block callable autorange wants: seconds for `n` runs of `f`.
template <class F>
auto seconds_for(F& f) {
  return [&f](std::int64_t n) { return static_cast<double>(opbench::time_loop_ns(f, n)) * 1e-9; };
}

}  // namespace

int main(int argc, char** argv) {
  const double min_run_time = argc > 1 ? std::atof(argv[1]) : 0.2;
  if (!(min_run_time > 0)) {
    std::fprintf(stderr, "usage: %s [min_run_time_seconds > 0]\n", argv[0]);
    return 2;
  }
  std::vector<float> values(4096);
  std::iota(values.begin(), values.end(), 0.5f);

  // Returned by value: time_loop_ns passes the result through opbench's
  // barrier, so the sum is computed on every run and never hoisted.
  auto sum_float = [&values] {
    float total = 0;
    for (const float v : values) total += v;
    return total;
  };
  auto sum_double = [&values] { return std::accumulate(values.begin(), values.end(), 0.0); };

  auto time_float = seconds_for(sum_float);
  report("sum_float", "blocked_autorange", opbench::blocked_autorange(time_float, min_run_time));
  auto time_double = seconds_for(sum_double);
  report("sum_double", "adaptive_autorange",
         opbench::adaptive_autorange(time_double, 0.1, min_run_time, 10 * min_run_time));
  return 0;
}
