// Constructors of the built-in routers, referenced from the registry's built-in table (a table rather than
// self-registering statics, which a static library's linker would drop).
#pragma once

#include <memory>

#include "hymoe/moe.h"

namespace hymoe {

std::unique_ptr<Router> make_softmax_topk_router(const MoEConfig& config);
std::unique_ptr<Router> make_sigmoid_topk_router(const MoEConfig& config);

}  // namespace hymoe
