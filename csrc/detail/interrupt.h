// detail/interrupt.h: Ctrl-C inside the native timing loops.
//
// CPython runs signal handlers only between bytecodes of the main thread, so a
// loop in C++ that holds the GIL never sees Ctrl-C unless it asks: with the
// default number=1'000'000 and a 1 ms statement, that is 17 minutes that cannot
// be interrupted. Asking (PyErr_CheckSignals) on every iteration would add to
// every per-call figure; asking every few milliseconds of loop time costs one
// decrement and a predictable branch per iteration (and one clock read per
// check) and still stops well inside 100 ms.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

#include <cstdint>

#include "opbench/clock.h"

namespace opbench::detail {

/// Polls for pending signals about every `period_ns` of loop time. Call tick()
/// once per iteration, with the GIL held.
class SignalPoll {
 public:
  explicit SignalPoll(std::int64_t period_ns = 5'000'000) : period_ns_(period_ns), last_(now_ns()) {}

  /// One iteration done. Throws pybind11::error_already_set when a signal
  /// handler raised (KeyboardInterrupt for Ctrl-C): the loop stops there.
  void tick() {
    if (--countdown_ == 0) check();
  }

  /// Runs pending signal handlers now, and re-aims the stride so that checks
  /// come about once per period: iterations are timed by the checks themselves,
  /// so a statement of any duration (1 ns or 1 s) is polled at the same rate.
  void check() {
    if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
    const std::int64_t now = now_ns();
    const std::int64_t elapsed = now - last_;
    last_ = now;
    if (elapsed < period_ns_ / 2 && stride_ < kMaxStride) {
      stride_ *= 2;
    } else if (elapsed > 2 * period_ns_ && stride_ > 1) {
      stride_ /= 2;
    }
    countdown_ = stride_;
  }

 private:
  static constexpr long long kMaxStride = 1LL << 40;
  std::int64_t period_ns_;
  std::int64_t last_;
  long long stride_ = 1;
  long long countdown_ = 1;
};

}  // namespace opbench::detail
