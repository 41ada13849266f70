// opbench._C: the native core. Each concept lives in its own bindings/<name>.cpp.
#include "bindings/registry.h"

#include <algorithm>
#include <cstring>

PYBIND11_MODULE(_C, m) {
  m.doc() = "opbench native core: clock, timing loops, callgrind client requests, CUDA events";
  auto& units = opbench::bindings::registry();
  // Registration order follows link order; sort so the module is the same on every build.
  std::sort(units.begin(), units.end(),
            [](const auto& a, const auto& b) { return std::strcmp(a.first, b.first) < 0; });
  for (const auto& [name, fn] : units) fn(m);
    // Timings of a debug build mislead; opbench.environment warns when this is true.
#ifdef NDEBUG
  m.attr("debug_build") = false;
#else
  m.attr("debug_build") = true;
#endif
}
