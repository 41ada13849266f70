// Bindings for the native timing loop over a Python callable.
//
// The loop holds the GIL throughout (the callable is Python), allocates nothing
// per iteration and calls through vectorcall, the cheapest call protocol
// CPython has; the only per-iteration work besides the call is a DECREF of its
// result and a countdown to the next Ctrl-C check (detail/interrupt.h).
#include <Python.h>

#include "bindings/registry.h"
#include "detail/interrupt.h"
#include "detail/pycall.h"
#include "opbench/clock.h"

namespace py = pybind11;

namespace {

// Calls fn() number times between two native clock reads; returns seconds.
// `sync` (or None) runs just before each clock read, outside the loop, for
// devices whose work is asynchronous (CUDA): the stop read must come after the
// device finished what the loop queued.
double time_call(py::handle fn, long long number, py::handle sync) {
  if (number < 0) throw py::value_error("number must be >= 0, got " + std::to_string(number));
  const opbench::detail::NoArgCall call(fn);  // resolves vectorcall once; checks callable
  const bool has_sync = !sync.is_none();

  auto run_sync = [&] {
    if (has_sync) sync();
  };
  run_sync();
  const std::int64_t start = opbench::now_ns();
  // An exception propagates with the callable's own traceback; Ctrl-C stops
  // the loop within a few milliseconds as KeyboardInterrupt.
  opbench::detail::SignalPoll poll;
  for (long long i = 0; i < number; ++i) {
    call();
    poll.tick();
  }
  run_sync();
  const std::int64_t stop = opbench::now_ns();
  return static_cast<double>(stop - start) * 1e-9;
}

// The cheapest possible callable: a METH_NOARGS C function. Timing the loop
// over it measures the harness (loop + vectorcall dispatch), not any Python code.
PyObject* noop(PyObject*, PyObject*) { Py_RETURN_NONE; }
PyMethodDef noop_def = {"noop", noop, METH_NOARGS, "Does nothing; the reference for loop overhead."};

}  // namespace

OPBENCH_BINDINGS(loop) {
  m.def("time_call", &time_call, py::arg("fn"), py::arg("number"), py::arg("sync") = py::none(),
        "Call fn() `number` times between two native clock reads and return the elapsed "
        "seconds. `sync`, if given, is called before each of the two clock reads.");
  PyObject* fn = PyCFunction_NewEx(&noop_def, nullptr, m.attr("__name__").ptr());
  if (fn == nullptr) throw py::error_already_set();
  m.add_object("noop", py::reinterpret_steal<py::object>(fn));
}
