// Python functions as callgrind sees them: the submodule opbench._C.python_frames.
//
// Callgrind counts instructions per machine-code function. A Python function's
// work happens in CPython's eval loop (_PyEval_EvalFrameDefault, one function for
// all Python code; in 3.11 Python-to-Python calls do not even leave it), so a
// profile names the interpreter, never the Python function whose cost changed.
//
// While started, this module installs a frame evaluation function (PEP 523): every
// Python frame is then evaluated through two trampolines, distinct machine-code
// functions chosen by code object:
//
//   hook -> callout<caller's slot> -> enter<callee's slot> -> _PyEval_EvalFrameDefault
//
// A code object gets a slot (0..kSlots-1) the first time one of its frames runs;
// slot 0 is "no Python caller". Callgrind's inclusive cost of enter<k> is what the
// frames of slot k's code cost, callees included; that of callout<k> is what the
// Python functions they call cost. Their difference is slot k's own cost: its
// bytecode, and the C code it runs (builtins, allocation) that no Python frame
// of its own calls. Nested and recursive frames telescope: each frame's cost is
// counted once in its own enter<> and once in its caller's callout<>.
//
// The trampolines are exported (default visibility): the shipped module is
// stripped, and only the dynamic symbol table survives for callgrind to name them
// by. Calls while the hook is installed take CPython's slower path (no inlined
// Python-to-Python calls), so these counts are for finding where a change went,
// never for the gate: opbench counts the gated figures without the hook.
//
// CPython 3.11 only (its _PyInterpreterFrame layout and _PyCFrame chain); available()
// is false elsewhere.
#include <Python.h>

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "bindings/registry.h"

namespace py = pybind11;

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
#define OPBENCH_PYTHON_FRAMES 1
#endif

#if defined(__GNUC__) && !defined(__clang__)
// noipa: no inlining, cloning or identical-code folding (each slot must stay its own
// function for callgrind to tell them apart).
#define OPBENCH_TRAMPOLINE __attribute__((noipa, visibility("default")))
#else
#define OPBENCH_TRAMPOLINE __attribute__((noinline, visibility("default")))
#endif

