// The areas of the extension hymoe._core. module.cc calls each register_*() once, in this order; each area lives in
// its own translation unit and adds its functions (names starting with the area, e.g. placement_plan) to the one
// module. The Python package (python/hymoe/) wraps them; nothing here is public API.
#pragma once

#include <pybind11/pybind11.h>

namespace hymoe::python {

void register_placement(pybind11::module_& m);  // placement_bindings.cc: planner, statistics, evaluation, replay
void register_moe(pybind11::module_& m);        // moe_bindings.cc: the MoE layer behind hymoe.torch
void register_runtime(pybind11::module_& m);    // runtime_bindings.cc: the expert engine behind hymoe.kt

}  // namespace hymoe::python
