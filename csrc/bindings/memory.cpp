// opbench._C.memory: the Python side of the allocation counter (csrc/memory/counter.c,
// shipped as libopbench_memory.so beside this extension).
//
// The counter is found in the process's global scope when it was preloaded (it then
// counts the C library's allocations too), else loaded from the path given to
// attach() (Python objects only). The switches a measured window flips between the
// statement's calls (begin, mark, pause, stop) and the C++ loop (run_cpp) are
// plain METH_NOARGS / METH_FASTCALL C functions: calling them allocates nothing, so
// the window holds the statement's allocations and no one else's (pybind11's
// dispatcher allocates its argument vector).
#include <Python.h>
#include <dlfcn.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <string>

#include "bindings/registry.h"

namespace py = pybind11;

namespace {

constexpr int kTallies = 3;
const char* const kTallyNames[kTallies] = {"native", "python", "host"};

struct Tally {
  std::int64_t allocations, bytes, live, live_blocks, peak;
};

struct Snapshot {
  Tally now[kTallies];
  Tally mark[kTallies];
  std::int64_t processes;
  std::int64_t failed;
};

// The counter's entry points (null until attach() finds them).
struct Api {
  int (*version)() = nullptr;
  int (*interposing)() = nullptr;
  void (*begin)() = nullptr;
  void (*set_state)(int) = nullptr;
  void (*mark)() = nullptr;
  void (*read)(Snapshot*) = nullptr;
  std::size_t (*snapshot_size)() = nullptr;
  int (*hook_python)() = nullptr;
};
Api g_api;

template <typename Fn>
bool bind(void* handle, Fn& out, const char* name) {
  out = reinterpret_cast<Fn>(dlsym(handle, name));
  return out != nullptr;
}

bool bind_all(void* handle) {
  Api api;
  const bool ok = bind(handle, api.version, "opbench_memory_version") &&
                  bind(handle, api.interposing, "opbench_memory_interposing") &&
                  bind(handle, api.begin, "opbench_memory_begin") &&
                  bind(handle, api.set_state, "opbench_memory_set_state") &&
                  bind(handle, api.mark, "opbench_memory_mark") &&
                  bind(handle, api.read, "opbench_memory_read") &&
                  bind(handle, api.snapshot_size, "opbench_memory_snapshot_size") &&
                  bind(handle, api.hook_python, "opbench_memory_hook_python");
  if (!ok) return false;
  if (api.version() != 1 || api.snapshot_size() != sizeof(Snapshot)) {
    throw std::runtime_error("libopbench_memory does not match this opbench._C (rebuild opbench)");
  }
  g_api = api;
  return true;
}

// The counter in use: the preloaded one, else the one at `path` (loaded now).
// Returns whether it counts the C library's allocations (it was preloaded).
bool attach(const std::string& path) {
  if (g_api.version == nullptr && !bind_all(RTLD_DEFAULT)) {
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      throw std::runtime_error(std::string("cannot load the allocation counter ") + path + ": " +
                               (why != nullptr ? why : "unknown error"));
    }
    if (!bind_all(handle)) throw std::runtime_error(path + " is not opbench's allocation counter");
  }
  return g_api.interposing() != 0;
}

void need() {
  if (g_api.version == nullptr) throw std::runtime_error("opbench._C.memory: attach() the counter first");
}

PyObject* not_attached() {
  PyErr_SetString(PyExc_RuntimeError, "opbench._C.memory: attach() the counter first");
  return nullptr;
}

// The counter's states (csrc/memory/counter.c).
enum State { kOff = 0, kFreesOnly = 2 };

PyObject* switch_to(int state) {
  if (g_api.set_state == nullptr) return not_attached();
  g_api.set_state(state);
  Py_RETURN_NONE;
}
PyObject* begin(PyObject*, PyObject*) {
  if (g_api.begin == nullptr) return not_attached();
  g_api.begin();
  Py_RETURN_NONE;
}
PyObject* pause(PyObject*, PyObject*) { return switch_to(kFreesOnly); }
PyObject* stop(PyObject*, PyObject*) { return switch_to(kOff); }
PyObject* mark(PyObject*, PyObject*) {
  if (g_api.mark == nullptr) return not_attached();
  g_api.mark();
  Py_RETURN_NONE;
}