namespace opbench::python_frames {

constexpr int kSlots = 512;

#if defined(OPBENCH_PYTHON_FRAMES)

// The head of CPython 3.11's _PyInterpreterFrame (Include/internal/pycore_frame.h):
// only f_code is read.
struct FrameHead {
  PyObject* f_func;
  PyObject* f_globals;
  PyObject* f_builtins;
  PyObject* f_locals;
  PyCodeObject* f_code;
};

using Eval = PyObject* (*)(PyThreadState*, struct _PyInterpreterFrame*, int);

// Slot k's code object (a strong reference), in the order slots were handed out.
std::vector<PyObject*>& codes() {
  static std::vector<PyObject*> all{nullptr};  // slot 0: no Python caller
  return all;
}

Py_ssize_t extra_index = -1;
_PyFrameEvalFunction previous = nullptr;
bool installed = false;

int slot_of(PyCodeObject* code) {
  if (code == nullptr) return 0;
  void* extra = nullptr;
  auto* obj = reinterpret_cast<PyObject*>(code);
  if (_PyCode_GetExtra(obj, extra_index, &extra) == 0 && extra != nullptr) {
    return static_cast<int>(reinterpret_cast<std::intptr_t>(extra));
  }
  auto& all = codes();
  // The last slot holds every code object beyond the others ("other functions").
  int slot = static_cast<int>(all.size()) < kSlots ? static_cast<int>(all.size()) : kSlots - 1;
  if (slot == static_cast<int>(all.size())) {
    Py_INCREF(obj);
    all.push_back(obj);
  }
  if (_PyCode_SetExtra(obj, extra_index, reinterpret_cast<void*>(static_cast<std::intptr_t>(slot))) != 0) {
    PyErr_Clear();
  }
  return slot;
}

PyCodeObject* code_of(struct _PyInterpreterFrame* frame) {
  return frame == nullptr ? nullptr : reinterpret_cast<FrameHead*>(frame)->f_code;
}

template <int K>
OPBENCH_TRAMPOLINE PyObject* enter(PyThreadState* ts, struct _PyInterpreterFrame* frame, int throwflag) {
  PyObject* result = _PyEval_EvalFrameDefault(ts, frame, throwflag);
  asm volatile("" : "+r"(result));  // no tail call: the trampoline stays on the stack
  return result;
}

template <std::size_t... K>
constexpr std::array<Eval, sizeof...(K)> enters(std::index_sequence<K...>) {
  return {&enter<static_cast<int>(K)>...};
}

const std::array<Eval, kSlots> kEnter = enters(std::make_index_sequence<kSlots>{});

using Callout = PyObject* (*)(PyThreadState*, struct _PyInterpreterFrame*, int, int);

template <int K>
OPBENCH_TRAMPOLINE PyObject* callout(PyThreadState* ts, struct _PyInterpreterFrame* frame, int throwflag,
                                     int slot) {
  PyObject* result = kEnter[static_cast<std::size_t>(slot)](ts, frame, throwflag);
  asm volatile("" : "+r"(result));
  return result;
}

template <std::size_t... K>
constexpr std::array<Callout, sizeof...(K)> callouts(std::index_sequence<K...>) {
  return {&callout<static_cast<int>(K)>...};
}

const std::array<Callout, kSlots> kCallout = callouts(std::make_index_sequence<kSlots>{});

PyObject* hook(PyThreadState* ts, struct _PyInterpreterFrame* frame, int throwflag) {
  int slot = slot_of(code_of(frame));
  // The frame running when this one was called: its caller (a Python frame, or the
  // last one before the C code that called it).
  _PyCFrame* cframe = ts->cframe;
  int caller = cframe != nullptr ? slot_of(code_of(cframe->current_frame)) : 0;
  return kCallout[static_cast<std::size_t>(caller)](ts, frame, throwflag, slot);
}

void start() {
  if (installed) return;
  if (extra_index < 0) {
    extra_index = _PyEval_RequestCodeExtraIndex(nullptr);
    if (extra_index < 0) throw py::error_already_set();
  }
  PyInterpreterState* interp = PyInterpreterState_Get();
  previous = _PyInterpreterState_GetEvalFrameFunc(interp);
  _PyInterpreterState_SetEvalFrameFunc(interp, &hook);
  installed = true;
}

void stop() {
  if (!installed) return;
  _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), previous);
  installed = false;
}

py::list slots() {
  py::list out;
  for (PyObject* code : codes()) {
    out.append(code == nullptr ? py::none() : py::reinterpret_borrow<py::object>(code));
  }
  return out;
}

#endif  // OPBENCH_PYTHON_FRAMES

}  // namespace opbench::python_frames

OPBENCH_BINDINGS(python_frames) {
  namespace pf = opbench::python_frames;
  auto f = m.def_submodule("python_frames",
                           "Python functions as callgrind sees them: per-code-object trampolines "
                           "(CPython 3.11).");
  f.attr("SLOTS") = pf::kSlots;
#if defined(OPBENCH_PYTHON_FRAMES)
  f.def("available", [] { return true; }, "True on the CPython this module supports (3.11).");
  f.def("start", &pf::start,
        "Evaluates every Python frame through the trampolines enter<slot> and callout<slot> "
        "(PEP 523), until stop().");
  f.def("stop", &pf::stop, "Restores the frame evaluation function start() replaced.");
  f.def("slots", &pf::slots,
        "The code object of each slot handed out so far (slot 0: None, no Python caller; the "
        "last slot, once reached, holds every later one).");
#else
  f.def("available", [] { return false; }, "True on the CPython this module supports (3.11).");
  f.def("start", [] { throw py::value_error("python_frames needs CPython 3.11"); });
  f.def("stop", [] {});
  f.def("slots", [] { return py::list(); });
#endif
}
