// Bindings for opbench/callgrind.h, as the submodule opbench._C.callgrind.
//
// A submodule keeps the names short for the generated child script, which calls
// them right at the edges of the measured loop.
#include "bindings/registry.h"
#include "opbench/callgrind.h"

#include <string>

namespace py = pybind11;
namespace cg = opbench::callgrind;

OPBENCH_BINDINGS(callgrind) {
  auto c = m.def_submodule("callgrind", "Callgrind client requests (no-ops outside valgrind).");
  c.def("available", &cg::available,
        "True when the extension was built with valgrind's headers (client requests work).");
  c.def("running_on_valgrind", &cg::running_on_valgrind,
        "True when this process runs under valgrind.");
  c.def("start_instrumentation", &cg::start_instrumentation,
        "CALLGRIND_START_INSTRUMENTATION: instrument code from here on.");
  c.def("stop_instrumentation", &cg::stop_instrumentation,
        "CALLGRIND_STOP_INSTRUMENTATION: stop instrumenting (run at uninstrumented speed).");
  c.def("toggle_collect", &cg::toggle_collect, "CALLGRIND_TOGGLE_COLLECT: flip event collection.");
  c.def("zero_stats", &cg::zero_stats, "CALLGRIND_ZERO_STATS: zero the counters.");
  c.def(
      "dump_stats",
      [](const py::object& reason) {
        if (reason.is_none()) {
          cg::dump_stats();
        } else {
          cg::dump_stats(reason.cast<std::string>().c_str());
        }
      },
      py::arg("reason") = py::none(),
      "CALLGRIND_DUMP_STATS(_AT): write the counters to the next output file and zero them.");
}
