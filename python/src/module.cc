// hymoe._core: the one native module of the Python package. Translates hymoe::Error into ValueError (the library's
// errors are all bad input: a value, shape or file the caller gave) and registers each area's functions.
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "arrays.h"
#include "bindings.h"
#include "hymoe/error.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "hymoe's C++ core (private: use the hymoe package)";
  pybind11::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const hymoe::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
  // For the tests of the zero-copy rules: the address C++ reads a C-contiguous array at (no copy is made).
  m.def("_array_address", [](const pybind11::array& a, const std::string& dtype) {
    return reinterpret_cast<uintptr_t>(hymoe::python::contiguous_view(a, pybind11::dtype(dtype), "array", false).ptr);
  });
  hymoe::python::register_placement(m);
  hymoe::python::register_moe(m);
  hymoe::python::register_runtime(m);
}
