// opbench/autorange.h with a deterministic fake clock: each run "takes" 1 us
// and each block has a fixed 10 ns overhead, so the search is exact.
#include "opbench/autorange.h"

#include "check.h"

int main() {
  std::vector<std::int64_t> asked;
  auto fake = [&](std::int64_t n) {
    asked.push_back(n);
    return 10e-9 + 1e-6 * static_cast<double>(n);
  };
  // min_run_time 0.2 s: needs a block >= 0.2 ms and overhead <= 1e-4 of it:
  // n = 1000 gives 1 ms (overhead ratio 1e-5).
  CHECK(opbench::estimate_block_size(fake, 0.2) == 1000);
  CHECK((asked == std::vector<std::int64_t>{0, 0, 0, 0, 0, 1, 10, 100, 1000}));

  const auto blocks = opbench::blocked_autorange(fake, 0.2);
  CHECK(blocks.number_per_run == 1000);
  // 0.2 s of 1.00001 ms blocks: 200 blocks (the 200th crosses 0.2 s).
  CHECK(blocks.times.size() == 200);
  CHECK_NEAR(blocks.times.front(), 1.00001e-6, 1e-15);

  // Identical blocks meet any IQR threshold: adaptive stops after 4 blocks
  // once min_run_time is spent.
  const auto adaptive = opbench::adaptive_autorange(fake, 0.1, 0.0, 10.0);
  CHECK(adaptive.times.size() == 4);
  CHECK_MAIN_END();
}
