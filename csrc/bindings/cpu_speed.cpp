// Bindings for opbench/cpu_speed.h: how fast this core runs right now.
#include "opbench/cpu_speed.h"

#include "bindings/registry.h"

namespace py = pybind11;

OPBENCH_BINDINGS(cpu_speed) {
  m.def("cpu_speed_probe_ns", &opbench::cpu_speed_probe_ns, py::arg("tries") = 3,
        py::arg("iterations") = 2000,
        "Nanoseconds a fixed mix of integer work and L1 traffic takes now (the fastest of "
        "`tries`); more than its best means the core runs slower (a busy hyperthread "
        "sibling, another virtual machine, a hot laptop).");
}
