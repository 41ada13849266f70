// opbench/stats.h: figures pinned to what torch.utils.benchmark.Measurement
// reports for the same samples (values computed with torch 2.13.0).
#include "opbench/stats.h"

#include "check.h"

int main() {
  using opbench::quantile_sorted;
  const std::vector<double> sorted{1, 2, 3, 4};
  CHECK_NEAR(quantile_sorted(sorted, 0.5), 2.5, 1e-12);
  CHECK_NEAR(quantile_sorted(sorted, 0.25), 1.75, 1e-12);
  CHECK_NEAR(quantile_sorted(sorted, 0.75), 3.25, 1e-12);
  CHECK_NEAR(quantile_sorted(sorted, 0.0), 1.0, 1e-12);
  CHECK_NEAR(quantile_sorted(sorted, 1.0), 4.0, 1e-12);
  CHECK_NEAR(quantile_sorted({7}, 0.3), 7.0, 1e-12);

  const auto s = opbench::summarize({4e-6, 1e-6, 3e-6, 2e-6, 10e-6});
  CHECK(s.count == 5);
  CHECK_NEAR(s.median, 3e-6, 1e-15);
  CHECK_NEAR(s.mean, 4e-6, 1e-15);
  CHECK_NEAR(s.p25, 2e-6, 1e-15);
  CHECK_NEAR(s.p75, 4e-6, 1e-15);
  CHECK_NEAR(s.iqr, 2e-6, 1e-15);
  CHECK(s.min == 1e-6 && s.max == 10e-6);
  CHECK(!opbench::meets_confidence(s));  // IQR is 67% of the median
  CHECK(opbench::meets_confidence(opbench::summarize({1.0, 1.0, 1.01, 1.0})));

  // Tight samples around 1 ms: the 25 ns floor caps precision at 4 figures.
  CHECK(opbench::significant_figures({1e-3, 1e-3, 1e-3, 1e-3}) == 4);
  // Spread of ~10% around 1 us: one figure.
  CHECK(opbench::significant_figures({0.9e-6, 1.0e-6, 1.1e-6, 1.2e-6, 0.8e-6}) == 1);

  bool threw = false;
  try {
    opbench::summarize({});
  } catch (const std::invalid_argument&) {
    threw = true;
  }
  CHECK(threw);
  CHECK_MAIN_END();
}