// run_cpp(run, session, number): `number` runs of a compiled C++ Timer's loop
// (opbench_run at address `run`, on `session`). Returns 0, or the
// library's status (1: the statement threw; opbench_error says why). The GIL stays
// held: another Python thread must not run (and allocate) inside the window.
using RunFn = int (*)(void*, std::int64_t, std::int64_t*);
PyObject* run_cpp(PyObject*, PyObject* const* args, Py_ssize_t nargs) {
  if (nargs != 3) {
    PyErr_SetString(PyExc_TypeError, "run_cpp(run, session, number) takes 3 arguments");
    return nullptr;
  }
  const auto run = reinterpret_cast<RunFn>(PyLong_AsVoidPtr(args[0]));
  void* session = PyLong_AsVoidPtr(args[1]);
  const long long number = PyLong_AsLongLong(args[2]);
  if (PyErr_Occurred()) return nullptr;
  if (run == nullptr || session == nullptr || number < 0) {
    PyErr_SetString(PyExc_ValueError, "run_cpp: null entry point or session, or a negative number");
    return nullptr;
  }
  std::int64_t elapsed = 0;
  const int status = run(session, number, &elapsed);
  return PyLong_FromLong(status);  // 0 and 1 are cached small ints: no allocation
}

PyMethodDef g_defs[] = {
    {"begin", begin, METH_NOARGS, "Counts from now: every tally zero, no block known."},
    {"pause", pause, METH_NOARGS,
     "Stops counting allocations but keeps tallying frees of the blocks counted (the measuring "
     "code's own work between the halves of a window)."},
    {"stop", stop, METH_NOARGS, "Stops counting; the tallies stay for read()."},
    {"mark", mark, METH_NOARGS,
     "Keeps a copy of the tallies for read()['mark'] and restarts the peaks from now."},
    {"run_cpp", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(run_cpp)), METH_FASTCALL,
     "run_cpp(run, session, number): runs a compiled C++ Timer's loop; 0 or its error status."},
};

py::dict tallies(const Tally* t) {
  py::dict out;
  for (int i = 0; i < kTallies; ++i) {
    py::dict d;
    d["allocations"] = t[i].allocations;
    d["bytes"] = t[i].bytes;
    d["live"] = t[i].live;
    d["live_blocks"] = t[i].live_blocks;
    d["peak"] = t[i].peak;
    out[kTallyNames[i]] = d;
  }
  return out;
}

}  // namespace

OPBENCH_BINDINGS(memory) {
  auto mem = m.def_submodule("memory", "The allocation counter's switches (opbench.memory).");
  mem.def("attach", &attach, py::arg("path"),
          "Finds the allocation counter (preloaded, else loads it from `path`); returns whether it "
          "counts the C library's allocations (it was preloaded with LD_PRELOAD).");
  mem.def("attached", [] { return g_api.version != nullptr; }, "Whether attach() found the counter.");
  mem.def(
      "hook_python",
      [] {
        need();
        if (g_api.hook_python() != 0) throw std::runtime_error("no CPython allocator to hook");
      },
      "Counts Python objects from now on: CPython's allocator domains wrapped (once).");
  mem.def(
      "read",
      [] {
        need();
        Snapshot s{};
        g_api.read(&s);
        py::dict out;
        out["now"] = tallies(s.now);
        out["mark"] = tallies(s.mark);
        out["processes"] = s.processes;
        out["failed"] = s.failed;
        return out;
      },
      "The tallies: {'now': {source: {...}}, 'mark': {...}, 'processes': n, 'failed': n}.");
  for (PyMethodDef& def : g_defs) {
    PyObject* fn = PyCFunction_NewEx(&def, nullptr, mem.attr("__name__").ptr());
    if (fn == nullptr) throw py::error_already_set();
    mem.add_object(def.ml_name, py::reinterpret_steal<py::object>(fn));
  }
}
