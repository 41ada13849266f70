// Self-registration of binding units.
//
// Each csrc/bindings/<concept>.cpp registers the functions of one concept with
// OPBENCH_BINDINGS(name) { ... }, and module.cpp runs them all. Adding a concept
// is adding a file: module.cpp and CMakeLists.txt stay untouched.
#pragma once

#include <pybind11/pybind11.h>

#include <functional>
#include <utility>
#include <vector>

namespace opbench::bindings {

using Registrar = void (*)(pybind11::module_&);

// A function-local static avoids the static-initialisation-order problem: the
// registry exists before the first registrar is added, whatever the link order.
inline std::vector<std::pair<const char*, Registrar>>& registry() {
  static std::vector<std::pair<const char*, Registrar>> r;
  return r;
}

struct AddRegistrar {
  AddRegistrar(const char* name, Registrar fn) { registry().emplace_back(name, fn); }
};

}  // namespace opbench::bindings

#define OPBENCH_BINDINGS(name)                                                                    \
  static void opbench_bind_##name(pybind11::module_& m);                                          \
  static ::opbench::bindings::AddRegistrar opbench_registrar_##name(#name, &opbench_bind_##name); \
  static void opbench_bind_##name(pybind11::module_& m)
