// opbench/stats.h: the statistics the Python layer reports, in C++.
//
// Same definitions as opbench.Measurement and torch.utils.benchmark's
// Measurement: quantiles by linear interpolation between order statistics
// (numpy's and torch.quantile's default), IQR = p75 - p25, and the
// "significant figures" estimate derived from the spread, so a C++ program
// and the Python layer print the same numbers for the same samples.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <stdexcept>
#include <vector>

namespace opbench {

inline constexpr double kMinConfidenceInterval = 25e-9;  // seconds, torch's floor
inline constexpr int kMaxSignificantFigures = 4;

/// The q-quantile (0 <= q <= 1) of already sorted samples, linear interpolation.
inline double quantile_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) throw std::invalid_argument("quantile of no samples");
  if (q < 0.0 || q > 1.0) throw std::invalid_argument("quantile q must be in [0, 1]");
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

/// Summary of per-run times (seconds per run, one sample per block).
struct Summary {
  std::size_t count = 0;
  double mean = 0, median = 0, p25 = 0, p75 = 0, iqr = 0, min = 0, max = 0;
};

inline Summary summarize(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("summarize needs at least one sample");
  std::sort(samples.begin(), samples.end());
  Summary s;
  s.count = samples.size();
  double total = 0;
  for (double x : samples) total += x;
  s.mean = total / static_cast<double>(s.count);
  s.median = quantile_sorted(samples, 0.5);
  s.p25 = quantile_sorted(samples, 0.25);
  s.p75 = quantile_sorted(samples, 0.75);
  s.iqr = s.p75 - s.p25;
  s.min = samples.front();
  s.max = samples.back();
  return s;
}

/// Digits of the median that the spread supports, defined exactly as torch's
/// Measurement.significant_figures: the population standard deviation of the
/// middle half of the sorted samples gives a 90% interval (z = 1.645) on the
/// median, floored at 25 ns; the answer is floor(log10(median / interval)),
/// clamped to [1, 4]. `samples` are seconds per run.
inline int significant_figures(std::vector<double> samples) {
  if (samples.empty()) throw std::invalid_argument("significant_figures of no samples");
  std::sort(samples.begin(), samples.end());
  const std::size_t n = samples.size();
  const std::size_t lo = n / 4;
  const auto hi = static_cast<std::size_t>(std::ceil(3.0 * static_cast<double>(n) / 4.0));
  double mean = 0;
  for (std::size_t i = lo; i < hi; ++i) mean += samples[i];
  const double m = static_cast<double>(hi - lo);
  mean /= m;
  double var = 0;
  for (std::size_t i = lo; i < hi; ++i) var += (samples[i] - mean) * (samples[i] - mean);
  const double stddev = std::sqrt(var / m);
  const double interval = std::max(1.645 * stddev / std::sqrt(m), kMinConfidenceInterval);
  const int figures = static_cast<int>(std::floor(std::log10(quantile_sorted(samples, 0.5) / interval)));
  return std::min(std::max(figures, 1), kMaxSignificantFigures);
}

/// IQR / median below `threshold`: the stop rule of adaptive_autorange and the
/// test behind Measurement's "WARNING: Interquartile range is ..." (0.1 and 0.25).
inline bool meets_confidence(const Summary& s, double threshold = 0.1) {
  return s.iqr / s.median < threshold;
}

}  // namespace opbench
