// Bindings for opbench/clock.h: the native clock and its measured properties.
#include "opbench/clock.h"
#include "bindings/registry.h"

namespace py = pybind11;

namespace {

// Measured once, on first request: it takes ~5 ms and most processes never ask.
const opbench::ClockInfo& clock_info() {
  static const opbench::ClockInfo info = opbench::measure_clock();
  return info;
}

}  // namespace

OPBENCH_BINDINGS(clock) {
  m.def("now_ns", &opbench::now_ns,
        "Monotonic clock in integer nanoseconds (arbitrary epoch; use differences).");
  m.def(
      "now", [] { return static_cast<double>(opbench::now_ns()) * 1e-9; },
      "Monotonic clock in seconds, as a float (the same clock as now_ns).");
  m.def(
      "clock_info",
      [] {
        const auto& info = clock_info();
        py::dict d;
        d["read_cost_ns"] = info.read_cost_ns;
        d["resolution_ns"] = info.resolution_ns;
        return d;
      },
      "Cost of one clock read and the smallest observed tick, in ns (measured at first call).");
}
