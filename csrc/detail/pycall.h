// detail/pycall.h: call a Python callable with no arguments, as cheaply as CPython allows.
//
// Timing loops call the statement millions of times; vectorcall skips the
// tuple and dict that PyObject_Call would build. Shared by every native loop
// that times a Python callable, so they all pay the same per-call overhead.
#pragma once

#include <Python.h>
#include <pybind11/pybind11.h>

namespace opbench::detail {

/// A prepared zero-argument call: resolves the vectorcall slot once.
class NoArgCall {
 public:
  explicit NoArgCall(pybind11::handle fn) : fn_(fn.ptr()) {
    if (!PyCallable_Check(fn_)) throw pybind11::type_error("stmt must be callable");
    call_ = PyVectorcall_Function(fn_);
  }
  /// Calls once and drops the result; a Python exception propagates with its traceback.
  void operator()() const {
    PyObject* r = call_ ? call_(fn_, nullptr, 0, nullptr) : PyObject_CallNoArgs(fn_);
    if (r == nullptr) throw pybind11::error_already_set();
    Py_DECREF(r);
  }

 private:
  PyObject* fn_;
  vectorcallfunc call_;
};

}  // namespace opbench::detail
