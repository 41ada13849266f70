// Bindings for opbench/scheduler.h: the scheduler's counters around a timed block.
#include "opbench/scheduler.h"

#include "bindings/registry.h"

namespace py = pybind11;

OPBENCH_BINDINGS(scheduler) {
  py::class_<opbench::SchedProbe>(
      m, "SchedProbe",
      "Per-thread scheduler counters of this process around a timed block (Linux schedstat).\n"
      "Create it on the timing thread; call begin() before a block and end() after it.")
      .def(py::init<>())
      .def_property_readonly("available", &opbench::SchedProbe::available,
                             "Whether this kernel gives per-thread scheduler counters.")
      .def("begin", &opbench::SchedProbe::begin, "Snapshots every thread's counters.")
      .def(
          "end",
          [](opbench::SchedProbe& probe) {
            const opbench::SchedDelta d = probe.end();
            return py::make_tuple(d.ran_ns, d.waited_ns, d.own_waited_ns, d.timeslices, d.threads);
          },
          "(ran_ns, waited_ns, own_waited_ns, timeslices, threads) since begin(): nanoseconds "
          "the process's threads ran and waited runnable for a CPU (all, and the probing thread).");
}
