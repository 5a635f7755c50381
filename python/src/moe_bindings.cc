// The MoE layer's half of hymoe._core, behind hymoe.torch (issue 15: build_moe, the autograd Function,
// grouped_expert_forward, load_moe_layer). Registered by module.cc; functions are named moe_*.
#include "bindings.h"

namespace hymoe::python {

void register_moe(pybind11::module_& m) { (void)m; }

}  // namespace hymoe::python
