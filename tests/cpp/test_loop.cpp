// opbench/loop.h, barrier.h, clock.h: the loop runs the callable exactly n
// times, the clock moves forward, and an empty loop is not free.
#include "opbench/loop.h"

#include "check.h"

int main() {
  std::int64_t calls = 0;
  const std::int64_t ns = opbench::time_loop_ns([&] { ++calls; }, 1000);
  CHECK(calls == 1000);
  CHECK(ns >= 0);

  calls = 0;
  opbench::time_loop_ns([&] { return ++calls; }, 0);  // non-void result path
  CHECK(calls == 0);

  const std::int64_t a = opbench::now_ns();
  const std::int64_t b = opbench::now_ns();
  CHECK(b >= a);

  const auto info = opbench::measure_clock(1000);
  CHECK(info.read_cost_ns > 0);
  CHECK(info.resolution_ns > 0);

  // clobber_memory keeps a loop of nothing alive: 10M iterations take time
  // (at -O2 a dead loop would take ~0 ns).
  const std::int64_t empty = opbench::time_loop_ns([] {}, 10'000'000);
  CHECK(empty > 1'000'000);  // > 0.1 ns per iteration on any CPU

  int x = 41;
  opbench::do_not_optimize(x);
  int y = x + 1;
  opbench::do_not_optimize(y);
  CHECK(y == 42);
  opbench::do_not_optimize(x * 2);  // a temporary: the T&& overload
  int values[64] = {};
  opbench::do_not_optimize(values);  // wider than a register: a memory operand
  CHECK(values[63] == 0);

  // The const overload still works for old code (it is deprecated, see barrier.h).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  const int z = y + 1;
  opbench::do_not_optimize(z);
#pragma GCC diagnostic pop
  CHECK(z == 43);

  // Results returned by reference, mutable or const, and by value.
  struct Big {
    long v[64];
  };
  static Big big{};
  calls = 0;
  opbench::time_loop_ns(
      [&]() -> Big& {
        ++calls;
        return big;
      },
      10);
  opbench::time_loop_ns(
      [&]() -> const Big& {
        ++calls;
        return big;
      },
      10);
  opbench::time_loop_ns(
      [&] {
        ++calls;
        return big;
      },
      10);
  CHECK(calls == 30);
  CHECK_MAIN_END();
}
